"""Worker-side verification shared by the demo, the benchmark and the lab.

Every rank can generate every rank's input (seeded by rank), so each worker
checks its own result against numpy's sum without any extra communication:
int32 must be exact; float32 must lie within the quantization bound of
docs/protocol.md, computed from the exponents the switch must have agreed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from contracts.protocol import EXP_NONFINITE
from hostlib import quantize as q

RELEASE = np.zeros(1, dtype=np.int32)  # the untimed all-reduce that starts a timed call on every rank


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
    return (rng.standard_normal(elements) * magnitudes).astype(dtype)


def expected_sum(world: int, elements: int, dtype: str, iteration: int = 0) -> np.ndarray:
    inputs = [make_input(rank, elements, dtype, iteration) for rank in range(world)]
    if dtype == "int32":
        return np.sum(inputs, axis=0, dtype=np.int64).astype(np.int64).astype(np.int32)
    return np.sum([x.astype(np.float64) for x in inputs], axis=0)


def float_bound(world: int, elements: int, dtype: str, k: int, iteration: int = 0) -> np.ndarray:
    """Per element, N/(2S) with S from the maximum wire exponent of its chunk of K over all ranks."""
    exps = np.max(
        [
            q.wire_exponents(q.as_chunks(make_input(r, elements, dtype, iteration).astype(np.float32), k))
            for r in range(world)
        ],
        axis=0,
    )
    assert not np.any(exps == EXP_NONFINITE), "make_input never makes a non-finite block"
    per_chunk = np.array([q.error_bound(int(e), world) for e in exps])
    return np.repeat(per_chunk, k)[:elements]


def check(
    result: np.ndarray, world: int, elements: int, dtype: str, iteration: int = 0, *, k: int
) -> tuple[bool, float, float]:
    """(ok, max error, max bound) of one result; `k` is the job's values per packet (its block size)."""
    want = expected_sum(world, elements, dtype, iteration)
    if dtype == "int32":
        return bool(np.array_equal(result, want)), 0.0, 0.0
    error = np.abs(result.astype(np.float64) - want)
    bound = float_bound(world, elements, dtype, k, iteration)
    # The sum is rounded once more to the input's dtype on the way out: half an ulp.
    bound = bound + np.abs(want) * float(np.finfo(dtype).eps) / 2 + float(np.finfo(dtype).smallest_subnormal)
    return bool(np.all(error <= bound)), float(error.max(initial=0.0)), float(bound.max(initial=0.0))


def check_float_sum(
    result: np.ndarray, world: int, elements: int, dtype: str, iteration: int = 0, *, k: int = 0
) -> tuple[bool, float, float]:
    """(ok, max error, max bound) of a baseline's sum computed in the input's own float type.

    A sum of N terms rounded at every step, in any order (a ring's), is off
    by at most (N-1)·eps·Σ|x| per element; with cancellation that exceeds
    what `check` allows for p4reduce, whose fixed-point sum is exact. (`k` is
    accepted for `check`'s signature and unused.)
    """
    inputs = [make_input(rank, elements, dtype, iteration).astype(np.float64) for rank in range(world)]
    want = np.sum(inputs, axis=0)
    eps = float(np.finfo(dtype).eps)
    bound = (world - 1) * eps * np.sum(np.abs(inputs), axis=0) + float(np.finfo(dtype).smallest_subnormal)
    error = np.abs(result.astype(np.float64) - want)
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
