"""The executable specification and the native engine in lockstep: every output compared as it happens.

`Twin` has the Engine interface. Each step (begin, receive, poll, next_deadline, finish, fail) runs
on hostlib.engine.Engine and on hostlib.native.NativeEngine with the same arguments, and asserts
that both returned the same packets, byte for byte, in the same order (or raised the same error
with the same message), that `done`, call number, half and the timer agree, and that every
counter agrees after every step. `TwinPlan` pairs a reduction plan with a native plan over the
same input and compares the results bit for bit (the specification's float64 sums against the
native plan's float64 output; int32 against int32; NaN payloads included).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from hostlib.calls import AllreduceError, Descriptor
from hostlib.engine import Engine, EngineStats, Membership
from hostlib.native import NativeEngine, NativePlan, native_plan
from hostlib.reduction import Plan, plan_for

T = TypeVar("T")


def native_output(flat: np.ndarray) -> np.ndarray:
    """Where a native plan in a test writes: int32 for ints, float64 (the specification's sums) for floats."""
    return np.empty(flat.size, dtype=np.int32 if flat.dtype == np.int32 else np.float64)


class TwinPlan:
    """The same call as a reduction plan (the specification) and as a native plan."""

    def __init__(self, flat: np.ndarray, descriptor: Descriptor, k: int, world_size: int) -> None:
        self.spec: Plan = plan_for(flat, descriptor, k, world_size)
        self.native: NativePlan = native_plan(flat, native_output(flat), descriptor, k, world_size)

    def result(self) -> np.ndarray:
        spec, native = _outcome(self.spec.result), _outcome(self.native.result)
        if isinstance(spec, BaseException) or isinstance(native, BaseException):
            assert _describe(spec) == _describe(native), (spec, native)
            raise spec  # type: ignore[misc]
        assert spec.dtype == native.dtype and spec.shape == native.shape, (spec.dtype, native.dtype)
        assert spec.tobytes() == native.tobytes(), "results differ: " + _first_difference(spec, native)
        return native

    def error_bound(self) -> np.ndarray:
        spec, native = self.spec.error_bound(), self.native.error_bound()  # type: ignore[union-attr]
        assert np.array_equal(spec, native)
        return native


class Twin:
    """Engine and NativeEngine fed the same inputs; see the module's docstring."""

    def __init__(
        self, member: Membership, progress_timeout: float = 10.0, congestion_control: bool = True
    ) -> None:
        self.member = member
        self.spec = Engine(member, progress_timeout, congestion_control)
        self.native = NativeEngine(member, progress_timeout, congestion_control)
        self.steps = 0

    # ------------------------------------------------------------------ steps
    def begin(self, plan: TwinPlan, descriptor: int, now: float) -> list[bytes]:
        return self._both("begin", lambda e, p: e.begin(p, descriptor, now), plan)

    def receive(self, datagram: bytes, now: float, tos: int = 0) -> list[bytes]:
        return self._both("receive", lambda e, _: e.receive(datagram, now, tos))

    def poll(self, now: float) -> list[bytes]:
        return self._both("poll", lambda e, _: e.poll(now))

    def next_deadline(self) -> float:
        return self._both("next_deadline", lambda e, _: e.next_deadline())

    def finish(self, now: float) -> None:
        self._both("finish", lambda e, _: e.finish(now))
        spec, native = self.spec.stats, self.native.stats
        assert spec.rtt_samples == native.rtt_samples, "round-trip samples differ"

    def fail(self, error: AllreduceError) -> None:
        self._both("fail", lambda e, _: e.fail(error))

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        assert self.spec.done == self.native.done, f"done differs after step {self.steps}"
        return self.native.done

    @property
    def call_number(self) -> int:
        return self.native.call_number

    @property
    def half(self) -> int:
        return self.native.half

    @property
    def stats(self) -> EngineStats:
        return self.native.stats

    @property
    def rto(self) -> float:
        assert self.spec.rto == self.native.rto
        return self.native.rto

    @rto.setter
    def rto(self, seconds: float) -> None:
        self.spec.rto = self.native.rto = seconds

    def _sample_rtt(self, rtt: float) -> None:
        self._both("sample_rtt", lambda e, _: e._sample_rtt(rtt))

    def _both(
        self, step: str, call: Callable[[Engine | NativeEngine, object], T], plan: TwinPlan | None = None
    ) -> T:
        self.steps += 1
        spec = _outcome(lambda: call(self.spec, plan.spec if plan else None))
        native = _outcome(lambda: call(self.native, plan.native if plan else None))
        where = f"{step} (step {self.steps}, rank {self.member.rank})"
        assert _describe(spec) == _describe(native), f"{where}: {spec!r} != {native!r}"
        assert (self.spec.call_number, self.spec.half) == (self.native.call_number, self.native.half), where
        assert self.spec.done == self.native.done, where
        assert self.spec.rto == self.native.rto, f"{where}: rto {self.spec.rto} != {self.native.rto}"
        _same_counters(self.spec.stats, self.native.stats, where)
        if isinstance(native, BaseException):
            raise native
        return native  # type: ignore[return-value]


def _outcome(call: Callable[[], T]) -> T | BaseException:
    try:
        return call()
    except (AllreduceError, ValueError, RuntimeError, TypeError) as error:
        return error


def _describe(outcome: object) -> object:
    """What must be equal: the value itself, or the error's class and message."""
    if isinstance(outcome, BaseException):
        return (type(outcome).__name__, str(outcome))
    return outcome


_COUNTERS = tuple(
    item.name for item in dataclasses.fields(EngineStats) if item.name not in ("rtt_samples", "tensor_bytes")
)
_read_counters = operator.attrgetter(*_COUNTERS)  # every counter at once: the twin compares after every step


def _same_counters(spec: EngineStats, native: EngineStats, where: str) -> None:
    ours, theirs = _read_counters(spec), _read_counters(native)
    assert ours == theirs, (
        where + ": " + next(f"{name} {a} != {b}" for name, a, b in zip(_COUNTERS, ours, theirs) if a != b)
    )
    assert len(spec.rtt_samples) == len(native.rtt_samples), f"{where}: round-trip samples"


def _first_difference(spec: np.ndarray, native: np.ndarray) -> str:
    a, b = spec.view(np.uint8).reshape(spec.size, -1), native.view(np.uint8).reshape(native.size, -1)
    index = int(np.flatnonzero((a != b).any(axis=1))[0])
    return f"element {index}: {spec[index]!r} vs {native[index]!r}"
