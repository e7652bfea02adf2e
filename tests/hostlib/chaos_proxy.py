"""A UDP proxy between workers and a switch that duplicates, delays, reorders or drops datagrams.

netem cannot be used here, and the switch's own fault injection only drops;
a real fabric also duplicates (retransmitting links), delays (queues) and
reorders (ECMP, multipath). Each worker talks to its own front socket and
the proxy forwards from a back socket per worker, the address the controller
registered for that rank, so the switch sees each worker at a fixed address
and the proxy sits on every packet, both ways. Faults are drawn from one
seeded generator, independently per packet and direction.
"""

from __future__ import annotations

import heapq
import itertools
import random
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

MAX_HOLD = 0.05  # a reordered packet waits at most this long for a later one to overtake


@dataclass(frozen=True)
class Faults:
    """What happens to a `rate` share of packets: "duplicate" (a second copy 2..50 ms later), "delay"
    (held 2..50 ms), "reorder" (held until the flow's next packet has gone first) or "drop"."""

    kind: str
    rate: float
    delay: tuple[float, float] = (0.002, 0.05)
    seed: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("duplicate", "delay", "reorder", "drop"):
            raise ValueError(f"unknown fault {self.kind!r}")


@dataclass
class Counts:
    forwarded: int = 0
    affected: int = 0


@dataclass
class _Flow:
    """One direction of one worker's traffic: where it goes, and a packet held back to be overtaken."""

    sock: socket.socket
    destination: tuple[str, int] | None
    held: bytes | None = None
    held_until: float = 0.0
    counts: Counts = field(default_factory=Counts)


class ChaosProxy:
    def __init__(self, switch: tuple[str, int], fronts: list[str], backs: list[str], faults: Faults) -> None:
        self.faults = faults
        self.rng = random.Random(faults.seed)
        self.selector = selectors.DefaultSelector()
        self.front_addresses: list[tuple[str, int]] = []
        self.back_addresses: list[tuple[str, int]] = []
        self._up: list[_Flow] = []  # worker -> switch, per rank
        self._down: list[_Flow] = []  # switch -> worker, per rank
        for front_ip, back_ip in zip(fronts, backs, strict=True):
            front, back = self._socket(front_ip), self._socket(back_ip)
            self.front_addresses.append(front.getsockname())
            self.back_addresses.append(back.getsockname())
            up, down = _Flow(back, switch), _Flow(front, None)  # the worker's address is learned
            self._up.append(up)
            self._down.append(down)
            self.selector.register(front, selectors.EVENT_READ, ("up", len(self._up) - 1))
            self.selector.register(back, selectors.EVENT_READ, ("down", len(self._down) - 1))
        self._timers: list[tuple[float, int, _Flow, bytes]] = []
        self._order = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)

    @staticmethod
    def _socket(ip: str) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((ip, 0))
        sock.setblocking(False)
        return sock

    @property
    def counts(self) -> Counts:
        flows = self._up + self._down
        return Counts(sum(f.counts.forwarded for f in flows), sum(f.counts.affected for f in flows))

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            wait = 0.05
            if self._timers:
                wait = min(wait, max(self._timers[0][0] - now, 0.0))
            for key, _ in self.selector.select(wait):
                direction, rank = key.data
                self._drain(key.fileobj, direction, rank)  # type: ignore[arg-type]
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                _, _, flow, payload = heapq.heappop(self._timers)
                self._emit(flow, payload)
            for flow in self._up + self._down:
                if flow.held is not None and flow.held_until <= now:
                    held, flow.held = flow.held, None
                    self._emit(flow, held)

    def _drain(self, sock: socket.socket, direction: str, rank: int) -> None:
        while True:
            try:
                payload, sender = sock.recvfrom(65536)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if direction == "up":
                self._down[rank].destination = sender  # answers go back to whoever sent
                self._forward(self._up[rank], payload)
            else:
                self._forward(self._down[rank], payload)

    def _forward(self, flow: _Flow, payload: bytes) -> None:
        faults, rng = self.faults, self.rng
        hit = rng.random() < faults.rate
        if hit:
            flow.counts.affected += 1
        if hit and faults.kind == "drop":
            return
        if hit and faults.kind == "delay":
            self._later(flow, payload, rng.uniform(*faults.delay))
            return
        if hit and faults.kind == "reorder" and flow.held is None:
            flow.held, flow.held_until = payload, time.monotonic() + MAX_HOLD
            return
        self._emit(flow, payload)
        if flow.held is not None:
            held, flow.held = flow.held, None  # overtaken: the held packet goes after this one
            self._emit(flow, held)
        if hit and faults.kind == "duplicate":
            self._later(flow, payload, rng.uniform(*faults.delay))

    def _later(self, flow: _Flow, payload: bytes, delay: float) -> None:
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._order), flow, payload))

    @staticmethod
    def _emit(flow: _Flow, payload: bytes) -> None:
        if flow.destination is None:
            return
        try:
            flow.sock.sendto(payload, flow.destination)
        except OSError:
            return  # a worker that closed its socket, or a full buffer: a loss like any other
        flow.counts.forwarded += 1

    # ------------------------------------------------------------------ life
    def __enter__(self) -> ChaosProxy:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()
