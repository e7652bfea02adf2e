"""What every experiment shares: its command line, progress, the CSV, the summary table, the figure's frame.

Each experiment writes results/<name>.csv (one row per all-reduce),
results/<name>.png and results/<name>.txt (the summary table, the exact
command and the machine it ran on), and prints the same table.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import shlex
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from contracts.protocol import HEADER_BYTES, SUPPORTED_VALUES_PER_PACKET
from experiments.step import Step
from hostlib.launch import ROOT

# Wire efficiency of each system's packets (payload / Ethernet frame, without preamble and FCS):
# p4reduce: 4K bytes of values in 14 + 20 + 8 + 24 B of headers, at the K the switch's program was
# compiled for (the cluster reads it from the P4Info); Gloo: TCP segments with timestamps (MTU - 52 B of
# data in an MTU + 14 B frame: 1448 in 1514 at Ethernet's MTU), ACKs not counted. The links' MTU follows
# K (mininet/lab.py, link_mtu), so TCP gets the same jumbo frames as p4reduce where K needs them.
ETHERNET_MTU = 1500


def p4reduce_frame(values_per_packet: int) -> int:
    """A DATA frame's bytes for K values."""
    return 14 + 20 + 8 + HEADER_BYTES + 4 * values_per_packet


def p4reduce_efficiency(values_per_packet: int) -> float:
    return 4 * values_per_packet / p4reduce_frame(values_per_packet)


def tcp_efficiency(mtu: int = ETHERNET_MTU) -> float:
    """Bytes of data per byte of frame of a full TCP segment with timestamps on links of `mtu`."""
    return (mtu - 52) / (mtu + 14)


def ideal_speedup(workers: int) -> float:
    """A ring moves 2(N-1)/N·S per worker each way, in-network aggregation S: the link-bound speedup."""
    return 2 * (workers - 1) / workers


def ideal_goodput(system: str, workers: int, link: float, values_per_packet: int, mtu: int) -> float:
    """Bytes of tensor per second a worker can reduce when its link (bytes/s, `mtu`) is the only limit,
    p4reduce at K = `values_per_packet`."""
    if system == "p4reduce":
        return link * p4reduce_efficiency(values_per_packet)
    return link * tcp_efficiency(mtu) / ideal_speedup(workers)


def describe_machine() -> str:
    """One line for every figure: CPU, cores, kernel, Python; the emulation's CPU is part of the result."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Linux {os.uname().release}, Python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )


def parser(name: str, doc: str) -> argparse.ArgumentParser:
    """The options every experiment takes."""
    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=doc)
    p.add_argument("--quick", action="store_true", help="tiny sizes, one iteration (CI)")
    p.add_argument("--iters", type=int, default=3, help="all-reduces per point (default 3; --quick: 1)")
    p.add_argument(
        "--pool",
        type=int,
        default=64,
        help="slots per job; a call uses half: the p4reduce window (default 64)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "results", help="folder for CSV, PNG, TXT (results/)")
    p.add_argument(
        "--logs", type=Path, default=ROOT / "logs" / "experiments", help="folder for logs (logs/experiments/)"
    )
    return p


def add_link_arguments(p: argparse.ArgumentParser, bw: float) -> None:
    """--bw, --queue and --burst: the htb-limited links of experiments where the network is the bottleneck."""
    p.add_argument("--bw", type=float, default=bw, help=f"link rate in Mbit/s (default {bw:g})")
    p.add_argument(
        "--queue",
        type=int,
        default=100,
        help="packets a limited link queues (default 100; the kernel's 1000 is seconds at a few Mbit/s)",
    )
    p.add_argument(
        "--burst",
        type=int,
        help="KB a limited link may send at once, at rate and at ceiling (default: the lab's, "
        "mininet/lab.py LINK_BURST_KB; 0: Mininet's htb, one frame at a time once the link is busy)",
    )


def add_values_argument(p: argparse.ArgumentParser) -> None:
    """--values-per-packet K: the embedded switch runs the program compiled for K; links get its MTU."""
    p.add_argument(
        "--values-per-packet",
        type=int,
        choices=SUPPORTED_VALUES_PER_PACKET,
        metavar="K",
        help="the embedded switch's K (default: the program's own, read from its P4Info: 1024 on the "
        "embedded switch, 64 on bmv2); 512 and 1024 give links a 9000-byte MTU",
    )


def add_hog_argument(p: argparse.ArgumentParser) -> None:
    """--hog N: the experiment runs with N busy processes at normal priority (hostlib.contention.Hog)."""
    p.add_argument(
        "--hog",
        type=int,
        default=0,
        metavar="N",
        help="N busy processes at normal priority for the whole run, as a training host has (default 0)",
    )


def bmv2_available() -> bool:
    return shutil.which("simple_switch_grpc") is not None and shutil.which("p4c") is not None


def targets(choice: str) -> list[str]:
    """`auto`: the embedded switch, and bmv2 too when it is installed."""
    if choice == "auto":
        return ["soft", "bmv2"] if bmv2_available() else ["soft"]
    if choice == "bmv2" and not bmv2_available():
        raise SystemExit("--switch bmv2 needs simple_switch_grpc and p4c on PATH (see docs/lab.md)")
    return [choice]


def parse_sizes(text: str) -> list[int]:
    """`64K,1M` -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20}
    sizes = []
    for item in text.split(","):
        item = item.strip().upper()
        try:
            sizes.append(int(item[:-1]) * units[item[-1]] if item[-1:] in units else int(item))
        except (ValueError, KeyError):
            raise argparse.ArgumentTypeError(f"bad size {item!r} (like 65536, 64K or 16M)") from None
    return sizes


