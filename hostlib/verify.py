"""Worker-side verification shared by the demo, the benchmark and the lab.

Every rank can generate every rank's input (seeded by rank), so each worker
checks its own result against numpy's sum without any extra communication:
int32 must be exact; floats must lie within the quantization bound of
docs/protocol.md (at the call's wire width), computed from the exponents the
switch must have agreed. bfloat16, which numpy lacks, is its bit patterns in
uint16 arrays (hostlib.quantize), as the communicator takes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from contracts.protocol import EXP_NONFINITE
from hostlib import quantize as q

RELEASE = np.zeros(1, dtype=np.int32)  # the untimed all-reduce that starts a timed call on every rank
HALF_DTYPES = ("float16", "bfloat16")  # what the torch backend sends at 16 bits by default
ITEMSIZE = {"int32": 4, "float32": 4, "float16": 2, "bfloat16": 2}  # bytes per element of each dtype


def call_options(dtype: str, wire_bits: int = 32) -> dict[str, object]:
    """Communicator.allreduce's keywords for a dtype: bfloat16's name, and `wire_bits` for 16-bit
    dtypes (float32 and int32 always travel at 32)."""
    options: dict[str, object] = {"wire_bits": wire_bits if dtype in HALF_DTYPES else 32}
    if dtype == "bfloat16":
        options["logical_dtype"] = "bfloat16"
    return options


def as_float64(values: np.ndarray, dtype: str) -> np.ndarray:
    """A tensor of `dtype` (bfloat16: bit patterns) as float64."""
    return (q.bfloat16_to_float32(values) if dtype == "bfloat16" else values).astype(np.float64)


def _float_info(dtype: str) -> tuple[float, float]:
    """(eps, smallest subnormal) of a float dtype."""
    if dtype == "bfloat16":
        return 2.0**-7, 2.0**-133
    info = np.finfo(dtype)
    return float(info.eps), float(info.smallest_subnormal)


@dataclass(frozen=True)
class WorkerReport:
    rank: int
    dtype: str
    elements: int
    seconds: float
    goodput: float  # input bytes per second
    retransmissions: int
    ok: bool
    exact: bool
    max_error: float
    bound: float
    error: str = ""


def make_input(rank: int, elements: int, dtype: str, iteration: int = 0) -> np.ndarray:
    """A deterministic tensor for `rank`: gradients spanning magnitudes, or ints with wrap-around."""
    rng = np.random.default_rng([rank, iteration, elements])
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31, size=elements, dtype=np.int64).astype(np.int32)
    magnitudes = 10.0 ** rng.uniform(-6, 2, size=elements)
    values = rng.standard_normal(elements) * magnitudes
    return q.float_to_bfloat16(values) if dtype == "bfloat16" else values.astype(dtype)


def expected_sum(world: int, elements: int, dtype: str, iteration: int = 0) -> np.ndarray:
    inputs = [make_input(rank, elements, dtype, iteration) for rank in range(world)]
    if dtype == "int32":
        return np.sum(inputs, axis=0, dtype=np.int64).astype(np.int64).astype(np.int32)
    return np.sum([as_float64(x, dtype) for x in inputs], axis=0)


def float_bound(
    world: int, elements: int, dtype: str, k: int, iteration: int = 0, bits: int = 32
) -> np.ndarray:
    """Per element, N/(2S) with S from the maximum wire exponent of its chunk (K values, 2K at 16 bits)
    over all ranks."""
    block = k * q.lanes(bits)
    exps = np.max(
        [
            q.wire_exponents(q.as_chunks(as_float64(make_input(r, elements, dtype, iteration), dtype), block))
            for r in range(world)
        ],
        axis=0,
    )
    assert not np.any(exps == EXP_NONFINITE), "make_input never makes a non-finite block"
    per_chunk = np.array([q.error_bound(int(e), world, bits) for e in exps])
    return np.repeat(per_chunk, block)[:elements]


def check(
    result: np.ndarray, world: int, elements: int, dtype: str, iteration: int = 0, *, k: int, bits: int = 32
) -> tuple[bool, float, float]:
    """(ok, max error, max bound) of one result; `k` is the job's values per packet and `bits` the call's
    wire width (together, its block size)."""
    want = expected_sum(world, elements, dtype, iteration)
    if dtype == "int32":
        return bool(np.array_equal(result, want)), 0.0, 0.0
    error = np.abs(as_float64(result, dtype) - want)
    bound = float_bound(world, elements, dtype, k, iteration, bits)
    # The sum is rounded once more to the input's dtype on the way out: half an ulp (bfloat16: through
    # float32, whose rounding adds its own half ulp).
    eps, subnormal = _float_info(dtype)
    bound = bound + np.abs(want) * (eps / 2 + (2.0**-24 if dtype == "bfloat16" else 0.0)) + subnormal
    return bool(np.all(error <= bound)), float(error.max(initial=0.0)), float(bound.max(initial=0.0))


def check_float_sum(
    result: np.ndarray,
    world: int,
    elements: int,
    dtype: str,
    iteration: int = 0,
    *,
    k: int = 0,
    bits: int = 32,
) -> tuple[bool, float, float]:
    """(ok, max error, max bound) of a baseline's sum computed in the input's own float type.

    A sum of N terms rounded at every step, in any order (a ring's), is off
    by at most (N-1)·eps·Σ|x| per element; with cancellation that exceeds
    what `check` allows for p4reduce, whose fixed-point sum is exact. (`k` and
    `bits` are accepted for `check`'s signature and unused.)
    """
    inputs = [as_float64(make_input(rank, elements, dtype, iteration), dtype) for rank in range(world)]
    want = np.sum(inputs, axis=0)
    eps, subnormal = _float_info(dtype)
    bound = (world - 1) * eps * np.sum(np.abs(inputs), axis=0) + subnormal
    error = np.abs(as_float64(result, dtype) - want)
    return bool(np.all(error <= bound)), float(error.max(initial=0.0)), float(bound.max(initial=0.0))


def run_worker(
    controller: str,
    job: str,
    rank: int,
    world: int,
    elements: int,
    dtypes: tuple[str, ...],
    iterations: int = 1,
) -> list[WorkerReport]:
    """One worker process: join, all-reduce each dtype `iterations` times, verify every result."""
    from hostlib.communicator import Communicator  # imported in the child process

    reports = []
    with Communicator.join(controller, job, rank, world, address=(f"127.0.0.{2 + rank}", 0)) as comm:
        for dtype in dtypes:
            for iteration in range(iterations):
                data = make_input(rank, elements, dtype, iteration)
                # Ranks verify the previous result in different times: an untimed one-element all-reduce
                # first, whose result the switch sends every rank at once, starts the timed call level
                # (as p4reduce-bench's timed calls start), so a rank's time is the call's, not the skew.
                comm.allreduce(RELEASE)
                before = comm.stats().retransmissions
                started = time.perf_counter()
                try:
                    result = comm.allreduce(data)
                except Exception as error:  # reported per worker, never hidden
                    reports.append(
                        WorkerReport(
                            rank,
                            dtype,
                            elements,
                            0.0,
                            0.0,
                            0,
                            False,
                            False,
                            0.0,
                            0.0,
                            f"{type(error).__name__}: {error}",
                        )
                    )
                    continue
                seconds = time.perf_counter() - started
                ok, max_error, bound = check(
                    result, world, elements, dtype, iteration, k=comm.job.values_per_packet
                )
                reports.append(
                    WorkerReport(
                        rank,
                        dtype,
                        elements,
                        seconds,
                        data.nbytes / seconds,
                        comm.stats().retransmissions - before,
                        ok,
                        dtype == "int32",
                        max_error,
                        bound,
                    )
                )
    return reports
