"""The switch's own throughput: p4reduce-switch against bmv2's simple_switch_grpc, same program and traffic.

Both targets run p4reduce.p4 (ours from p4reduce-p4c, bmv2's from p4c) in
the same Mininet star with unlimited links, provisioned by the same
controller, under the same all-reduces; the figure is aggregation packets
per second the switch received (its port counters over the slowest
worker's time). Without bmv2 installed only the embedded switch is
measured and the ratio is reported as not measured.
"""

from __future__ import annotations

import sys

from experiments.cluster import ExperimentError, LaunchError, StarCluster
from experiments.report import Report, bmv2_available, figure, human, parser, progress, targets

FULL_BYTES, QUICK_BYTES = 1 << 20, 16 << 10


def main(argv: list[str] | None = None) -> int:
    p = parser("switch", __doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4, help="hosts on the star (default 4)")
    p.add_argument("--bytes", type=int, help=f"tensor bytes (default {human(FULL_BYTES)}; --quick: 16 KB)")
    p.add_argument(
        "--switch", choices=("auto", "soft", "bmv2"), default="auto", help="auto: soft, and bmv2 if installed"
    )
    args = p.parse_args(argv)
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    iters = 1 if args.quick else args.iters
    kinds = targets(args.switch)
    report = Report("switch", args.out)
    try:
        with progress(len(kinds) * iters, f"switch throughput, {args.workers} workers") as advance:
            for kind in kinds:
                with StarCluster(
                    args.workers, switch=kind, gloo=False, pool_size=args.pool, logs=args.logs
                ) as cluster:
                    for iteration in range(iters):
                        report.add(cluster.run("p4reduce", size // 4, "float32", iteration), switch=kind)
                        advance()
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    pps, goodput, cpu = (
        report.medians(value, "switch") for value in ("packets_per_second", "goodput", "switch_cpu")
    )
    names = {"soft": "p4reduce-switch", "bmv2": "simple_switch_grpc"}
    report.table(
        f"switch throughput: {args.workers} workers, unlimited links, {human(size)} float32,"
        f" {args.pool} slots, median of {iters}",
        ["target", "packets/s in", "goodput/worker MB/s", "switch CPU"],
        [[names[k], f"{pps[k]:,.0f}", f"{goodput[k] / 1e6:.3f}", f"{cpu[k]:.0%}"] for k in kinds],
    )
    if "bmv2" in pps and "soft" in pps:
        report.note(f"ratio p4reduce-switch / simple_switch_grpc: {pps['soft'] / pps['bmv2']:.2f}")
    else:
        why = "not selected" if bmv2_available() else "simple_switch_grpc and p4c are not installed here"
        report.note(f"ratio p4reduce-switch / simple_switch_grpc: not measured ({why})")

    fig, (axes,) = figure(1, f"aggregation packets/s into the switch, {args.workers} workers")
    axes.bar([names[k] for k in kinds], [pps[k] for k in kinds], color=["C0", "C2"][: len(kinds)])
    axes.set(ylabel="packets per second")
    axes.grid(alpha=0.3, axis="y")
    return 0 if report.save(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
