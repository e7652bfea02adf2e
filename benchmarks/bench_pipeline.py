"""The embedded switch's pipeline on both backends against hand-written floors, in one run.

    python benchmarks/bench_pipeline.py [--chunks N] [--runs R]

Pushes the DATA packets (K = 64, or --values-per-packet) of a 4-worker job (rotating slots, alternating
sets, every slot completing) through the real p4reduce.p4, in process: no
sockets, no gRPC. Four figures, each the median of R runs (interleaved, so
that a busy machine slows them alike), with their spread:

- C backend: the whole batch in one call (`p4_process_batch`), so the
  figure is the pipeline's, not ctypes';
- C floor: the least any switch must do per packet, hand-written in C and
  built by the same compiler with the same flags: unpack the K big-endian
  values and add them into the slot's sums, no P4 semantics at all;
- Python backend, and the Python floor (one `struct.unpack_from`, K adds).

Prints µs/packet for each and the two ratios (targets: C backend <= 2x
the C floor; the Python backend's first target was 3x its floor).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import EMBEDDED_DEFAULT_VALUES_PER_PACKET, HEADER_BYTES  # noqa: E402
from softswitch import ir  # noqa: E402
from softswitch.backends.c import build  # noqa: E402
from softswitch.backends.loader import new_pipeline  # noqa: E402
from softswitch.frontend import compile_file  # noqa: E402
from softswitch.p4info import build_p4info  # noqa: E402
from softswitch.runtime.pipeline import Pipeline  # noqa: E402
from tests import protocol_scenarios as ps  # noqa: E402
from tests.executor.pipeline_driver import PipelineDriver  # noqa: E402
from tests.packet_program import INCLUDE, PACKET_K, PROGRAM  # noqa: E402

VALUES_AT = 14 + 20 + 8 + HEADER_BYTES  # Ethernet, IPv4, UDP, p4reduce header: where the values start
SLOTS = 64


def floor_c(k: int) -> str:
    return f"""
