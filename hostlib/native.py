"""The runtime's packet engine: the protocol in C (hostlib/csrc/), a whole call per `run`.

`hostlib._native` is built by `make install` (setup.py: `pip install -e .` compiles it in place
with the system compiler). It implements hostlib.engine.Engine's state machine with the same
step methods and the same semantics, and adds `run`, which carries out one call over a
connected UDP socket entirely in C with the GIL released: recvmmsg/sendmmsg batches, ppoll on
the socket and an eventfd (so `fail` from another thread ends the call at once),
CLOCK_MONOTONIC, and the plans quantizing straight from the caller's input into each DATA and
dequantizing each RESULT straight into the caller's output. So `allreduce_async` and the DDP
hook truly run alongside Python (backward, the optimizer).

The Python Engine remains the executable specification; tests/hostlib/test_native_engine.py
feeds both the same traces and compares every packet, counter and result bit.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import socket
import threading
import time
from types import ModuleType

import numpy as np

from contracts.protocol import ECN_ECT0, ECN_MASK
from hostlib import quantize as q
from hostlib.calls import AllreduceAborted, AllreduceError, AllreduceTimeout, Descriptor, DType, NonFinite, Op
from hostlib.engine import (
    EngineStats,
    Membership,
    abandoned_error,
    mismatch_error,
    stall_message,
    stopped_message,
)
from hostlib.lanes import request_lane
from hostlib.reduction import error_bounds, nonfinite_error

BUILD_HINT = (
    "hostlib's native engine (hostlib._native) is not built: run `make install` in the checkout "
    "(it needs the Debian packages build-essential and python3-dev)"
)


def _load() -> ModuleType:
    """hostlib._native as built in place, or the build P4REDUCE_NATIVE_LIBRARY names (make asan's)."""
    library = os.environ.get("P4REDUCE_NATIVE_LIBRARY")
    try:
        if not library:
            return importlib.import_module("hostlib._native")
        loader = importlib.machinery.ExtensionFileLoader("hostlib._native", library)
        spec = importlib.util.spec_from_file_location("hostlib._native", library, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except ImportError:
        raise ImportError(BUILD_HINT) from None


_native = _load()

_CODES = {
    np.dtype(np.int32): _native.INT32,
    np.dtype(np.float32): _native.FLOAT32,
    np.dtype(np.float16): _native.FLOAT16,
    np.dtype(np.float64): _native.FLOAT64,
    np.dtype(np.uint16): _native.BFLOAT16,  # bfloat16 bit patterns: numpy has no bfloat16
}


class NativePlan(_native.Plan):
    """One call's input, its output buffer and what each use carries (hostlib.reduction's plans, in C).

    The output is written as results arrive: after an error its content is unspecified.
    """

    def __init__(
        self, flat: np.ndarray | None, out: np.ndarray | None, descriptor: Descriptor, k: int, world_size: int
    ) -> None:
        if descriptor.dtype == DType.REFUSED or flat is None:
            kind, source, source_code = _native.PLAN_REFUSED, None, _native.NONE
        else:
            kind = _native.PLAN_INT if flat.dtype == np.int32 else _native.PLAN_FLOAT
            source, source_code = flat, _CODES[flat.dtype]
        target_code = _native.NONE if out is None else _CODES[out.dtype]
        super().__init__(
            kind, source, source_code, out, target_code, k, world_size,
            descriptor.op == Op.AVG, descriptor.nonfinite == NonFinite.RAISE, descriptor.bits,
        )  # fmt: skip
        self.out, self.k, self.world_size, self.op = out, k, world_size, descriptor.op
        self.bits = descriptor.bits if kind == _native.PLAN_FLOAT else 32
        self.block = k * q.lanes(self.bits)  # elements per chunk
        self.nonfinite = descriptor.nonfinite

    def result(self) -> np.ndarray:
        """The output buffer, complete; raises NonFiniteError in nonfinite='raise' mode."""
        blocks, first = self.nonfinite_blocks()
        if blocks and self.nonfinite == NonFinite.RAISE:
            raise nonfinite_error(blocks, first, self.block, self.size)
        return self.out if self.out is not None else np.zeros(0, dtype=np.int32)

    def error_bound(self) -> np.ndarray:
        agreed = np.frombuffer(self.agreed(), dtype=np.uint8)
        return error_bounds(agreed, self.world_size, self.op, self.block, self.size, self.bits)


def native_plan(
    flat: np.ndarray, out: np.ndarray | None, descriptor: Descriptor, k: int, world_size: int
) -> NativePlan:
    """The plan for one call: int32 exact, float32/float16/bfloat16 (uint16 bit patterns) through block
    floating point at the descriptor's wire width. `flat` and `out` are C-contiguous; `out` has flat's
    size, and its dtype (float64 too, for floats)."""
    return NativePlan(flat, out, descriptor, k, world_size)


def refused_plan(k: int, world_size: int) -> NativePlan:
    """One use of zeros with a refused descriptor (hostlib.reduction.RefusedPlan)."""
    return NativePlan(None, None, Descriptor(DType.REFUSED, Op.SUM, NonFinite.PROPAGATE, 0), k, world_size)


class NativeEngine:
    """The native engine behind hostlib.engine.Engine's interface, plus `run` over a socket."""

    def __init__(
        self, member: Membership, progress_timeout: float = 10.0, congestion_control: bool = True
    ) -> None:
        self.member = member
        self.congestion_control = congestion_control
        self._core = _native.Engine(
            member.job_id, member.rank, member.key, member.world_size, member.pool_size,
            member.values_per_packet, progress_timeout, congestion_control,
        )  # fmt: skip
        self._stats = EngineStats()
        self._samples = 0  # round-trip samples copied into _stats so far
        self._stats_lock = threading.Lock()  # the caller's thread and the call's may both read stats
        self._broken: str | None = None
        self._failure: AllreduceError | None = None  # what fail() gave for the call in flight

    # ------------------------------------------------------------------ state
    @property
    def progress_timeout(self) -> float:
        return self._core.progress_timeout

    @progress_timeout.setter
    def progress_timeout(self, seconds: float) -> None:
        self._core.progress_timeout = seconds

    @property
    def rto(self) -> float:
        return self._core.rto

    @rto.setter
    def rto(self, seconds: float) -> None:
        self._core.rto = seconds

    @property
    def call_number(self) -> int:
        return self._core.call_number

    @property
    def half(self) -> int:
        return self._core.half

    @property
    def done(self) -> bool:
        return self._core.done

    @property
    def stats(self) -> EngineStats:
        """The counters so far (live while a call runs on another thread); tensor_bytes is the caller's."""
        with self._stats_lock:
            vars(self._stats).update(self._core.counters())
            fresh = self._core.rtt_samples(self._samples)
            self._samples += len(fresh)
            self._stats.rtt_samples.extend(fresh)
        return self._stats

    # ------------------------------------------------------------------ steps (as Engine)
    def begin(self, plan: NativePlan, descriptor: int, now: float) -> list[bytes]:
        self._check_can_begin()
        return self._core.begin(plan, descriptor, now)

    def receive(self, datagram: bytes | bytearray | memoryview, now: float, tos: int = 0) -> list[bytes]:
        return self._core.receive(datagram, now, tos)

    def poll(self, now: float) -> list[bytes]:
        return self._core.poll(now)

    def next_deadline(self) -> float:
        return self._core.next_deadline()

    def fail(self, error: AllreduceError) -> None:
        """Fail the call in flight and every later call with `error` (see Engine.fail). Safe from any
        thread: a call running in `run` ends at once."""
        self._broken = str(error)
        if self._failure is None and self._core.active:
            self._failure = error
        self._core.fail(isinstance(error, AllreduceAborted))

    def finish(self, now: float) -> None:
        outcome = self._core.finish(now)
        failure, self._failure = self._failure, None
        if outcome is None:
            return
        error = self._error(outcome, failure)
        if isinstance(error, AllreduceTimeout):
            self._broken = stopped_message(outcome["number"])
        raise error

    def _sample_rtt(self, rtt: float) -> None:
        self._core.sample_rtt(rtt)

    def attach_lane(self, memfd: int, lease: int) -> None:
        """Carry `run`'s datagrams through the switch's lane in `memfd` (lanes.h), granted on the connection
        `lease`, which must stay open until `detach_lane` (its hang-up lets the lane go)."""
        self._core.attach_lane(memfd, lease)

    def transport_counters(self) -> dict[str, int]:
        """Datagrams `run` carried so far, by way: lane_sent, lane_received, udp_sent, udp_received (a GRO
        buffer counts once; the switch's doorbells not at all)."""
        return dict(self._core.transport_counters())

    def detach_lane(self) -> None:
        """Let the lane go (before its lease is closed): UDP alone from now on."""
        self._core.detach_lane()

    @property
    def lane_attached(self) -> bool:
        """Whether `run` uses a lane (it lets one go whose ring it finds corrupt, and goes on over UDP)."""
        return bool(self._core.lane_attached())

    # ------------------------------------------------------------------ a whole call
    def run(self, plan: NativePlan, descriptor: int, sock: socket.socket) -> None:
        """Carry out one call over `sock` (connected to the switch) in C, without the GIL; returns when
        every result arrived, or raises the call's error."""
        self._check_can_begin()
        try:
            self._core.run(plan, descriptor, sock.fileno())
        finally:
            self.finish(time.perf_counter())

    def _check_can_begin(self) -> None:
        if self._core.active:
            raise RuntimeError("a call is already in flight")
        if self._broken is not None:
            raise AllreduceError(self._broken)
        self._failure = None

    def _error(self, outcome: dict[str, int | float], failure: AllreduceError | None) -> BaseException:
        kind, number = outcome["kind"], int(outcome["number"])
        if kind == _native.ERR_MISMATCH:
            return mismatch_error(
                number, self.member, int(outcome["descriptor"]), int(outcome["rank"]),
                int(outcome["offender"]), int(outcome["held"]),
            )  # fmt: skip
        if kind == _native.ERR_ABANDONED:
            return abandoned_error(number, self.member.job_id, int(outcome["held"]))
        if kind == _native.ERR_TIMEOUT:
            return AllreduceTimeout(
                stall_message(
                    float(outcome["idle"]),
                    int(outcome["outstanding"]),
                    int(outcome["uses"]),
                    number,
                    self.member,
                    int(outcome["retransmissions"]),
                    int(outcome["refused"]),
                )  # fmt: skip
            )
        if kind == _native.ERR_EXTERNAL:
            return failure if failure is not None else AllreduceError(self._broken or "the call was failed")
        return MemoryError(f"the native engine ran out of memory in call #{number}")


# The environment's switch for congestion control (docs/protocol.md, *Congestion*): "0" turns it off.
CONGESTION_CONTROL_VARIABLE = "P4REDUCE_CONGESTION_CONTROL"


def congestion_control_default() -> bool:
    """On unless $P4REDUCE_CONGESTION_CONTROL is 0 (or false/off/no)."""
    value = os.environ.get(CONGESTION_CONTROL_VARIABLE, "1").strip().lower()
    return value not in ("0", "false", "off", "no")


def use_ecn(sock: socket.socket, congestion_control: bool) -> None:
    """Send with ECT(0) while congestion control is on, Not-ECT when off (the DSCP kept), and ask the kernel
    for each received datagram's DSCP/ECN byte: the C receive path reads it from the ancillary data."""
    dscp = sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) & ~ECN_MASK
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp | (ECN_ECT0 if congestion_control else 0))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)


