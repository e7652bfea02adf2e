"""Aggregation trees on a leaf–spine fabric: hierarchical p4reduce, p4reduce at the spine only, Gloo's ring.

Two leaves of four workers under one spine (mininet/topos/leafspine8.json),
every link at the same rate R, so each leaf's link to the spine is 4:1
oversubscribed. Aggregating only at the spine puts every worker's tensor
on its leaf's spine link, 4·S each way; a ring crosses it once each way,
2(N-1)/N·S = 1.75·S; a tree, where each leaf sums its four workers and
sends the spine one partial, S. Bytes are counted on every switch port
(the kernel's counters of the switches' Mininet interfaces, read before
and after each all-reduce), and the spine links' are reported per link and
direction relative to the tensor size S.

Two variants: spine links at 4·R (no oversubscription), compared with a
single-switch star of the same eight workers at R, where the tree should
cost nothing; and loss of 1 % each way on the spine links only (each switch drops 1 % of
what it sends on them: p4reduce-switch --drop-ports), where every result
must still be exact.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.cluster import Cluster, ExperimentError, LaunchError, StarCluster
from experiments.report import (
    Report,
    add_link_arguments,
    add_values_argument,
    figure,
    human,
    p4reduce_efficiency,
    parse_sizes,
    parser,
    progress,
    size_axis,
    tcp_efficiency,
)
from hostlib.launch import ROOT

sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts)
from lab_config import tree_root  # noqa: E402
from topology import Topology, load  # noqa: E402

FULL_SIZES, QUICK_SIZES = "4M,16M", "64K"  # bytes: 1M and 4M float32 values; --quick one tiny size
TOPOLOGY = ROOT / "mininet" / "topos" / "leafspine8.json"
SPINE_LOSS = 0.01
NOT_RUN = "–"  # a table cell of a series this run left out


@dataclass(frozen=True)
class Series:
    """One network and what runs on it."""

    name: str  # the CSV's `series`
    label: str
    aggregate_at: str = "tree"
    systems: tuple[str, ...] = ("p4reduce",)
    spine_rate: float = 1.0  # spine links at this multiple of R
    spine_loss: float = 0.0
    star: bool = False  # the same workers around one switch instead of the fabric


SERIES = {
    s.name: s
    for s in (
        Series("tree", "hierarchical"),
        # Gloo's ring here: its links and L2 path are the same as the tree's (mininet/lab_config.py)
        Series("spine", "spine only", aggregate_at="root", systems=("p4reduce", "gloo")),
        Series("wide", "hierarchical, spine links 4R", spine_rate=4.0),
        Series("star", "one switch, every worker", star=True),
        Series("lossy", f"hierarchical, {SPINE_LOSS:.0%} loss on spine links", spine_loss=SPINE_LOSS),
    )
}


def spine_links(topo: Topology) -> list[tuple[str, str]]:
    """(leaf, the spine-side interface) of each switch link: its rx is the leaf's traffic up, tx down."""
    root = tree_root(topo)
    out = []
    for a, pa, b, pb in topo.links:
        upper_is_b = topo.next_hop(a, root) == pa  # a's way to the root is this link: b is above a
        leaf, upper, port = (a, b, pb) if upper_is_b else (b, a, pa)
        out.append((leaf, f"{upper}-eth{port}"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = parser("hierarchy", __doc__.splitlines()[0])
    add_link_arguments(p, 20.0)
    add_values_argument(p)
    p.add_argument("--topo", type=Path, default=TOPOLOGY, help="the fabric (default leafspine8.json)")
    p.add_argument(
        "--sizes",
        help=f"tensor sizes in bytes (default {FULL_SIZES}, 1M and 4M float32; --quick: {QUICK_SIZES})",
    )
    p.add_argument(
        "--series",
        default=",".join(SERIES),
        help=f"what to run, of {','.join(SERIES)} (default all); Gloo's ring runs with spine",
    )
    p.add_argument("--no-gloo", action="store_true", help="leave Gloo's ring out")
    args = p.parse_args(argv)
    chosen = [name.strip() for name in args.series.split(",")]
    if unknown := [name for name in chosen if name not in SERIES]:
        p.error(f"unknown series {unknown[0]!r} (choose from {', '.join(SERIES)})")
    sizes = parse_sizes(args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))
    iters = 1 if args.quick else args.iters
    topo = load(args.topo)
    links = spine_links(topo)
    report = Report("hierarchy", args.out)
    runs = [
        (SERIES[name], system)
        for name in chosen
        for system in SERIES[name].systems
        if not (system == "gloo" and args.no_gloo)
    ]
    bw = args.bw
    try:
        with progress(len(runs) * len(sizes) * iters, f"leaf-spine, {bw:g} Mbit/s links") as advance:
            for series in (SERIES[name] for name in chosen):
                systems = [system for s, system in runs if s is series]
                options = dict(
                    bw=bw,
                    queue=args.queue,
                    burst=args.burst,
                    pool_size=args.pool,
                    logs=args.logs,
                    values_per_packet=args.values_per_packet,
                    gloo="gloo" in systems,
                )
                cluster = (
                    StarCluster(len(topo.hosts), **options)
                    if series.star
                    else Cluster(
                        topo,
                        aggregate_at=series.aggregate_at,
                        switch_link_bw=bw * series.spine_rate,
                        switch_link_loss=series.spine_loss,
                        **options,
                    )
                )
                with cluster:
                    wire = cluster.values_per_packet, cluster.link_mtu  # the K its program has, its MTU
                    for size in sizes:
                        for iteration in range(iters):
                            for system in systems:
                                step = cluster.run(system, size // 4, "float32", iteration)
                                ports = cluster.last_ports
                                up = [ports[port][0] for _, port in links] if not series.star else [0]
                                down = [ports[port][1] for _, port in links] if not series.star else [0]
                                report.add(
                                    step,
                                    series=series.name,
                                    label=series.label if system == "p4reduce" else "Gloo ring",
                                    aggregate_at=cluster.aggregate_at,
                                    bw_mbit=bw,
                                    spine_mbit=bw * series.spine_rate,
                                    spine_loss=series.spine_loss,
                                    spine_up_bytes=max(up),
                                    spine_down_bytes=max(down),
                                    ports=json.dumps(ports, separators=(",", ":")),
                                )
                                advance()
    except (ExperimentError, LaunchError, RuntimeError) as error:
        return report.abort(error)
    return summarize(report, args, sizes, iters, chosen, topo, wire)


def summarize(
    report: Report,
    args: argparse.Namespace,
    sizes: list[int],
    iters: int,
    chosen: list[str],
    topo: Topology,
    wire: tuple[int, int],
) -> int:
    """The tables and the figure, from the verified rows; `wire`: the switches' K and the links' MTU."""
    bw: float = args.bw
    n, leaves = len(topo.hosts), len(topo.links)
    fabric = f"{leaves} leaves x {n // leaves} workers"
    key = ("series", "system", "tensor_bytes")
    seconds, up, down = (report.medians(v, *key) for v in ("seconds", "spine_up_bytes", "spine_down_bytes"))
    worker_up = report.medians("up_bytes", *key)
    spread = _spreads(report, key)
    (k, mtu), tcp = wire, tcp_efficiency(wire[1])
    efficiency = p4reduce_efficiency(k)
    hier, spine, gloo = ("tree", "p4reduce"), ("spine", "p4reduce"), ("spine", "gloo")

    # A series left out (--series, --no-gloo) has no rows: its cells say so with a dash.
    def t(point: tuple[str, str], size: int) -> str:
        if (*point, size) not in seconds:
            return NOT_RUN
        return f"{seconds[(*point, size)]:.2f} ({spread[(*point, size)]})"

    def ratio(slow: tuple[str, str], fast: tuple[str, str], size: int, form: str = "{:.2f}x") -> str:
        if (*slow, size) not in seconds or (*fast, size) not in seconds:
            return NOT_RUN
        return form.format(seconds[(*slow, size)] / seconds[(*fast, size)])

    def per_s(values: dict, point: tuple[str, str], size: int) -> str:
        return f"{values[(*point, size)] / size:.2f}" if (*point, size) in values else NOT_RUN

    def busy(point: tuple[str, str], size: int) -> str:
        """How much of the all-reduce the busiest spine link (up) and a worker's uplink were sending."""
        if (*point, size) not in seconds:
            return NOT_RUN
        rate, time = bw * 1e6 / 8, seconds[(*point, size)]
        spine_rate = rate * SERIES[point[0]].spine_rate
        return f"{up[(*point, size)] / time / spine_rate:.0%} / {worker_up[(*point, size)] / time / rate:.0%}"

    report.table(
        f"leaf-spine, {fabric}, every link {bw:g} Mbit/s (spine links {n // leaves}:1 oversubscribed),"
        f" float32, {args.pool} slots, median of {iters} (min-max); seconds per all-reduce",
        ["size", "hierarchical s", "spine only s", "Gloo ring s", "hier. vs Gloo", "hier. vs spine only"],
        [
            [human(s), t(hier, s), t(spine, s), t(gloo, s), ratio(gloo, hier, s), ratio(spine, hier, s)]
            for s in sizes
        ],  # fmt: skip
    )
    report.table(
        "bytes per all-reduce on the busiest spine link, up (leaf to spine) / down, as multiples of S;"
        " links busy: spine link up / a worker's uplink",
        ["size", "hierarchical", "spine only", "Gloo ring", "busy: hier.", "spine only", "Gloo"],
        [
            [human(s)]
            + [f"{per_s(up, point, s)} / {per_s(down, point, s)}" for point in (hier, spine, gloo)]
            + [busy(point, s) for point in (hier, spine, gloo)]
            for s in sizes
        ],
    )
    if {"wide", "star", "lossy"} & set(chosen):
        wide, star, lossy = ("wide", "p4reduce"), ("star", "p4reduce"), ("lossy", "p4reduce")
        resent, queries = report.medians("retransmissions", *key), report.medians("queries", *key)

        def recovery(point: tuple[str, str], size: int) -> str:
            if (*point, size) not in resent:
                return NOT_RUN
            return f"{resent[(*point, size)]:.0f} / {queries[(*point, size)]:.0f}"

        report.table(
            f"variants: spine links at {4 * bw:g} Mbit/s against one switch of {n} workers at {bw:g} Mbit/s;"
            f" {SPINE_LOSS:.0%} loss each way on the spine links only",
            ["size", "hier., spine 4R s", f"star of {n} s", "ratio", f"hier., {SPINE_LOSS:.0%} loss s",
             "goodput of lossless", "workers' DATA resent / QUERYs", "spine link / S"],
            [
                [human(s), t(wide, s), t(star, s), ratio(wide, star, s), t(lossy, s),
                 ratio(hier, lossy, s, "{:.0%}"),
                 recovery(lossy, s),
                 f"{per_s(up, lossy, s)} / {per_s(down, lossy, s)}"]
                for s in sizes
            ],
        )  # fmt: skip
    ideal_ring = 2 * (n - 1) / n
    report.note(
        f"expected on a spine link each way: a tree S, x{1 / efficiency:.3f} in p4reduce frames;"
        f" at the spine only {n // leaves}·S, x{1 / efficiency:.3f}; a ring {ideal_ring:.2f}·S,"
        f" x{1 / tcp:.3f} in TCP frames, plus ACKs (K = {k}, {mtu}-byte MTU)."
        " Spread: min-max of the verified runs. Loss: each switch drops 1 % of what it sends on a spine"
        " link (p4reduce-switch --drop-ports). What a spine link loses is recovered between leaf and spine"
        " (a worker's QUERY goes up; the spine replays its result or says MISSING and the leaf resends its"
        " partial), so workers resend no DATA for it."
    )

    fig, (times, spine_bytes) = figure(2, f"leaf-spine, {fabric}, {bw:g} Mbit/s links")
    styles = {"tree": "o-", "spine": "s-", "wide": "^--", "star": "v:", "lossy": "x-."}
    for name in chosen:
        for system in SERIES[name].systems:
            label = "Gloo ring" if system == "gloo" else SERIES[name].label
            style = "d-" if system == "gloo" else styles[name]
            times.plot(sizes, [seconds[name, system, s] for s in sizes], style, label=label)
            if name in ("tree", "spine"):  # Gloo's ring runs in the spine series
                spine_bytes.plot(sizes, [up[name, system, s] / s for s in sizes], style, label=f"{label}, up")
    times.set(yscale="log", ylabel="all-reduce time (s), slowest worker")
    spine_bytes.axhline(1.3, color="gray", linestyle=":", label="1.3·S (the bar for a tree)")
    spine_bytes.set(ylabel="bytes on the busiest spine link, up / S", ylim=(0, None))
    for axes in (times, spine_bytes):
        size_axis(axes, sizes)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    return 0 if report.save(fig) else 1


def _spreads(report: Report, key: tuple[str, ...]) -> dict:
    """`min-max` of the verified seconds of each point, for the tables."""
    groups: dict[tuple, list[float]] = {}
    for row in report.rows:
        if row["ok"]:
            groups.setdefault(tuple(row[k] for k in key), []).append(float(row["seconds"]))  # type: ignore[arg-type]
    spreads = {k: f"{min(v):.2f}-{max(v):.2f}" if len(v) > 1 else "1 run" for k, v in groups.items()}
    return _Missing(spreads)


class _Missing(dict):
    def __missing__(self, key: object) -> str:
        return "-"


if __name__ == "__main__":
    sys.exit(main())
