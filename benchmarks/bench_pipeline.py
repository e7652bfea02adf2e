"""The embedded switch's compiled pipeline against a hand-written Python floor, in one run.

    python benchmarks/bench_pipeline.py [--chunks N]

Pushes the DATA packets of a 4-worker job (rotating slots, alternating
sets, every slot completing) through `Pipeline.process` of the real
p4reduce.p4, in-process: no sockets, no gRPC. The floor is the least any
Python switch must do per packet: unpack the 32 values with one
`struct.unpack_from` and add them into a slot's list, with no P4 semantics
at all. Prints packets/s and µs/packet for both, and the ratio last
(the target is at most 3x).
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from softswitch.backends.python.executor import Pipeline  # noqa: E402
from softswitch.frontend import compile_file  # noqa: E402
from softswitch.p4info import build_p4info  # noqa: E402
from tests import protocol_scenarios as ps  # noqa: E402
from tests.executor.pipeline_driver import PipelineDriver  # noqa: E402

HEADERS = 14 + 20 + 8 + 12  # Ethernet, IPv4, UDP, p4reduce header: where the values start


def workload(chunks: int) -> tuple[Pipeline, list[tuple[int, bytes]]]:
    program = compile_file(ROOT / "p4src/v1model/p4reduce.p4", include_dirs=[ROOT / "p4src"])
    info = build_p4info(program)
    pipeline = Pipeline(program, info)
    driver = PipelineDriver(pipeline, info)
    job = ps.Job(
        job_id=5, base=0, pool_size=64, mcast_grp=2, workers=ps.HOSTS[:4], epoch=0x5EED, keys=(1, 2, 3, 4)
    )
    setup = ps.standard_setup()[0]
    ps.install(driver, ps.Install(entries=setup.entries, groups=setup.groups))
    ps.install(driver, ps.job_install(job))
    frames, sets = [], [0] * job.pool_size
    for chunk in range(chunks):
        slot = chunk % job.pool_size
        for rank in range(4):
            values = ps.vector(chunk, rank, seed=chunk)
            frame = ps.contribution(job, rank, slot, values, set_bit=sets[slot], seq=chunk)
            frames.append((job.workers[rank].port, frame))
        sets[slot] ^= 1
    return pipeline, frames


def time_pipeline(pipeline: Pipeline, frames: list[tuple[int, bytes]]) -> tuple[float, int]:
    process = pipeline.process
    out = 0
    started = time.perf_counter()
    for port, frame in frames:
        out += len(process(port, frame))
    return time.perf_counter() - started, out


def time_floor(frames: list[tuple[int, bytes]]) -> float:
    unpack = struct.Struct(">32i").unpack_from
    slots = [[0] * 32 for _ in range(64)]
    started = time.perf_counter()
    for index, (_port, frame) in enumerate(frames):
        values = unpack(frame, HEADERS)
        slot = slots[(index >> 2) & 63]
        for i in range(32):
            slot[i] += values[i]
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=5000, help="slot uses to push (4 packets each)")
    args = parser.parse_args()
    pipeline, frames = workload(args.chunks)
    time_pipeline(pipeline, frames[:400])  # warm up
    pipeline, frames = workload(args.chunks)
    pipe_s, outputs = time_pipeline(pipeline, frames)
    floor_s = time_floor(frames)
    n = len(frames)
    assert outputs == args.chunks * 4, f"expected {args.chunks * 4} results, got {outputs}"
    print(f"packets: {n} DATA of a 4-worker job ({args.chunks} completed slots, {outputs} results)")
    print(f"pipeline: {n / pipe_s:>10,.0f} packets/s  {pipe_s / n * 1e6:6.2f} us/packet  (p4reduce.p4)")
    print(f"floor:    {n / floor_s:>10,.0f} packets/s  {floor_s / n * 1e6:6.2f} us/packet  (unpack + add)")
    print(f"ratio: pipeline costs {pipe_s / floor_s:.1f}x the floor per packet (target <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