def receive_with_tos(sock: socket.socket, size: int) -> tuple[bytes, int, tuple[str, int]]:
    """One datagram, the DSCP/ECN byte it arrived with (0 when the kernel did not say: IP_RECVTOS off) and
    its sender. Each control message is checked for its level, type and length before its byte is read."""
    data, ancillary, _flags, sender = sock.recvmsg(size, socket.CMSG_SPACE(4))
    tos = 0
    for level, kind, payload in ancillary:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS and len(payload) >= 1:
            tos = payload[0]
    return data, tos, sender


class PacketEngine:
    """Runs calls natively over one UDP socket connected to the switch's aggregation address."""

    def __init__(
        self,
        sock: socket.socket,
        switch_address: tuple[str, int],
        member: Membership,
        progress_timeout: float = 10.0,
        congestion_control: bool = True,
    ) -> None:
        self.sock = sock
        self.switch = switch_address
        # Connected: the kernel then delivers only the switch's datagrams, and reports ICMP port
        # unreachable (no switch listening) as ECONNREFUSED instead of dropping it silently.
        # The TOS first: setting it drops the route the socket cached at connect, and a socket without one
        # cannot tell its path MTU (IP_MTU: ENOTCONN), which the communicator checks next.
        use_ecn(sock, congestion_control)
        sock.connect(switch_address)
        self.engine = NativeEngine(member, progress_timeout, congestion_control)
        self._lane = request_lane(sock, switch_address, self.engine)

    @property
    def lane_attached(self) -> bool:
        """Whether this rank's datagrams go through a shared-memory lane to the switch (hostlib/lanes.py)."""
        return self._lane is not None and self.engine.lane_attached

    def transport_counters(self) -> dict[str, int]:
        """Datagrams carried so far, by way (NativeEngine.transport_counters)."""
        return self.engine.transport_counters()

    def close(self) -> None:
        """Give the lane back (the switch frees it when this connection closes); not the socket."""
        if self._lane is not None:
            self.engine.detach_lane()
            self._lane.close()
            self._lane = None

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    def fail(self, error: AllreduceError) -> None:
        """Fail the call in flight (at once) and every later one; see Engine.fail."""
        self.engine.fail(error)

    def run(self, plan: NativePlan, descriptor: int) -> None:
        """Carry out one call; returns when every result arrived, or raises the call's error."""
        self.engine.run(plan, descriptor, self.sock)