#include <stdint.h>
#include <string.h>
#define K {k}
static int64_t sums[{SLOTS}][K];
/* Per packet: the K big-endian int32 values at offset {VALUES_AT}, added into the slot's sums. */
__attribute__((visibility("default"))) long floor_batch(uint32_t count, const uint8_t *const *frames) {{
    for (uint32_t i = 0; i < count; i++) {{
        const uint8_t *v = frames[i] + {VALUES_AT};
        int64_t *slot = sums[(i >> 2) & {SLOTS - 1}];
        for (int k = 0; k < K; k++) {{
            uint32_t be;
            memcpy(&be, v + 4 * k, 4);
            slot[k] += (int32_t)__builtin_bswap32(be);
        }}
    }}
    return (long)sums[0][0];
}}
"""


@functools.cache
def program_at(k: int) -> ir.Program:
    """p4reduce.p4 compiled for `k` values per packet, once per process (every run builds a pipeline)."""
    return compile_file(PROGRAM, include_dirs=[INCLUDE], defines={"VALUES_PER_PACKET": str(k)})


def workload(chunks: int, backend: str, k: int) -> tuple[Pipeline, list[tuple[int, bytes]]]:
    """The pipeline at `k` values per packet, and the DATA of `chunks` slot uses (4 ranks each)."""
    program = program_at(k)
    info = build_p4info(program)
    pipeline = new_pipeline(program, info, backend)
    driver = PipelineDriver(pipeline, info)
    job = ps.Job(
        job_id=5, base=0, pool_size=SLOTS, mcast_grp=2, workers=ps.HOSTS[:4], epoch=0x5EED, keys=(1, 2, 3, 4)
    )
    setup = ps.standard_setup()[0]
    ps.install(driver, ps.Install(entries=setup.entries, groups=setup.groups))
    ps.install(driver, ps.job_install(job))
    frames, sets = [], [0] * job.pool_size
    for chunk in range(chunks):
        slot = chunk % job.pool_size
        for rank in range(4):
            values = ps.vector(chunk, rank, seed=chunk, k=k)
            frame = ps.contribution(job, rank, slot, values, set_bit=sets[slot], seq=chunk)
            frames.append((job.workers[rank].port, frame))
        sets[slot] ^= 1
    return pipeline, frames


def time_c(pipeline: Pipeline, frames: list[tuple[int, bytes]]) -> tuple[float, int]:
    n = len(frames)
    ports = (ctypes.c_uint64 * n)(*(p for p, _ in frames))
    data = (ctypes.c_char_p * n)(*(f for _, f in frames))
    lengths = (ctypes.c_uint32 * n)(*(len(f) for _, f in frames))
    batch = pipeline.context.lib.p4_process_batch  # type: ignore[attr-defined]
    started = time.perf_counter()
    out = batch(pipeline.context.ptr, n, ports, data, lengths)  # type: ignore[attr-defined]
    return time.perf_counter() - started, out


def time_python(pipeline: Pipeline, frames: list[tuple[int, bytes]]) -> tuple[float, int]:
    process = pipeline.process
    out = 0
    started = time.perf_counter()
    for port, frame in frames:
        out += len(process(port, frame))
    return time.perf_counter() - started, out


def time_floor_c(frames: list[tuple[int, bytes]], k: int) -> float:
    lib = build.load(build.build(floor_c(k), name="floor"))
    lib.floor_batch.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
    lib.floor_batch.restype = ctypes.c_long
    data = (ctypes.c_char_p * len(frames))(*(f for _, f in frames))
    started = time.perf_counter()
    lib.floor_batch(len(frames), data)
    return time.perf_counter() - started


def time_floor_python(frames: list[tuple[int, bytes]], k: int) -> float:
    unpack = struct.Struct(f">{k}i").unpack_from
    slots = [[0] * k for _ in range(SLOTS)]
    started = time.perf_counter()
    for index, (_port, frame) in enumerate(frames):
        values = unpack(frame, VALUES_AT)
        slot = slots[(index >> 2) & (SLOTS - 1)]
        for i in range(k):
            slot[i] += values[i]
    return time.perf_counter() - started


def summary(name: str, seconds: list[float], n: int) -> float:
    per = sorted(s / n * 1e6 for s in seconds)
    median = statistics.median(per)
    rate = 1e6 / median
    print(f"{name:<16} {median:8.3f} us/packet  (runs {per[0]:.3f} .. {per[-1]:.3f}; {rate:>10,.0f} pkt/s)")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=5000, help="slot uses to push (4 packets each)")
    parser.add_argument("--python-chunks", type=int, default=1000, help="slot uses for the Python backend")
    parser.add_argument("--runs", type=int, default=5, help="runs of each figure; medians are printed")
    parser.add_argument(
        "--values-per-packet", type=int, default=PACKET_K, metavar="K",
        help=f"K the program is compiled for and the packets carry (default {PACKET_K}; the embedded "
        f"switch's own default is {EMBEDDED_DEFAULT_VALUES_PER_PACKET})",
    )  # fmt: skip
    args = parser.parse_args()
    k = args.values_per_packet
    results: dict[str, list[float]] = {"c": [], "c floor": [], "python": [], "python floor": []}
    timers: list[tuple[str, Callable[[], float]]] = []
    expected = {"c": args.chunks * 4, "python": args.python_chunks * 4}

    def backend_timer(backend: str, chunks: int) -> Callable[[], float]:
        def run() -> float:
            pipeline, frames = workload(chunks, backend, k)
            seconds, out = (time_c if backend == "c" else time_python)(pipeline, frames)
            assert out == expected[backend], f"{backend}: expected {expected[backend]} results, got {out}"
            return seconds

        return run

    _, c_frames = workload(args.chunks, "python", k)
    _, py_frames = workload(args.python_chunks, "python", k)
    timers = [
        ("c", backend_timer("c", args.chunks)),
        ("c floor", lambda: time_floor_c(c_frames, k)),
        ("python", backend_timer("python", args.python_chunks)),
        ("python floor", lambda: time_floor_python(py_frames, k)),
    ]
    timers[0][1]()  # warm up: builds (or finds) the shared objects
    time_floor_c(c_frames[:100], k)
    for _ in range(args.runs):
        for name, timer in timers:
            results[name].append(timer())
    load = os.getloadavg()
    print(f"p4reduce.p4, DATA of a 4-worker job, K={k}; {args.runs} runs each, interleaved")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    c = summary("C backend", results["c"], len(c_frames))
    c_floor = summary("C floor", results["c floor"], len(c_frames))
    py = summary("Python backend", results["python"], len(py_frames))
    py_floor = summary("Python floor", results["python floor"], len(py_frames))
    print(
        f"ratio: C backend {c / c_floor:.2f}x the C floor (target <= 2x); C backend {py / c:.0f}x faster "
        f"than the Python backend; Python backend {py / py_floor:.1f}x its floor"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
