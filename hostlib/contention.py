"""What a benchmark reports besides time: the load, the CPU it took, and a busy machine on demand.

Training hosts are never idle (data loaders, the optimizer, other jobs), and
a figure measured on an idle machine is not the product's figure. `Hog(n)`
runs n busy processes at normal priority for the duration of a `with` block,
so that every benchmark can be run idle and busy side by side (`--hog N`);
`load_average()` is printed with every figure; `CpuClock` is the CPU
seconds (user + sys, every thread) the calling process spent, for CPU
seconds per GB.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from types import TracebackType


def _spin() -> None:
    """A busy process: nothing but arithmetic, until it is terminated."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    n = 0
    while True:
        n = (n * 1103515245 + 12345) & 0xFFFFFFFF


class Hog:
    """`n` processes that each keep a core busy at normal priority while the block runs."""

    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"--hog takes a number of busy processes >= 0, not {n}")
        self.n = n
        self._processes: list[multiprocessing.process.BaseProcess] = []

    def __enter__(self) -> Hog:
        ctx = multiprocessing.get_context("spawn")
        for i in range(self.n):
            process = ctx.Process(target=_spin, name=f"hog-{i}", daemon=True)
            process.start()
            self._processes.append(process)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        self._processes.clear()

    def describe(self) -> str:
        return (
            f"{self.n} busy process{'es' if self.n != 1 else ''} (--hog {self.n})"
            if self.n
            else "idle (no --hog)"
        )


def load_average() -> float:
    """The one-minute load average, printed with every figure."""
    return os.getloadavg()[0]


class CpuClock:
    """CPU seconds (user + sys, all threads) this process spent between two reads."""

    def __init__(self) -> None:
        self._start = time.process_time()

    def restart(self) -> None:
        self._start = time.process_time()

    def seconds(self) -> float:
        return time.process_time() - self._start


# benchmarks/bench_torch.py names the switch's process to the training examples in this variable, so
# their rank 0 counts the switch's CPU per step beside its own
ENV_SWITCH_PID = "P4REDUCE_BENCH_SWITCH_PID"


class ProcessCpuClock:
    """CPU seconds (user + sys, all threads) another process spent between two reads, from /proc.

    The embedded switch is a process of its own on the host's cores, so a benchmark that counts only
    its workers' CPU leaves out the part of the system that adds. Each thread's
    /proc/PID/task/TID/schedstat gives its run time in nanoseconds (/proc/PID/stat's ticks are 10 ms,
    coarser than one 1M call); a thread that exits between two reads takes its time with it, which
    the switch's threads, living as long as the switch, do not."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start = self._now()

    def _now(self) -> float:
        total = 0
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except FileNotFoundError:
            raise ProcessLookupError(f"no process {self.pid}") from None
        for tid in tasks:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread ended since the listing
        return total / 1e9

    def restart(self) -> None:
        self._start = self._now()

    def seconds(self) -> float:
        return self._now() - self._start


def seconds_per_gb(cpu_seconds: float, tensor_bytes: int) -> float:
    """CPU seconds per GB (1e9 bytes) of input all-reduced."""
    return cpu_seconds / (tensor_bytes / 1e9) if tensor_bytes else float("nan")
