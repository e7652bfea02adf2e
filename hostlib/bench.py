"""`p4reduce-bench`: time verified all-reduces through the switch, optionally under loss and against Gloo.

    p4reduce-bench [--workers 4] [--sizes 1K,64K,1M] [--dtypes float32,int32] [--iters 3] [--runs 1]
                   [--drop-rate P] [--baseline gloo] [--controller HOST:PORT] [--hog N]

Starts a rootless p4reduce-switch and the controller daemon (or attaches to
a running controller), runs N worker processes on 127.0.0.2.., all-reduces
each size and dtype `iters` times, checks every result against numpy's sum
(exact for int32, within the documented bound for floats), and prints one
row per size and dtype: the slowest worker's median time, goodput per
worker (input bytes per second), DATA resent, QUERY packets and QUERYs per
DATA sent (`asked/DATA`), and the workers' CPU seconds (user + sys, all
threads) per GB all-reduced (`cpu s/GB`), and, when the benchmark starts the
switch, the switch process's (`switch s/GB`) and their sum (`total s/GB`):
the whole system's CPU, to set against Gloo's workers'. `--drop-rate
P` runs the lossless case and the lossy one (P dropped at the switch in
each direction) in the same invocation and prints, from that one run, the
goodput ratio, how many DATA packets were resent per packet the switch
actually dropped (its own count) and how often the ranks' congestion
windows halved; `--baseline gloo` times
torch.distributed's Gloo all-reduce of the same tensors in the same worker
processes, with its CPU seconds per GB beside p4reduce's, and verifies its
sums too (floats within the ring's own rounding bound). `--hog N` runs N
busy processes at normal priority for the whole run, as a training host
always has other work; every run prints the load average. `--runs N`
repeats the lossless run and prints the median of the N runs with their
spread: the figures to quote.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from contracts.protocol import SUPPORTED_VALUES_PER_PACKET
from hostlib.communicator import JoinError
from hostlib.contention import CpuClock, Hog, ProcessCpuClock, load_average, seconds_per_gb
from hostlib.launch import (
    EMBEDDED_VALUES_PER_PACKET,
    ROOT,
    LaunchError,
    services,
    share_job_credential,
)
from hostlib.native import CONGESTION_CONTROL_VARIABLE
from hostlib.verify import ITEMSIZE, RELEASE, call_options, check, check_float_sum, make_input

DTYPES = ("float32", "float16", "bfloat16", "int32")


@dataclass(frozen=True)
class Sample:
    rank: int
    size: int
    dtype: str
    iteration: int
    seconds: float
    retransmissions: int
    queries: int
    ok: bool
    data_sent: int = 0  # DATA packets, first sends and resends
    cpu_seconds: float = 0.0  # the worker process's user + sys time over the call, all threads
    window_decreases: int = 0  # the congestion window's decreases in the call (docs/protocol.md)
    gloo_seconds: float | None = None
    gloo_cpu_seconds: float | None = None
    gloo_ok: bool | None = None  # Gloo's sum of the same inputs, verified
    switch_cpu_seconds: float | None = None  # the switch process's over the call, rank 0's samples only


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    text = text.strip().upper()
    try:
        value = int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (like 1024, 64K or 1M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return value


def bench_worker(
    controller: str,
    job: str,
    rank: int,
    world: int,
    sizes: list[int],
    dtypes: list[str],
    iters: int,
    gloo_store: str | None,
    start: threading.Barrier,
    switch_pid: int = 0,
    wire_bits: int = 16,
) -> list[Sample]:
    """One worker process: every size x dtype x iteration through the switch (and Gloo), verified.

    Every timed call starts when all workers are ready, as Gloo's timed calls start after its barrier:
    the verification of the previous result takes each worker a different time, and without it a
    call's time would be the ranks' skew. `start` (a multiprocessing barrier) waits for the slowest
    verifier, then an untimed one-element all-reduce releases the ranks together: the switch multicasts
    its result to all of them at once, where the barrier's manager wakes them one after another.

    With `switch_pid`, rank 0 also reads the switch process's CPU over each call: the ranks start
    together and the switch works only for this job, so that is the switch's share of the call.
    float16 and bfloat16 travel at `wire_bits` (the torch backend's default, 16), the others at 32."""
    from hostlib.communicator import Communicator

    samples = []
    with Communicator.join(controller, job, rank, world, address=(f"127.0.0.{2 + rank}", 0)) as comm:
        for size in sizes:
            for dtype in dtypes:
                for iteration in range(iters):
                    data = make_input(rank, size, dtype, iteration)
                    options = call_options(dtype, wire_bits)
                    start.wait()
                    comm.allreduce(RELEASE)  # the switch releases every rank at once: the call starts level
                    before = comm.stats()
                    cpu = CpuClock()
                    switch_cpu = ProcessCpuClock(switch_pid) if switch_pid and rank == 0 else None
                    started = time.perf_counter()
                    # in place, as Gloo's all_reduce below and the torch backend sum: a fresh result array
                    # would be fresh pages, which the kernel zeroes inside the timed call
                    result = comm.allreduce(data, out=data, **options)  # type: ignore[arg-type]
                    seconds = time.perf_counter() - started
                    cpu_seconds = cpu.seconds()
                    # read once the call returned: the switch sent its last RESULT before this one came
                    switch_seconds = switch_cpu.seconds() if switch_cpu else None
                    k = comm.job.values_per_packet
                    ok = check(result, world, size, dtype, iteration, k=k, bits=int(options["wire_bits"]))[0]
                    after = comm.stats()
                    retx, queries = (
                        after.retransmissions - before.retransmissions,
                        after.queries - before.queries,
                    )
                    data_sent = after.packets_sent - before.packets_sent - queries
                    samples.append(
                        Sample(
                            rank,
                            size,
                            dtype,
                            iteration,
                            seconds,
                            retx,
                            queries,
                            ok,
                            data_sent,
                            cpu_seconds,
                            switch_cpu_seconds=switch_seconds,
                            window_decreases=after.window_decreases - before.window_decreases,
                        )
                    )
    if gloo_store is not None:
        samples = _with_gloo(samples, rank, world, gloo_store)
    return samples


def _with_gloo(samples: list[Sample], rank: int, world: int, store: str) -> list[Sample]:
    import torch.distributed as dist

    from hostlib.torch.arrays import host_array, host_tensor

    # A file store, not a TCP one: a port picked free can be taken meanwhile (by the switch's own gRPC
    # server, say), and Gloo's ranks then wait on a stranger for half an hour.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        timed = []
        for s in samples:
            tensor = host_tensor(make_input(rank, s.size, s.dtype, s.iteration).copy(), s.dtype)
            dist.barrier()
            cpu = CpuClock()
            started = time.perf_counter()
            dist.all_reduce(tensor)
            seconds = time.perf_counter() - started
            cpu_seconds = cpu.seconds()
            # verified as p4reduce's are, so that each system's next call follows the same work (a
            # float sum against the ring's own rounding bound)
            result = host_array(tensor)
            verify = check if s.dtype == "int32" else check_float_sum
            ok = verify(result, world, s.size, s.dtype, s.iteration, k=0)[0]
            timed.append(
                dataclasses.replace(s, gloo_seconds=seconds, gloo_cpu_seconds=cpu_seconds, gloo_ok=ok)
            )
        return timed
    finally:
        dist.destroy_process_group()


def baseline_verdict(samples: list[Sample]) -> tuple[int, str]:
    """How many of Gloo's sums were wrong, and the summary's words for them ("" without a baseline).
    A wrong baseline makes its comparison meaningless, so it fails the run as p4reduce's would."""
    verified = [s for s in samples if s.gloo_ok is not None]
    if not verified:
        return 0, ""
    wrong = sum(not s.gloo_ok for s in verified)
    return wrong, f" (Gloo's: {len(verified)} verified, {wrong} wrong)"


def run_suite(args: argparse.Namespace, drop_rate: float, tag: str) -> tuple[list[Sample], dict[str, int]]:
    """Every sample of one run, and the switch's own packet counters (empty with --controller)."""
    ctx = multiprocessing.get_context("spawn")

    def launch(controller: str, switch_pid: int = 0) -> list[Sample]:
        with (
            tempfile.TemporaryDirectory(prefix="p4reduce-bench-") as scratch,
            ctx.Manager() as manager,
            ctx.Pool(args.workers) as pool,
        ):
            gloo_store = f"{scratch}/gloo-store" if args.baseline == "gloo" else None
            start = manager.Barrier(args.workers)
            jobs = [
                (
                    controller,
                    f"bench-{tag}",
                    rank,
                    args.workers,
                    args.sizes,
                    args.dtypes,
                    args.iters,
                    gloo_store,
                    start,
                    switch_pid,
                    args.wire_bits,
                )
                for rank in range(args.workers)
            ]
            return [s for per_worker in pool.starmap(bench_worker, jobs) for s in per_worker]

    if args.controller:
        return launch(args.controller), {}
    logs = ROOT / "logs" / f"bench-{tag}"
    stats = logs / "switch-stats.json"
    with services(
        logs,
        ROOT / "build",
        drop_rate=drop_rate,
        drop_rate_out=drop_rate,
        pool_size=args.pool_size,
        stats_file=stats,
        values_per_packet=args.values_per_packet,
    ) as svc:
        print(
            f"  {tag}: switch {svc.switch_address[0]}:{svc.switch_address[1]}"
            f"{f', {drop_rate:.1%} loss each way' if drop_rate else ''}; logs in {logs}",
            flush=True,
        )
        samples = launch(svc.controller, svc.switch_pid)
    return samples, json.loads(stats.read_text()) if stats.exists() else {}


@dataclass(frozen=True)
class Row:
    """One size and dtype of one run: what the table prints."""

    seconds: float  # the slowest worker's time per call, median over the iterations
    goodput: float  # input bytes per second per worker
    resent: int
    asked: int
    asked_per_data: float  # QUERYs per DATA sent
    cpu_per_gb: float  # the workers' CPU seconds per GB all-reduced
    gloo_seconds: float | None = None
    gloo_cpu_per_gb: float | None = None
    # the switch process's CPU seconds per GB all-reduced; None with --controller (its switch is not ours)
    switch_cpu_per_gb: float | None = None

    @property
    def total_cpu_per_gb(self) -> float | None:
        """The whole system's: workers and switch, the figure to set against Gloo's workers."""
        return None if self.switch_cpu_per_gb is None else self.cpu_per_gb + self.switch_cpu_per_gb

    @property
    def vs_gloo(self) -> float | None:
        return self.seconds / self.gloo_seconds if self.gloo_seconds else None


def _slowest_median(samples: list[Sample], seconds: Callable[[Sample], float]) -> float:
    """An all-reduce is done when its slowest worker is: the max per iteration, then the median over the
    iterations. Both systems' figures are taken so; Gloo's were once the median over every rank's call,
    the middle rank's time set against p4reduce's slowest (docs/performance.md, *How it is measured*)."""
    iterations = sorted({s.iteration for s in samples})
    return statistics.median(max(seconds(s) for s in samples if s.iteration == i) for i in iterations)


def rows_of(
    samples: list[Sample], sizes: list[int], dtypes: list[str], gloo: bool
) -> dict[tuple[int, str], Row]:
    """The table's rows, per (size, dtype)."""
    rows = {}
    for size in sizes:
        for dtype in dtypes:
            those = [s for s in samples if s.size == size and s.dtype == dtype]
            seconds = _slowest_median(those, lambda s: s.seconds)
            width = ITEMSIZE[dtype]
            reduced = size * width * len(those)  # every worker's input
            asked, data = sum(s.queries for s in those), sum(s.data_sent for s in those)
            row = Row(
                seconds,
                size * width / seconds,
                sum(s.retransmissions for s in those),
                asked,
                asked / data if data else 0.0,
                seconds_per_gb(sum(s.cpu_seconds for s in those), reduced),
            )
            switch = [s.switch_cpu_seconds for s in those if s.switch_cpu_seconds is not None]
            if switch:
                row = dataclasses.replace(row, switch_cpu_per_gb=seconds_per_gb(sum(switch), reduced))
            if gloo:
                row = dataclasses.replace(
                    row,
                    gloo_seconds=_slowest_median(those, lambda s: s.gloo_seconds or 0.0),
                    gloo_cpu_per_gb=seconds_per_gb(sum(s.gloo_cpu_seconds or 0.0 for s in those), reduced),
                )
            rows[(size, dtype)] = row
    return rows


def print_rows(rows: dict[tuple[int, str], Row], gloo: bool) -> None:
    """One line per size and dtype; `switch s/GB` and `total s/GB` when the benchmark ran the switch."""
    switch = any(row.switch_cpu_per_gb is not None for row in rows.values())
    header = (
        f"{'size':>9} {'dtype':>8} {'seconds':>8} {'goodput/worker':>15} {'resent':>6} {'asked':>6}"
        f" {'asked/DATA':>10} {'cpu s/GB':>8}"
    ) + (f" {'switch s/GB':>11} {'total s/GB':>10}" if switch else "")
    print(header + (f" {'gloo s':>8} {'vs gloo':>8} {'gloo cpu s/GB':>13}" if gloo else ""))
    for (size, dtype), row in rows.items():
        line = (
            f"{size:>9} {dtype:>8} {row.seconds:>8.3f} {row.goodput / 1e6:>10.2f} MB/s {row.resent:>6}"
            f" {row.asked:>6} {row.asked_per_data:>10.1%} {row.cpu_per_gb:>8.2f}"
        )
        if switch:
            line += f" {row.switch_cpu_per_gb or 0.0:>11.2f} {row.total_cpu_per_gb or 0.0:>10.2f}"
        if gloo:
            line += f" {row.gloo_seconds or 0.0:>8.4f} {row.vs_gloo or float('nan'):>7.1f}x"
            line += f" {row.gloo_cpu_per_gb or 0.0:>13.2f}"
        print(line)


def summarize(
    samples: list[Sample], sizes: list[int], dtypes: list[str], gloo: bool
) -> dict[tuple[int, str], float]:
    """Print the table; return goodput per worker (bytes/s) per (size, dtype)."""
    rows = rows_of(samples, sizes, dtypes, gloo)
    print_rows(rows, gloo)
    return {key: row.goodput for key, row in rows.items()}


def print_medians(runs: list[dict[tuple[int, str], Row]], gloo: bool) -> None:
    """Median and spread (min-max) over the runs, per size and dtype: the figures to quote."""
    print(f"median of {len(runs)} runs (spread):")
    for key in runs[0]:
        rows = [run[key] for run in runs]

        def spread(values: list[float], form: str) -> str:
            return f"{statistics.median(values):{form}} ({min(values):{form}}-{max(values):{form}})"

        line = (
            f"  {key[0]:>9} {key[1]:>8}: {spread([r.seconds for r in rows], '.3f')} s,"
            f" asked/DATA {spread([r.asked_per_data for r in rows], '.1%')},"
            f" cpu s/GB {spread([r.cpu_per_gb for r in rows], '.2f')}"
        )
        if all(r.switch_cpu_per_gb is not None for r in rows):
            line += (
                f", switch cpu s/GB {spread([r.switch_cpu_per_gb or 0.0 for r in rows], '.2f')},"
                f" total cpu s/GB {spread([r.total_cpu_per_gb or 0.0 for r in rows], '.2f')}"
            )
        if gloo:
            line += (
                f"; vs gloo {spread([r.vs_gloo or float('nan') for r in rows], '.1f')}x,"
                f" gloo cpu s/GB {spread([r.gloo_cpu_per_gb or 0.0 for r in rows], '.2f')}"
            )
        print(line)


def recovery_cost(samples: list[Sample], switch: dict[str, int]) -> str:
    """DATA resent (and QUERY sent) per packet the switch's fault injection dropped, from the same run, and
    how often the ranks' congestion windows halved (at 5 % random loss, what holds the calls back)."""
    dropped = switch.get("dropped_fault_in", 0) + switch.get("dropped_fault_out", 0)
    resent, asked = sum(s.retransmissions for s in samples), sum(s.queries for s in samples)
    window = f"; the congestion window halved {sum(s.window_decreases for s in samples)} times"
    if not dropped:
        return f"  recovery: {resent} DATA resent, {asked} queries; the switch reported no drops{window}"
    return (
        f"  recovery: {dropped} packets dropped by the switch ({switch.get('dropped_fault_in', 0)} in, "
        f"{switch.get('dropped_fault_out', 0)} out); {resent} DATA resent = {resent / dropped:.2f} per drop, "
        f"{asked} header-only queries = {asked / dropped:.2f} per drop{window}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="p4reduce-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="worker processes (1..32, default 4)")
    parser.add_argument("--sizes", default="1K,64K,1M", help="comma-separated element counts (K, M suffixes)")
    parser.add_argument("--dtypes", default="float32,int32", help=f"comma-separated, of {', '.join(DTYPES)}")
    parser.add_argument("--iters", type=int, default=3, help="repetitions per size and dtype (default 3)")
    parser.add_argument("--drop-rate", type=float, default=0.0, help="also run with this loss at the switch")
    parser.add_argument("--baseline", choices=("gloo",), help="also time torch.distributed's Gloo all-reduce")
    parser.add_argument(
        "--controller", help="attach to a running controller (HOST:PORT) instead of starting one"
    )
    parser.add_argument(
        "--pool-size",
        type=int,
        default=256,
        help="slots of the benchmark job (default 256, the controller's)",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="lossless runs; more than one prints their median and spread"
    )
    parser.add_argument(
        "--values-per-packet",
        type=int,
        choices=SUPPORTED_VALUES_PER_PACKET,
        metavar="K",
        help="the switch runs the program compiled for K values per packet (default: the program as "
        f"`make build` compiles it, K = {EMBEDDED_VALUES_PER_PACKET}, the embedded switch's default)",
    )
    parser.add_argument(
        "--hog",
        type=int,
        default=0,
        metavar="N",
        help="N busy processes at normal priority for the run (default 0)",
    )
    parser.add_argument(
        "--wire-bits",
        type=int,
        choices=(16, 32),
        default=16,
        help="bits per value on the wire for float16 and bfloat16 (default 16, as the torch backend sends "
        "them; docs/protocol.md, Wire formats)",
    )
    parser.add_argument(
        "--no-congestion-control",
        action="store_true",
        help="workers without ECN and the congestion window (docs/protocol.md, Congestion); on by default",
    )
    args = parser.parse_args(argv)
    if args.no_congestion_control:  # the spawned workers read it (hostlib.native.congestion_control_default)
        os.environ[CONGESTION_CONTROL_VARIABLE] = "0"
    try:
        args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    args.dtypes = [d.strip() for d in args.dtypes.split(",")]
    if unknown := [d for d in args.dtypes if d not in DTYPES]:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}; choose from {', '.join(DTYPES)}")
    if not 1 <= args.workers <= 32 or min(args.iters, args.runs) < 1 or not 0.0 <= args.drop_rate < 1.0:
        parser.error("--workers must be 1..32, --iters and --runs >= 1, --drop-rate in [0, 1)")
    if args.hog < 0:
        parser.error("--hog takes a number of busy processes >= 0")
    if args.drop_rate and args.controller:
        parser.error("--drop-rate needs the benchmark's own switch (leave out --controller)")
    share_job_credential()
    if args.baseline == "gloo":
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            parser.error("--baseline gloo needs PyTorch: pip install 'p4reduce[torch]'")
    hog = Hog(args.hog)
    print(
        f"p4reduce-bench: {args.workers} workers, sizes {args.sizes}, dtypes {args.dtypes}, x{args.iters}, "
        f"pool {args.pool_size}; {hog.describe()}; load average {load_average():.2f}"
    )
    try:
        with hog:
            return _run(args)
    finally:
        print(f"load average at the end: {load_average():.2f}")


