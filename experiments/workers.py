"""Goodput per worker as the job grows from 2 to 8 workers, p4reduce and Gloo, over a Mininet star.

With links the bottleneck (--bw), in-network aggregation should stay flat:
each worker moves S up and S down whatever N is, so its goodput is the link
rate times p4reduce's wire efficiency. A ring moves 2(N-1)/N·S, so its
goodput falls towards half the link rate. A second series runs both on
unlimited links, where the emulation's CPU is the bottleneck: p4reduce's
switch (a Python process here, an ASIC on Tofino) shares its packet rate
among the workers, while Gloo runs at memory-copy speed in the kernel. That
series shows where the emulation, not the network, decides the result.
"""

from __future__ import annotations

import sys

from experiments.cluster import ExperimentError, LaunchError, StarCluster
from experiments.report import (
    Report,
    add_link_arguments,
    figure,
    human,
    ideal_goodput,
    parser,
    progress,
    targets,
)

FULL_BYTES, QUICK_BYTES = 1 << 20, 16 << 10


def main(argv: list[str] | None = None) -> int:
    p = parser("workers", __doc__.splitlines()[0])
    p.add_argument("--workers", default="2,4,8", help="job sizes to run (default 2,4,8)")
    add_link_arguments(p, 2.0)
    p.add_argument("--bytes", type=int, help=f"tensor bytes (default {human(FULL_BYTES)}; --quick: 16 KB)")
    p.add_argument(
        "--switch", choices=("auto", "soft", "bmv2"), default="auto", help="auto: soft, and bmv2 if installed"
    )
    args = p.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    iters = 1 if args.quick else args.iters
    kinds = targets(args.switch)
    if "bmv2" not in kinds:
        print("bmv2 (simple_switch_grpc, p4c) not installed: the embedded switch only", file=sys.stderr)
    # (switch, links) per series; unlimited links expose the emulation's CPU as the bottleneck
    series = [(kind, bw) for bw in (args.bw, None) for kind in kinds]
    systems = ("p4reduce", "gloo")
    total = len(series) * len(systems) * len(counts) * iters
    report = Report("workers", args.out)
    wire: dict[str, tuple[int, int]] = {}  # per switch kind: its program's K and the links' MTU
    try:
        with progress(total, f"goodput vs workers, {human(size)} float32") as advance:
            for kind, bw in series:
                for n in counts:
                    with StarCluster(
                        n,
                        switch=kind,
                        bw=bw,
                        queue=args.queue,
                        burst=args.burst,
                        pool_size=args.pool,
                        logs=args.logs,
                    ) as cluster:
                        wire[kind] = cluster.values_per_packet, cluster.link_mtu
                        for iteration in range(iters):
                            for system in systems:
                                step = cluster.run(system, size // 4, "float32", iteration)
                                report.add(step, switch=kind, bw_mbit=bw or 0)
                                advance()
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    point = ("switch", "bw_mbit", "system", "workers")
    goodput, cpu = report.medians("goodput", *point), report.medians("switch_cpu", *point)
    link = args.bw * 1e6 / 8

    def ideal(kind: str, system: str, n: int) -> float:
        """Goodput at the limited links' rate, at the K and MTU that kind's series ran."""
        return ideal_goodput(system, n, link, *wire[kind])

    def links(bw: float) -> str:
        return f"{bw:g} Mbit/s" if bw else "unlimited"

    report.table(
        f"goodput per worker (MB/s), {human(size)} float32, {args.pool} slots, median of {iters};"
        " ideal = link rate x wire efficiency",
        ["switch", "links", "system", "workers", "goodput", "ideal", "of ideal", "switch CPU"],
        [
            [
                kind,
                links(bw),
                system,
                str(n),
                f"{goodput[kind, bw, system, n] / 1e6:.3f}",
                f"{ideal(kind, system, n) / 1e6:.3f}" if bw else "-",
                f"{goodput[kind, bw, system, n] / ideal(kind, system, n):.0%}" if bw else "-",
                f"{cpu[kind, bw, system, n]:.0%}",
            ]
            for (kind, bw, system, n) in sorted(goodput, key=lambda k: (k[0], -k[1], k[2], k[3]))
        ],
    )

    fig, (limited, unlimited) = figure(2, f"goodput per worker vs workers, {human(size)} float32 all-reduce")
    for kind, bw in series:
        axes = limited if bw else unlimited
        for system, marker, soft_color, bmv2_color in (
            ("p4reduce", "o", "C0", "C2"),
            ("gloo", "s", "C1", "C3"),
        ):
            goodputs = [goodput[kind, bw or 0, system, n] / 1e6 for n in counts]
            if kind == "soft":
                axes.plot(counts, goodputs, marker + "-", color=soft_color, label=system)
            else:
                axes.plot(counts, goodputs, marker + "--", color=bmv2_color, label=f"{system} (bmv2)")
    for system, color in (("p4reduce", "C0"), ("gloo", "C1")):  # at the first series' K and MTU
        ideals = [ideal_goodput(system, n, link, *wire[kinds[0]]) / 1e6 for n in counts]
        limited.plot(counts, ideals, ":", color=color, label=f"{system} ideal")
    limited.set(title=f"{links(args.bw)} links: the network decides", ylim=(0, None))
    unlimited.set(title="unlimited links: the emulation's CPU decides", yscale="log")
    for axes in (limited, unlimited):
        axes.set(xlabel="workers", xticks=counts)
        axes.title.set_fontsize(9)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    limited.set_ylabel("goodput per worker (MB/s)")
    unlimited.set_ylabel("goodput per worker (MB/s, log)")
    return 0 if report.save(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
