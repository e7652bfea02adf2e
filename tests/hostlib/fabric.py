"""N host engines and the real P4 program in one process, on a virtual clock, with scripted faults.

No sockets and no threads: every packet is an event at a virtual time, so a
run is a pure function of its inputs and its fault script, and a test can
say exactly which packet is lost, duplicated, delayed or reordered. The
switch is p4src/v1model/p4reduce.p4 itself, compiled by the embedded
switch's front end and run by its Python backend, with the controller's
entries written through P4Info names (the scenario table's job layout).
The hosts are `engine="spec"`: hostlib.engine.Engine, the executable
specification; `"native"`: hostlib.native.NativeEngine, the runtime's
engine, stepped the same way; or `"twin"`: both in lockstep, every packet,
counter and result compared as it happens (tests/hostlib/twin.py).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contracts.protocol import ECN_CE, ECN_ECT0, ECN_MASK, ECN_NOT_ECT, UDP_PORT, MsgType
from hostlib.calls import AllreduceError, Descriptor, DType, NonFinite, Op
from hostlib.engine import Engine, Membership
from hostlib.native import NativeEngine, native_plan
from hostlib.reduction import plan_for
from softswitch.backends.python.executor import Pipeline
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from tests.executor.pipeline_driver import PipelineDriver
from tests.hostlib.twin import Twin, TwinPlan, native_output
from tests.protocol_scenarios import (
    HOSTS,
    SWITCH_IP,
    SWITCH_MAC,
    Host,
    Job,
    install,
    ip_int,
    job_install,
    standard_setup,
)

ROOT = Path(__file__).resolve().parents[2]
LINK_DELAY = 50e-6  # one way, host <-> switch
FRAME_OVERHEAD = 42  # Ethernet, IPv4 and UDP headers around a datagram on a limited link


@functools.cache
def compiled(k: int = 64) -> tuple[object, object]:
    defines = {"VALUES_PER_PACKET": str(k)}
    program = compile_file(ROOT / "p4src/v1model/p4reduce.p4", include_dirs=[ROOT / "p4src"], defines=defines)
    return program, build_p4info(program)


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return 0xFFFF - total


def frame(host: Host, payload: bytes, tos: int = 0) -> bytes:
    """A worker's datagram to the switch's aggregation address, as its NIC would put it on the wire."""
    udp = struct.pack("!HHHH", host.udp_port, UDP_PORT, 8 + len(payload), 0)
    source, destination = ip_int(host.ip).to_bytes(4, "big"), ip_int(SWITCH_IP).to_bytes(4, "big")
    ip = bytearray(
        struct.pack("!BBHHHBBH4s4s", 0x45, tos, 28 + len(payload), 0, 0x4000, 64, 17, 0, source, destination)
    )
    struct.pack_into("!H", ip, 10, _checksum(bytes(ip)))
    ether = (
        bytes.fromhex(SWITCH_MAC.replace(":", "")) + bytes.fromhex(host.mac.replace(":", "")) + b"\x08\x00"
    )
    return ether + bytes(ip) + udp + payload


def datagram(frame_bytes: bytes) -> tuple[int, bytes]:
    """(destination UDP port, UDP payload) of a frame the switch sent."""
    udp_len = struct.unpack_from("!H", frame_bytes, 38)[0]
    return struct.unpack_from("!H", frame_bytes, 36)[0], frame_bytes[42 : 34 + udp_len]


@dataclass(frozen=True)
class Packet:
    """A packet in flight: which way, whose, and which of that rank's transmissions it is (0, 1, ...)."""

    upstream: bool  # worker -> switch
    rank: int
    number: int  # per (direction, rank), in sending order
    payload: bytes

    @property
    def msg_type(self) -> int:
        return self.payload[0]

    @property
    def seq(self) -> int:
        return int.from_bytes(self.payload[8:12], "big")


ENGINES = ("spec", "native", "twin")


def make_engine(
    kind: str, member: Membership, progress_timeout: float = 10.0, congestion_control: bool = False
) -> Engine | NativeEngine | Twin:
    """One rank's engine of the given kind (see the module's docstring)."""
    engines = {"spec": Engine, "native": NativeEngine, "twin": Twin}
    if kind not in engines:
        raise ValueError(f"engine kind {kind!r} is not one of {', '.join(engines)}")
    return engines[kind](member, progress_timeout, congestion_control)


def make_plan(kind: str, flat: np.ndarray, descriptor: Descriptor, k: int, world: int):  # type: ignore[no-untyped-def]
    """A call's plan for an engine of the given kind."""
    if kind == "spec":
        return plan_for(flat, descriptor, k, world)
    if kind == "native":
        return native_plan(flat, native_output(flat), descriptor, k, world)
    return TwinPlan(flat, descriptor, k, world)


