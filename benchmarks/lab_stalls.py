"""Where a lossy call in the Mininet lab stood still: its switch's captures, split into stalls.

    sudo .venv/bin/python -m experiments.loss --rates 0.01 --pcaps /tmp/caps
    python benchmarks/lab_stalls.py /tmp/caps/loss-0.01/s1 [--stall-ms 25]

Reads one switch's captures (`<port>_in.pcap` and `<port>_out.pcap` per port, frames in taken before
the lab's fault injection drops one, frames out after it drops one: a DATA in with no RESULT after it
was lost at the switch's ingress, a RESULT missing from a port's capture at its egress). For each call,
in order: its time from the first DATA in to the last RESULT out, and every stall, a period with no DATA
arriving from any rank for longer than --stall-ms, the call's tail included (from its last DATA in to
its last RESULT out). The ranks move in lockstep, so a stall is a wait on one use: the lowest that had
not completed when the stall began, printed with its packets at the switch (`1.234i2D`: at 1.234 s
into the call, in from port 2, a DATA; `o3M2`: out to port 3, a MISSING answering question 2; Q QUERY,
R RESULT). Last, how many QUERYs about a complete use got no answer:
lost on the way in or the answer on the way out, about twice the loss rate, each costing the asker a
question timeout (docs/performance.md, *Heavy loss*).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import HEADER_BYTES, USE_BITS, MsgType  # noqa: E402
from hostlib.engine import HEADER  # noqa: E402
from softswitch.dataplane.pcap import read_timed_pcap  # noqa: E402

FRAME_HEADERS = 14 + 20 + 8  # Ethernet, IPv4, UDP
UDP = 17


@dataclass(frozen=True)
class Event:
    time: float
    inbound: bool
    port: int
    msg: int
    call: int
    use: int
    flags: int

    def label(self, start: float) -> str:
        kind = MsgType(self.msg).name[0]
        return f"{self.time - start:.3f}{'i' if self.inbound else 'o'}{self.port}{kind}{self.flags or ''}"


def events(directory: Path) -> list[Event]:
    """Every p4reduce packet in and out of every port of one switch, in time order."""
    out = []
    for path in sorted(directory.glob("*_*.pcap")):
        port, direction = path.stem.split("_")
        for when, frame in read_timed_pcap(path):
            if len(frame) < FRAME_HEADERS + HEADER_BYTES or frame[23] != UDP:
                continue
            msg, _rank, _job, _slot, _exp, flags, seq, *_ = HEADER.unpack_from(frame, FRAME_HEADERS)
            if msg in iter(MsgType):
                use = seq & ((1 << USE_BITS) - 1)
                out.append(Event(when, direction == "in", int(port), msg, seq >> USE_BITS, use, flags))
    return sorted(out, key=lambda e: e.time)


def report_call(call: list[Event], stall: float) -> None:
    start = call[0].time
    results = [e for e in call if not e.inbound and e.msg == MsgType.RESULT]
    completed: dict[int, float] = {}
    for e in results:
        completed.setdefault(e.use, e.time)
    data = [e for e in call if e.inbound and e.msg == MsgType.DATA]
    stalls = []
    end = max(e.time for e in results) if results else call[-1].time
    # the call's tail too: from the last DATA in to the last RESULT out, with nothing more to send
    for before, after in zip(data, [*data[1:], Event(end, True, 0, MsgType.DATA, 0, 0, 0)], strict=False):
        if after.time - before.time > stall:
            lowest = min((u for u in range(call[-1].use + 1) if completed.get(u, float("inf")) > before.time),
                         default=None)  # fmt: skip
            story = [e.label(start) for e in call if e.use == lowest and (e.msg != MsgType.RESULT or e.time
                     <= after.time + stall)]  # fmt: skip
            stalls.append((before.time - start, after.time - before.time, lowest, story))
    span = end - start
    print(
        f"call {call[0].call}: {span:.3f} s, {len(stalls)} stalls, {sum(s[1] for s in stalls):.3f} s in all"
    )
    for began, length, lowest, story in stalls:
        print(f"  at {began:.3f} s for {length:.3f} s, use {lowest}: {' '.join(story[:16])}")


def unanswered(every: list[Event]) -> tuple[int, int]:
    """QUERYs about a use already complete, and how many of them got no answer within 2 ms."""
    complete: dict[tuple[int, int], float] = {}
    answers: dict[tuple[int, int, int, int], list[float]] = defaultdict(list)
    for e in every:
        if not e.inbound:
            if e.msg == MsgType.RESULT:
                complete.setdefault((e.call, e.use), e.time)
            answers[(e.port, e.call, e.use, e.flags)].append(e.time)
    asked = missed = 0
    for e in every:
        if e.inbound and e.msg == MsgType.QUERY and complete.get((e.call, e.use), float("inf")) < e.time:
            asked += 1
            missed += not any(e.time <= t < e.time + 0.002 for t in answers[(e.port, e.call, e.use, e.flags)])
    return asked, missed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "captures", type=Path, help="one switch's capture folder (experiments' --pcaps DIR/.../s1)"
    )
    p.add_argument("--stall-ms", type=float, default=25.0, help="gaps in DATA longer than this (default 25)")
    args = p.parse_args(argv)
    every = events(args.captures)
    if not every:
        p.error(f"{args.captures}: no p4reduce packets in *_in.pcap / *_out.pcap")
    by_call: dict[int, list[Event]] = defaultdict(list)
    for e in every:
        by_call[e.call].append(e)
    for number in sorted(by_call):
        report_call(by_call[number], args.stall_ms / 1000)
    asked, missed = unanswered(every)
    print(f"QUERYs about complete uses: {asked}, unanswered {missed} ({missed / max(asked, 1):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
