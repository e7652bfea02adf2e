"""Where the time goes under loss: every use's timeline at the switch, lossless against lossy, in one run.

    python benchmarks/loss_timeline.py [--drop-rate 0.05] [--pool-size 32] [--elements 1048576] [--iters 5]

Runs what `p4reduce-bench` runs (4 workers joining a job of a rootless p4reduce-switch, float32
all-reduces, a lossless phase and a lossy one, each on its own switch with seeded loss each way),
but with both switches up at once and each worker making each iteration's call on both, in turn
(the order alternating), so that the load of a shared machine weighs on both phases alike. Each
switch captures every frame in and out (`--pcap`, microsecond times, taken before the fault
injection drops a frame in and after it drops a frame out), and each worker returns its
engine's counters. From the captures it rebuilds each use of a slot:

    result(u-W) to rank r ... r's DATA(u) arrives ... the use completes ... RESULT(u) reaches every rank

and splits each slot's cycle from one use's completion to the next use's completion into
- *turnaround*: the last rank's first DATA of the next use arrives (after its RESULT left the switch);
- *DATA recovery*: from then until the use completes (0 unless a contribution was lost: the lost
  DATA's detection, the question, the MISSING, the resend);
- *RESULT recovery*: from the completion until the last rank's RESULT (multicast or replay) left,
  counted in the next cycle's turnaround start (a lost RESULT holds the slot's next use back).
Printed per phase: the call time, the mean cycle and its parts, the engines' counters, and the
packets per use in and out of the switch and sent and received by the hosts, whose sum (packet
events) is the work that five processes on two cores share; then the lossy phase's extra time per
slot cycle, split, and how its extra time compares with its extra packet events.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import HEADER_BYTES, SLOT_MASK, USE_BITS, MsgType  # noqa: E402
from hostlib.engine import HEADER  # noqa: E402
from hostlib.launch import services, share_job_credential  # noqa: E402
from hostlib.verify import check, make_input  # noqa: E402
from softswitch.dataplane.pcap import read_timed_pcap  # noqa: E402

FRAME_HEADERS = 14 + 20 + 8  # Ethernet, IPv4, UDP
COUNTERS = (
    "packets_sent", "packets_received", "retransmissions", "queries", "fast_retransmissions", "timeouts",
    "missing_received", "missing_resends", "ignored",
)  # fmt: skip


def worker(controllers: list[str], jobs: list[str], rank: int, world: int, elements: int, iters: int) -> list:
    """Each iteration's call on every phase's switch in turn, the order alternating: load drift hits all."""
    from hostlib.communicator import Communicator

    comms = [
        Communicator.join(c, j, rank, world, address=(f"127.0.0.{2 + rank}", 0))
        for c, j in zip(controllers, jobs, strict=True)
    ]
    before = [comm.stats() for comm in comms]
    times: list[list[float]] = [[] for _ in comms]
    ok = [True for _ in comms]
    for iteration in range(iters):
        data = make_input(rank, elements, "float32", iteration)
        order = range(len(comms)) if iteration % 2 == 0 else reversed(range(len(comms)))
        for p in order:
            started = time.perf_counter()
            result = comms[p].allreduce(data)
            times[p].append(time.perf_counter() - started)
            ok[p] &= check(result, world, elements, "float32", iteration, k=comms[p].job.values_per_packet)[0]
    out = []
    for p, comm in enumerate(comms):
        after = comm.stats()
        counters = {name: getattr(after, name) - getattr(before[p], name) for name in COUNTERS}
        rtt = statistics.median(after.rtt_samples) if after.rtt_samples else 0.0
        out.append({"rank": rank, "times": times[p], "ok": ok[p], "counters": counters, "rtt": rtt})
        comm.close()
    return out


@dataclass
class Use:
    data: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))  # rank -> DATA arrivals
    queries: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    results: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))  # rank -> RESULTs out
    missing: list[float] = field(default_factory=list)  # MISSING multicasts (first replica)
    complete: float | None = None  # the first RESULT that left


def timelines(directory: Path) -> dict[tuple[int, int, int], Use]:
    """(call, use, slot) -> what the switch saw of it."""
    uses: dict[tuple[int, int, int], Use] = defaultdict(Use)
    for direction in ("in", "out"):
        for when, frame in read_timed_pcap(directory / f"1_{direction}.pcap"):
            if len(frame) < FRAME_HEADERS + HEADER_BYTES or frame[23] != 17:
                continue
            msg, rank, _job, set_slot, _exp, _flags, seq, _key, _call, _aux = HEADER.unpack_from(
                frame, FRAME_HEADERS
            )
            use = uses[(seq >> USE_BITS, seq & ((1 << USE_BITS) - 1), set_slot & SLOT_MASK)]
            if direction == "in":
                if msg == MsgType.DATA:
                    use.data[rank].append(when)
                elif msg == MsgType.QUERY:
                    use.queries[rank].append(when)
                continue
            to = frame[33] - 2  # 127.0.0.(2 + rank)
            if msg == MsgType.RESULT:
                use.results[to].append(when)
                use.complete = when if use.complete is None else min(use.complete, when)
            elif msg == MsgType.MISSING and (not use.missing or when - use.missing[-1] > 1e-4):
                use.missing.append(when)
    return uses


@dataclass
class Split:
    turnaround: float = 0.0
    data_recovery: float = 0.0
    result_recovery: float = 0.0
    cycles: int = 0
    data_lost_uses: int = 0
    result_lost_uses: int = 0
    detect: list[float] = field(default_factory=list)  # lost DATA's first arrival -> first QUERY
    answer: list[float] = field(default_factory=list)  # first MISSING -> the last rank's resend
    finish: list[float] = field(default_factory=list)  # that resend -> complete
    own_query: list[float] = field(default_factory=list)  # lost RESULT: complete -> the loser's first QUERY
    replayed: list[float] = field(default_factory=list)  # lost RESULT: complete -> its replay left
    others_first: int = 0  # lost RESULTs where another rank asked about the next use before the loser asked
    span: float = 0.0  # per call: its first DATA's arrival to its last RESULT's departure, summed over calls
    tail: float = 0.0  # per call: from the median slot's last completion to the call's last, summed


def split(uses: dict[tuple[int, int, int], Use], world: int) -> Split:
    out = Split()
    by_slot: dict[tuple[int, int], list[tuple[int, Use]]] = defaultdict(list)
    for (call, number, slot), use in uses.items():
        by_slot[(call, slot)].append((number, use))
    ends: dict[int, list[float]] = defaultdict(list)
    starts: dict[int, float] = {}
    for (call, _), entries in by_slot.items():
        entries.sort(key=lambda e: e[0])
        last = entries[-1][1]
        if last.results:
            ends[call].append(max(min(times) for times in last.results.values()))
        first = min((t for _, use in entries for times in use.data.values() for t in times), default=None)
        if first is not None:
            starts[call] = min(starts.get(call, first), first)
    for call, slot_ends in ends.items():
        out.span += max(slot_ends) - starts[call]
        out.tail += max(slot_ends) - statistics.median(slot_ends)
    for entries in by_slot.values():
        for (_, prev), (_, use) in zip(entries, entries[1:], strict=False):
            if prev.complete is None or use.complete is None or len(use.data) < world:
                continue
            delivered = max(min(prev.results[r]) for r in range(world) if prev.results.get(r))
            last_first = max(times[0] for times in use.data.values())
            out.cycles += 1
            out.result_recovery += max(delivered - prev.complete, 0.0)
            out.turnaround += max(last_first - max(delivered, prev.complete), 0.0)
            stall = max(use.complete - max(last_first, delivered), 0.0)
            out.data_recovery += stall
            lost_data = any(len(times) > 1 for times in use.data.values())
            out.data_lost_uses += lost_data
            out.result_lost_uses += any(len(times) > 1 for times in prev.results.values()) or any(
                not prev.results.get(r) for r in range(world)
            )
            for r in range(world):
                if len(prev.results.get(r, ())) == 1 and min(prev.results[r]) > prev.complete + 1e-6:
                    own = prev.queries.get(r)
                    if own:
                        out.own_query.append(min(own) - prev.complete)
                        others = [t for q, ts in use.queries.items() if q != r for t in ts]
                        out.others_first += bool(others) and min(others) < min(own)
                    out.replayed.append(prev.results[r][0] - prev.complete)
            if lost_data:
                resender = max(use.data, key=lambda r: use.data[r][-1] if len(use.data[r]) > 1 else 0)
                asked = [t for times in use.queries.values() for t in times]
                if asked:
                    out.detect.append(min(asked) - use.data[resender][0])
                if use.missing:
                    out.answer.append(use.data[resender][-1] - use.missing[0])
                out.finish.append(use.complete - use.data[resender][-1])
    return out


def phases(args: argparse.Namespace) -> list[tuple[list[dict], dict, Split]]:
    """Both phases at once, each on its own switch: per phase, the workers' results, the switch's
    counters and the timelines from its capture."""
    import json

    rates = {"lossless": 0.0, "lossy": args.drop_rate}
    with contextlib.ExitStack() as stack:
        controllers = []
        for tag, rate in rates.items():
            logs = ROOT / "logs" / f"timeline-{tag}"
            for old in (logs / "pcap").glob("*.pcap"):
                old.unlink()
            svc = stack.enter_context(
                services(
                    logs,
                    ROOT / "build",
                    drop_rate=rate,
                    drop_rate_out=rate,
                    pool_size=args.pool_size,
                    stats_file=logs / "switch-stats.json",
                    pcap=logs / "pcap",
                )  # fmt: skip
            )
            controllers.append(svc.controller)
        jobs = [f"timeline-{tag}" for tag in rates]
        arguments = [(controllers, jobs, r, 4, args.elements, args.iters) for r in range(4)]
        with multiprocessing.get_context("spawn").Pool(4) as pool:
            per_rank = pool.starmap(worker, arguments)
    out = []
    for p, tag in enumerate(rates):
        logs = ROOT / "logs" / f"timeline-{tag}"
        stats = logs / "switch-stats.json"
        switch = json.loads(stats.read_text()) if stats.exists() else {}
        out.append(([w[p] for w in per_rank], switch, split(timelines(logs / "pcap"), 4)))
    return out


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us"


def report(tag: str, workers: list[dict], switch: dict, s: Split, uses: float) -> tuple[float, float]:
    """Print one phase; returns its time per call and its packet events per use."""
    seconds = statistics.median(max(w["times"][i] for w in workers) for i in range(len(workers[0]["times"])))
    counters = {name: sum(w["counters"][name] for w in workers) for name in COUNTERS}
    exact = all(w["ok"] for w in workers)
    print(f"{tag}: {seconds * 1e3:.0f} ms per call (median of the slowest rank), all exact: {exact}")
    rx, tx = switch.get("rx", 0), switch.get("tx", 0) + switch.get("dropped_fault_out", 0)
    sent, received = counters["packets_sent"], counters["packets_received"]
    events = (rx + tx + sent + received) / uses
    print(
        f"  packets per use: switch {rx / uses:.2f} in, {tx / uses:.2f} out; hosts {sent / uses:.2f} sent, "
        f"{received / uses:.2f} received: {events:.1f} packet events (dropped by the switch: "
        f"{switch.get('dropped_fault_in', 0)} in, {switch.get('dropped_fault_out', 0)} out)"
    )
    print("  engines: " + ", ".join(f"{k} {v}" for k, v in counters.items()))
    print(f"  data round trip: median {us(statistics.median(w['rtt'] for w in workers))} (ranks' medians)")
    if s.cycles:
        n = s.cycles
        print(
            f"  slot cycle {us((s.turnaround + s.data_recovery + s.result_recovery) / n)} = turnaround "
            f"{us(s.turnaround / n)} + DATA recovery {us(s.data_recovery / n)} + RESULT recovery "
            f"{us(s.result_recovery / n)} (mean of {n}; {s.data_lost_uses} uses with DATA resent, "
            f"{s.result_lost_uses} with a RESULT replayed)"
        )
    if s.span:
        print(
            f"  calls at the switch: {s.span * 1e3:.0f} ms in all, of which {s.tail * 1e3:.0f} ms after the "
            "median slot's last RESULT (waiting for the slowest slot)"
        )
    if s.own_query:
        print(
            f"  lost RESULT: another rank asked about the next use before its rank asked in "
            f"{s.others_first} of {len(s.own_query)}"
        )
    named = (
        ("lost DATA, its arrival -> first QUERY", s.detect),
        ("lost DATA, first MISSING -> resend arrives", s.answer),
        ("lost DATA, resend -> complete", s.finish),
        ("lost RESULT, complete -> its rank's QUERY", s.own_query),
        ("lost RESULT, complete -> replay", s.replayed),
    )
    for name, values in named:
        if len(values) >= 2:
            q = statistics.quantiles(values, n=10)
            print(f"  {name}: median {us(statistics.median(values))}, p10 {us(q[0])}, p90 {us(q[-1])}")
    return seconds, events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drop-rate", type=float, default=0.05)
    parser.add_argument("--pool-size", type=int, default=32)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    share_job_credential()
    print(f"load average {os.getloadavg()[0]:.2f}")
    uses = args.iters * -(-args.elements // 64)  # slot uses of all calls, K = 64 (priming uses left out)
    base, worse = phases(args)
    lossless, events = report("lossless", *base, uses)
    lossy, lossy_events = report(f"{args.drop_rate:.1%} loss each way", *worse, uses)
    paired = [
        max(w["times"][i] for w in base[0]) / max(w["times"][i] for w in worse[0]) for i in range(args.iters)
    ]
    print(
        f"goodput ratio {lossless / lossy:.0%} (per iteration: {', '.join(f'{r:.0%}' for r in paired)}); "
        f"time {lossy / lossless:.2f}x, packet events {lossy_events / events:.2f}x; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    a, b = base[2], worse[2]
    if a.cycles and b.cycles:
        extra = [
            ("turnaround", b.turnaround / b.cycles - a.turnaround / a.cycles),
            ("DATA recovery", b.data_recovery / b.cycles - a.data_recovery / a.cycles),
            ("RESULT recovery", b.result_recovery / b.cycles - a.result_recovery / a.cycles),
        ]
        print("extra per slot cycle: " + ", ".join(f"{name} {us(v)}" for name, v in extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