def plans_for(
    kind: str, k: int, world: int, inputs: Sequence[np.ndarray], **options: object
) -> list[tuple[Any, int]]:
    """One call's (plan, descriptor) per rank, from each rank's input array (`op=`, `nonfinite=`, `bits=`;
    uint16 arrays are bfloat16 bit patterns)."""
    out = []
    for array in inputs:
        dtype = {
            np.dtype(np.int32): DType.INT32,
            np.dtype(np.float32): DType.FLOAT32,
            np.dtype(np.float16): DType.FLOAT16,
            np.dtype(np.uint16): DType.BFLOAT16,
        }[array.dtype]
        descriptor = Descriptor(
            dtype,
            options.get("op", Op.SUM),  # type: ignore[arg-type]
            options.get("nonfinite", NonFinite.PROPAGATE),  # type: ignore[arg-type]
            array.size,
            options.get("bits", 32),  # type: ignore[arg-type]
        )
        out.append((make_plan(kind, array, descriptor, k, world), descriptor.encode()))
    return out


# A fault decides what happens to one packet: a list of extra delays, one per copy delivered
# ([] drops it, [0.0] delivers it normally, [0.0, 0.004] duplicates it with the copy 4 ms late).
Fault = Callable[[Packet], list[float]]


def no_faults(packet: Packet) -> list[float]:
    return [0.0]


def random_faults(seed: int, *, drop: float = 0.0, duplicate: float = 0.0, delay: float = 0.0,
                  delay_range: tuple[float, float] = (0.002, 0.05)) -> Fault:  # fmt: skip
    """Independent per packet, both directions: loss, duplication (the copy delayed), delay."""
    rng = random.Random(seed)

    def fault(packet: Packet) -> list[float]:
        if rng.random() < drop:
            return []
        first = rng.uniform(*delay_range) if rng.random() < delay else 0.0
        if rng.random() < duplicate:
            return [first, first + rng.uniform(*delay_range)]
        return [first]

    return fault


def losing_once(*losses: tuple[bool, int, int, int]) -> Fault:
    """A fault script: the first packet of each (upstream, rank, msg_type, seq) is lost, once per time
    the key is given."""
    pending = list(losses)

    def fault(packet: Packet) -> list[float]:
        key = (packet.upstream, packet.rank, packet.msg_type, packet.seq)
        if key in pending:
            pending.remove(key)
            return []
        return [0.0]

    return fault


class VirtualClock:
    """Engines driven on a virtual clock: a heap of events `(time, order, *event)` that `_deliver(*event)`
    handles, and each rank's packets handed to `_from_rank`. Fabric (one switch) and TreeFabric (a tree
    of them) are this loop with their own topology."""

    engines: list[Any]
    engine: str
    k: int
    world: int
    now: float
    _events: list[tuple[Any, ...]]

    def _from_rank(self, rank: int, packet: bytes) -> None:
        raise NotImplementedError

    def _deliver(self, *event: Any) -> None:
        raise NotImplementedError

    def plans(self, inputs: Sequence[np.ndarray], **options: object) -> list[tuple[Any, int]]:
        return plans_for(self.engine, self.k, self.world, inputs, **options)

    def run(
        self, calls: Sequence[tuple[Any, int] | None], *, limit: float = 60.0
    ) -> list[np.ndarray | AllreduceError]:
        """Every rank with a plan begins its call now; events run until each is done (None: sits out)."""
        active = [rank for rank, call in enumerate(calls) if call is not None]
        for rank in active:
            plan, descriptor = calls[rank]  # type: ignore[misc]
            for packet in self.engines[rank].begin(plan, descriptor, self.now):
                self._from_rank(rank, packet)
        end = self.now + limit
        while any(not self.engines[r].done for r in active):
            deadline = min(self.engines[r].next_deadline() for r in active if not self.engines[r].done)
            event_time = self._events[0][0] if self._events else float("inf")
            self.now = min(deadline, event_time)
            if self.now > end:
                raise AssertionError(f"the fabric ran past {limit} s of virtual time")
            if event_time <= deadline:
                self._deliver(*heapq.heappop(self._events)[2:])
            for rank in active:
                for packet in self.engines[rank].poll(self.now):
                    self._from_rank(rank, packet)
        results: list[np.ndarray | AllreduceError] = []
        for rank in active:
            try:
                self.engines[rank].finish(self.now)
                results.append(calls[rank][0].result())  # type: ignore[index]
            except AllreduceError as error:
                results.append(error)
        return results

    def drain(self, seconds: float) -> None:
        """Let packets still in flight arrive (answers to calls that are over are ignored or remembered)."""
        end = self.now + seconds
        while self._events and self._events[0][0] <= end:
            event = heapq.heappop(self._events)
            self.now = event[0]
            self._deliver(*event[2:])
        self.now = end