def _run(args: argparse.Namespace) -> int:
    """The runs, their tables and the verdict (under --hog's load, if any)."""
    gloo = args.baseline == "gloo"
    try:
        samples = []
        runs = []
        for run in range(args.runs):
            if args.runs > 1:
                print(f"run {run + 1} of {args.runs} (load average {load_average():.2f}):")
            lossless, _ = run_suite(args, 0.0, "lossless")
            runs.append(rows_of(lossless, args.sizes, args.dtypes, gloo))
            print_rows(runs[-1], gloo)
            samples += lossless
        if args.runs > 1:
            print_medians(runs, gloo)
        base = {key: row.goodput for key, row in runs[-1].items()}
        ratio = None
        if args.drop_rate:
            lossy, counters = run_suite(args, args.drop_rate, "lossy")
            print(f"with {args.drop_rate:.1%} loss each way:")
            worse = summarize(lossy, args.sizes, args.dtypes, False)
            samples += lossy
            largest = max(args.sizes)
            ratio = min(worse[(largest, d)] / base[(largest, d)] for d in args.dtypes)
            for key in sorted(base):
                print(f"  goodput ratio lossy/lossless {key[0]:>9} {key[1]:>8}: {worse[key] / base[key]:.0%}")
            print(recovery_cost(lossy, counters))
    except (LaunchError, JoinError) as error:  # one line: the services' log tail, or why the join failed
        print(f"p4reduce-bench: {error}", file=sys.stderr)
        return 1
    failed = sum(not s.ok for s in samples)
    summary = f"{len(samples)} verified all-reduces, {failed} wrong"
    gloo_failed, gloo_summary = baseline_verdict(samples)
    failed += gloo_failed
    summary += gloo_summary
    if ratio is not None:
        summary += (
            f"; at {max(args.sizes)} elements, goodput under {args.drop_rate:.1%} loss is "
            f"{ratio:.0%} of lossless (worst dtype; small tensors are latency-bound)"
        )
    print(("PASS: " if not failed else "FAIL: ") + summary)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
