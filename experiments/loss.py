"""Goodput and retransmissions under packet loss, p4reduce and Gloo, over a Mininet star.

The embedded switch drops each packet it receives and each packet it sends
with the given probability (a seeded generator: the same run drops the
same packets). p4reduce recovers by asking the switch (a header-only
QUERY), which replays a lost result or names the ranks whose DATA is
missing, and only they resend (docs/protocol.md); Gloo relies on TCP.
Every result is verified: loss may cost time, never correctness.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from experiments.cluster import ExperimentError, LaunchError, StarCluster
from experiments.report import (
    Report,
    add_link_arguments,
    add_values_argument,
    figure,
    human,
    parser,
    progress,
)
from hostlib.native import CONGESTION_CONTROL_VARIABLE, congestion_control_default

FULL_RATES, QUICK_RATES = "0,0.001,0.01,0.05", "0,0.05"
FULL_BYTES, QUICK_BYTES = 1 << 20, 16 << 10


def main(argv: list[str] | None = None) -> int:
    p = parser("loss", __doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4, help="hosts on the star (default 4)")
    add_link_arguments(p, 4.0)
    add_values_argument(p)
    p.add_argument(
        "--ecn-ms", type=float, default=0.0, metavar="MS",
        help="limited links mark ECN-capable packets CE once their queue holds more than MS ms (default 0: "
        "tail drop only)",
    )  # fmt: skip
    p.add_argument("--rates", help=f"loss rates each way (default {FULL_RATES}; --quick: {QUICK_RATES})")
    p.add_argument("--bytes", type=int, help=f"tensor bytes (default {human(FULL_BYTES)}; --quick: 16 KB)")
    p.add_argument(
        "--pcaps", type=Path, metavar="DIR",
        help="the switch captures every frame in and out of each port, per loss rate: DIR/loss-<rate>/"
        "<switch>/<port>_{in,out}.pcap (about 65 MB a rate; benchmarks/lab_stalls.py reads them)",
    )  # fmt: skip
    p.add_argument(
        "--no-congestion-control", action="store_true",
        help="p4reduce's workers without ECN and the congestion window, each sending its whole window "
        "(docs/protocol.md, *Congestion*); on by default",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.no_congestion_control:  # the agents the cluster spawns read it (congestion_control_default)
        os.environ[CONGESTION_CONTROL_VARIABLE] = "0"
    congestion_control = congestion_control_default()
    cc = "on" if congestion_control else "off"
    rates = [float(r) for r in (args.rates or (QUICK_RATES if args.quick else FULL_RATES)).split(",")]
    if not all(0.0 <= r < 1.0 for r in rates):
        p.error("loss rates must be in [0, 1)")
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    iters = 1 if args.quick else args.iters
    report = Report("loss", args.out)
    systems = ("p4reduce", "gloo")
    try:
        with progress(len(rates) * iters * len(systems), f"loss, {human(size)} float32") as advance:
            for rate in rates:
                with StarCluster(
                    args.workers,
                    bw=args.bw,
                    queue=args.queue,
                    burst=args.burst,
                    drop_rate=rate,
                    pool_size=args.pool,
                    logs=args.logs,
                    values_per_packet=args.values_per_packet,
                    ecn_ms=args.ecn_ms,
                    pcaps=None if args.pcaps is None else args.pcaps / f"loss-{rate:g}",
                ) as cluster:
                    k = cluster.values_per_packet  # the K the switch runs, from its program's P4Info
                    for iteration in range(iters):
                        for system in systems:
                            step = cluster.run(system, size // 4, "float32", iteration)
                            report.add(
                                step, loss=rate, bw_mbit=args.bw, congestion_control=congestion_control
                            )
                            advance()
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    goodput = report.medians("goodput", "system", "loss")
    retransmissions = report.medians("retransmissions", "system", "loss")
    queries = report.medians("queries", "system", "loss")
    value_bytes = 4 * k
    sent = args.workers * (size // value_bytes)  # DATA packets of one p4reduce all-reduce, priming aside
    report.table(
        f"goodput per worker under loss each way: {args.workers} workers, {args.bw:g} Mbit/s, "
        f"{human(size)} float32, {args.pool} slots, congestion control {cc}, "
        f"median of {iters}",
        [
            "loss",
            "p4reduce MB/s",
            "of lossless",
            "DATA resent",
            "queries",
            "Gloo MB/s",
            "of lossless",
        ],
        [
            [
                f"{rate:.1%}",
                f"{goodput['p4reduce', rate] / 1e6:.3f}",
                f"{goodput['p4reduce', rate] / goodput['p4reduce', rates[0]]:.0%}",
                f"{retransmissions['p4reduce', rate] / sent:.2%}",
                f"{queries['p4reduce', rate] / sent:.2%}",
                f"{goodput['gloo', rate] / 1e6:.3f}",
                f"{goodput['gloo', rate] / goodput['gloo', rates[0]]:.0%}",
            ]
            for rate in rates
        ],
    )
    report.note(
        "DATA resent, queries = per DATA packet. Only the rank whose DATA was lost resends it (the switch's "
        "MISSING, its answer to that rank's QUERY, names it), so about p DATA are resent per DATA sent; a "
        "lost DATA costs a 24-byte QUERY from every rank, of which the switch answers one, and a lost "
        "RESULT one QUERY, so about (N + 1)p queries for small p (docs/protocol.md, *Loss recovery*)."
    )

    fig, (left, right) = figure(2, f"loss at the switch, {args.workers} workers, {args.bw:g} Mbit/s links")
    xs = [max(rate * 100, 0.01) for rate in rates]  # log axis: lossless drawn at 0.01 %
    for system, style in (("p4reduce", "o-"), ("gloo", "s-")):
        left.plot(xs, [goodput[system, r] / 1e6 for r in rates], style, label=system)
    left.set(ylabel="goodput per worker (MB/s)", ylim=(0, None))
    resends = [retransmissions["p4reduce", r] / sent * 100 for r in rates]
    right.plot(xs, resends, "o-", color="C0", label="p4reduce, DATA resent")
    asked = [queries["p4reduce", r] / sent * 100 for r in rates]
    right.plot(xs, asked, "^--", color="C2", label="p4reduce, queries (24 B)")
    right.plot(xs, [r * 100 for r in rates], ":", color="gray", label="p, the DATA lost")
    right.set(ylabel="per DATA packet (%)")
    for axes in (left, right):
        axes.set_xscale("log")
        axes.set_xticks(xs, ["0" if r == 0 else f"{r * 100:g}%" for r in rates])
        axes.minorticks_off()
        axes.set_xlabel("loss rate each way (0 drawn at 0.01%)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    return 0 if report.save(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