@dataclass
class Fabric(VirtualClock):
    """`world` ranks of one job on hosts H1..; `run` drives one call on every rank to its end."""

    world: int
    pool: int = 8
    k: int = 64
    fault: Fault = no_faults
    progress_timeout: float = 10.0
    switch_time: float = 0.0  # seconds the switch spends per DATA, one at a time (0: infinitely fast)
    query_time: float = 0.0  # seconds it spends per QUERY (no values to add: a fraction of a DATA's)
    link_rate: float = 0.0  # bytes per second of every link, each way (0: no limit, no queue)
    link_queue: int = 100  # frames a limited link holds waiting; more are dropped, as by a full qdisc
    engine: str = "spec"
    # Congestion control (docs/protocol.md, *Congestion*): off by default, so that the loss tests see the
    # recovery rules alone. On, ranks send ECT(0), and `mark` says which packets a link marks CE.
    congestion_control: bool = False
    mark: Callable[[Packet], bool] = lambda packet: False
    keys: tuple[int, ...] = ()
    now: float = 0.0
    log: list[tuple[float, Packet, int]] = field(default_factory=list)  # (time, packet, copies delivered)

    def __post_init__(self) -> None:
        if not 1 <= self.world <= len(HOSTS):
            raise ValueError(f"the fabric has {len(HOSTS)} hosts")
        program, info = compiled(self.k)
        self.pipeline = Pipeline(program, info)
        self.driver = PipelineDriver(self.pipeline, info)
        self.keys = self.keys or tuple(0x1000_0001 * (r + 1) for r in range(self.world))
        self.job = Job(
            job_id=21, base=500, pool_size=self.pool, mcast_grp=30, workers=HOSTS[: self.world],
            epoch=0x5EED0021, keys=self.keys,
        )  # fmt: skip
        for step in (standard_setup()[0], job_install(self.job)):
            install(self.driver, step)
        self.engines = [
            make_engine(
                self.engine,
                Membership(self.job.job_id, r, self.keys[r], self.world, self.pool, self.k),
                self.progress_timeout,
                self.congestion_control,
            )
            for r in range(self.world)
        ]
        self._events: list[tuple[float, int, str, int, bytes, int]] = []
        self._order = itertools.count()
        self._numbers: dict[tuple[bool, int], itertools.count[int]] = {}
        self._port_rank = {h.port: r for r, h in enumerate(self.job.workers)}
        self._switch_free = 0.0
        self._links: dict[tuple[bool, int], deque[float]] = {}  # departure times of the frames queued

    # ------------------------------------------------------------------ events
    def _transmit(self, upstream: bool, rank: int, payload: bytes, tos: int | None = None) -> None:
        """`tos`: the DSCP/ECN byte (None: what the rank's socket sends), CE if `mark` says so."""
        number = next(self._numbers.setdefault((upstream, rank), itertools.count()))
        packet = Packet(upstream, rank, number, payload)
        if tos is None:
            tos = ECN_ECT0 if self.congestion_control else ECN_NOT_ECT
        if tos & ECN_MASK and self.mark(packet):
            tos |= ECN_CE
        delays = self.fault(packet)
        departure = self._serialize(upstream, rank, len(payload)) if delays else self.now
        if departure is None:
            delays = []
        self.log.append((self.now, packet, len(delays)))
        for extra in delays:
            heapq.heappush(
                self._events,
                (
                    departure + LINK_DELAY + extra,
                    next(self._order),
                    "arrive" if upstream else "host",
                    rank,
                    payload,
                    tos,
                ),
            )

    def _serialize(self, upstream: bool, rank: int, size: int) -> float | None:
        """When a frame leaves a rate-limited link's FIFO (now, without a limit), or None if the queue is
        full. Both directions of a rank's link queue on their own, like the two queues of a veth pair."""
        if not self.link_rate:
            return self.now
        queue = self._links.setdefault((upstream, rank), deque())
        while queue and queue[0] <= self.now:
            queue.popleft()
        if len(queue) >= self.link_queue:
            return None
        start = queue[-1] if queue else self.now
        queue.append(start + (size + FRAME_OVERHEAD) / self.link_rate)
        return queue[-1]

    def send_raw(self, rank: int, payload: bytes) -> None:
        """A datagram from rank's address that no engine wrote (a forger, a stale process)."""
        self._transmit(True, rank, payload)

    def _deliver(self, kind: str, rank: int, payload: bytes, tos: int = 0) -> None:
        if kind == "arrive":  # queue for the switch: it serves one packet at a time
            cost = self.query_time if payload[0] == MsgType.QUERY else self.switch_time
            self._switch_free = max(self.now, self._switch_free) + cost
            heapq.heappush(self._events, (self._switch_free, next(self._order), "switch", rank, payload, tos))
            return
        if kind == "switch":
            for port, out in self.driver.send(
                self.job.workers[rank].port, frame(self.job.workers[rank], payload, tos)
            ):
                target = self._port_rank.get(port)
                if target is not None:
                    self._transmit(False, target, datagram(out)[1], out[15])
        else:
            for reply in self.engines[rank].receive(payload, self.now, tos):
                self._from_rank(rank, reply)

    def _from_rank(self, rank: int, packet: bytes) -> None:
        self._transmit(True, rank, packet)

    # ------------------------------------------------------------------ inspection
    def counter(self, name: str, index: int | None = None) -> int:
        return self.driver.counter(name, self.job.job_id if index is None else index)[0]

    def sent(self, *, upstream: bool = True, msg_type: int | None = None) -> list[Packet]:
        return [
            p
            for _, p, _ in self.log
            if p.upstream == upstream and (msg_type is None or p.msg_type == msg_type)
        ]

    def dropped(self) -> int:
        return sum(1 for _, _, copies in self.log if copies == 0)