def human(size: float) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


@contextmanager
def progress(total: int, what: str) -> Iterator[Callable[[], None]]:
    """A function to call after each all-reduce.

    On a terminal it advances a rich progress bar; in a log (CI, nohup) it
    prints one line per step, since a bar there would show only at the end.
    """
    console = Console(stderr=True)
    if console.is_terminal:
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task(what, total=total)
            yield lambda: bar.advance(task)
        return
    started, done = time.monotonic(), 0

    def advance() -> None:
        nonlocal done
        done += 1
        print(f"{what}: {done}/{total} after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    yield advance


class _Points(dict):
    """Medians by point; a point with no verified all-reduce is NaN, which tables print and plots skip."""

    def __missing__(self, key: object) -> float:
        return math.nan


class Report:
    """Rows in, results/<name>.{csv,txt,png} out.

    Each row reaches the CSV as soon as it is added, so a run that dies half
    way (an agent stalls, the machine is needed back) keeps what it measured.
    """

    def __init__(self, name: str, out: Path) -> None:
        self.name, self.out = name, out
        out.mkdir(parents=True, exist_ok=True)
        self.csv_path = out / f"{name}.csv"
        self.rows: list[dict[str, object]] = []
        self.console = Console(record=True, width=120)

    def add(self, step: Step, **labels: object) -> None:
        row = dict(labels)
        row.update(dataclasses.asdict(step))
        row["goodput"] = step.goodput
        row["packets_per_second"] = step.packets_per_second
        self.rows.append(row)
        with open(self.csv_path, "w" if len(self.rows) == 1 else "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(self.rows[0]))
            if len(self.rows) == 1:
                writer.writeheader()
            writer.writerow(row)

    def medians(self, value: str, *keys: str) -> dict:
        """Median of column `value` over the verified iterations of each point, keyed by the `keys` columns.

        One key gives a plain dict of its values, several a dict of tuples;
        a point whose every all-reduce failed is NaN.
        """
        groups: dict[object, list[float]] = defaultdict(list)
        for row in self.rows:
            if row["ok"]:
                key = tuple(row[k] for k in keys)
                groups[key[0] if len(keys) == 1 else key].append(row[value])  # type: ignore[arg-type]
        return _Points({key: statistics.median(values) for key, values in groups.items()})

    def table(self, title: str, columns: list[str], rows: list[list[str]]) -> None:
        table = Table(title=title)
        for column in columns:
            table.add_column(column, justify="right")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)

    def note(self, text: str) -> None:
        self.console.print(text)

    def abort(self, error: Exception) -> int:
        """A run that cannot go on: say why and where its rows are; the exit status."""
        print(f"experiments.{self.name}: {error}", file=sys.stderr)
        if self.rows:
            print(f"experiments.{self.name}: {len(self.rows)} all-reduce(s) so far are in {self.csv_path}")
        return 1

    def save(self, figure: object) -> bool:
        """Write the figure and the summary; True when every all-reduce was verified correct."""
        figure.savefig(self.out / f"{self.name}.png", dpi=110, bbox_inches="tight")  # type: ignore[attr-defined]
        failed = [r for r in self.rows if not r["ok"]]
        self.note(
            f"{len(self.rows)} all-reduces, {len(failed)} wrong or failed"
            + (
                f" (left out of the medians): {failed[0]['error']}"
                if failed
                else ", every result verified against numpy"
            )
        )
        command = shlex.join([Path(sys.executable).name, "-m", f"experiments.{self.name}", *sys.argv[1:]])
        self.note(f"command: {command}\nmachine: {describe_machine()}")
        self.note(f"wrote {self.csv_path}, {self.name}.png and {self.name}.txt in {self.out}")
        (self.out / f"{self.name}.txt").write_text(self.console.export_text())
        return not failed


def figure(columns: int, title: str) -> tuple[object, list[object]]:
    """A matplotlib figure (Agg: no display) with `columns` axes side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, columns, figsize=(5.2 * columns, 3.8), squeeze=False)
    fig.suptitle(title, fontsize=10)
    fig.text(0.01, -0.02, describe_machine(), fontsize=7, color="gray")
    return fig, list(axes[0])


def size_axis(axes: object, sizes: list[int]) -> None:
    """Log x axis in bytes, ticked at the sizes measured and labelled 64 KB, 1 MB, ..."""
    axes.set_xscale("log")  # type: ignore[attr-defined]
    axes.set_xticks(sizes, [human(s) for s in sizes], fontsize=7)  # type: ignore[attr-defined]
    axes.minorticks_off()  # type: ignore[attr-defined]
    axes.set_xlabel("tensor size")  # type: ignore[attr-defined]
