"""p4reduce against Gloo's ring all-reduce over the same Mininet star, links limited with htb.

Both systems run in the same worker processes over the same links: p4reduce
sends each tensor once up and receives the sum once down (S each way per
worker); a ring sends and receives 2(N-1)/N·S. With the link the
bottleneck, the ideal speedup is 2(N-1)/N (1.5 for 4 workers); each
system's header overhead moves that to the wire-adjusted ideal printed
next to it. Bytes on the wire come from the switch's port counters.
"""

from __future__ import annotations

import sys

from experiments.cluster import ExperimentError, LaunchError, StarCluster
from experiments.report import (
    Report,
    add_hog_argument,
    add_link_arguments,
    add_values_argument,
    figure,
    human,
    ideal_speedup,
    p4reduce_efficiency,
    p4reduce_frame,
    parse_sizes,
    parser,
    progress,
    size_axis,
    tcp_efficiency,
)
from hostlib.contention import Hog
from hostlib.verify import ITEMSIZE

FULL_SIZES, QUICK_SIZES = "64K,256K,1M,4M,16M", "16K,64K"


def main(argv: list[str] | None = None) -> int:
    p = parser("gloo", __doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4, help="hosts on the star (default 4)")
    add_link_arguments(p, 4.0)
    add_hog_argument(p)
    add_values_argument(p)
    p.add_argument("--sizes", help=f"tensor sizes in bytes (default {FULL_SIZES}; --quick: {QUICK_SIZES})")
    p.add_argument("--switch", choices=("soft", "bmv2"), default="soft", help="P4 target (default soft)")
    p.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        default="float32",
        help="the tensors' dtype (default float32); float16 and bfloat16 go through the switch at 16 bits "
        "per value, as the torch backend sends them, and through Gloo's ring as they are",
    )
    args = p.parse_args(argv)
    if args.hog < 0:
        p.error("--hog takes a number of busy processes >= 0")
    sizes = parse_sizes(args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))
    hog = Hog(args.hog)
    iters = 1 if args.quick else args.iters
    report = Report("gloo", args.out)
    n = args.workers
    try:
        with (
            hog,
            StarCluster(
                n,
                switch=args.switch,
                bw=args.bw,
                queue=args.queue,
                burst=args.burst,
                pool_size=args.pool,
                logs=args.logs,
                values_per_packet=args.values_per_packet,
            ) as cluster,
            progress(len(sizes) * iters * 2, f"p4reduce vs Gloo, {n} workers, {args.bw:g} Mbit/s") as advance,
        ):
            for size in sizes:
                for iteration in range(iters):
                    for system in ("p4reduce", "gloo"):
                        step = cluster.run(system, size // ITEMSIZE[args.dtype], args.dtype, iteration)
                        report.add(step, switch=args.switch, bw_mbit=args.bw)
                        advance()
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    seconds, up, down, cpu = (
        report.medians(value, "system", "tensor_bytes")
        for value in ("seconds", "up_bytes", "down_bytes", "switch_cpu")
    )
    ideal = ideal_speedup(n)

    def busy(system: str, size: int) -> float:
        """How much of the time a worker's uplink carried this system's bytes."""
        return up[system, size] / seconds[system, size] / (args.bw * 1e6 / 8)

    k, mtu = cluster.values_per_packet, cluster.link_mtu  # the K the switch ran, read from its P4Info
    efficiency, frame, tcp = p4reduce_efficiency(k), p4reduce_frame(k), tcp_efficiency(mtu)
    adjusted = ideal * efficiency / tcp
    report.table(
        f"p4reduce vs Gloo ring: {n} workers, {args.bw:g} Mbit/s links, {args.dtype}, {args.pool} slots,"
        f" median of {iters}; {hog.describe()}",
        [
            "size",
            "p4reduce s",
            "Gloo s",
            "speedup",
            "ideal 2(N-1)/N",
            "wire-adjusted",
            "links busy",
            "switch CPU",
        ],
        [
            [
                human(s),
                f"{seconds['p4reduce', s]:.3f}",
                f"{seconds['gloo', s]:.3f}",
                f"{seconds['gloo', s] / seconds['p4reduce', s]:.2f}x",
                f"{ideal:.2f}x",
                f"{adjusted:.2f}x",
                f"{busy('p4reduce', s):.0%} / {busy('gloo', s):.0%}",
                f"{cpu['p4reduce', s]:.0%}",
            ]
            for s in sizes
        ],
    )
    report.table(
        "bytes on the wire per worker (switch port counters), as multiples of the tensor size S",
        [
            "size",
            "p4reduce up",
            "down",
            "expected",
            "bytes/element up",
            "Gloo up",
            "down",
            "expected (payload)",
            "with headers",
            "bytes/element up",
        ],  # fmt: skip
        [
            [
                human(s),
                f"{up['p4reduce', s] / s:.3f}",
                f"{down['p4reduce', s] / s:.3f}",
                f"{1 / efficiency:.3f}",
                f"{up['p4reduce', s] / s * ITEMSIZE[args.dtype]:.2f}",
                f"{up['gloo', s] / s:.3f}",
                f"{down['gloo', s] / s:.3f}",
                f"{ideal:.3f}",
                f"{ideal / tcp:.3f}",
                f"{up['gloo', s] / s * ITEMSIZE[args.dtype]:.2f}",
            ]
            for s in sizes
        ],
    )
    report.note(
        "links busy: p4reduce / Gloo, a worker's bytes up over its all-reduce time at the link rate.\n"
        f"expected: p4reduce S up and S down in {frame}-byte frames carrying {frame - 66} bytes"
        f" (x{1 / efficiency:.3f}, K = {k}; at 16 bits per value twice the values per frame, so the same"
        " per byte of a 2-byte tensor), plus a float call's priming (one packet while slots x N <= 4K);"
        f" a ring 2(N-1)/N·S = {ideal:.2f}·S each way, x{1 / tcp:.3f} in TCP frames"
        f" ({mtu}-byte MTU), plus ACKs."
    )

    fig, (times, speedups, wire) = figure(3, f"p4reduce vs Gloo ring, {n} workers, {args.bw:g} Mbit/s links")
    for system, style in (("p4reduce", "o-"), ("gloo", "s-")):
        times.plot(sizes, [seconds[system, s] for s in sizes], style, label=system)
        wire.plot(sizes, [up[system, s] / s for s in sizes], style, label=f"{system} (measured, up)")
    times.set(yscale="log", ylabel="all-reduce time (s), slowest worker")
    speedups.plot(sizes, [seconds["gloo", s] / seconds["p4reduce", s] for s in sizes], "o-", label="measured")
    speedups.axhline(ideal, color="green", linestyle="--", label=f"ideal 2(N-1)/N = {ideal:.2f}")
    speedups.axhline(adjusted, color="gray", linestyle=":", label=f"ideal with headers = {adjusted:.2f}")
    speedups.set(ylabel="speedup over Gloo (x)", ylim=(0, None))
    wire.axhline(1 / efficiency, color="C0", linestyle=":", label="p4reduce expected")
    wire.axhline(ideal / tcp, color="C1", linestyle=":", label="ring expected")
    wire.axhline(1.0, color="C0", linestyle="--", label="S (in-network ideal)")
    wire.axhline(ideal, color="C1", linestyle="--", label="2(N-1)/N·S (ring ideal)")
    wire.set(ylabel="bytes sent per worker / S", ylim=(0, None))
    for axes in (times, speedups, wire):
        size_axis(axes, sizes)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    return 0 if report.save(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
