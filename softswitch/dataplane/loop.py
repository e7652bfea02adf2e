"""The packet loop: ports in, pipeline, ports (or the controller) out.

One thread multiplexes every port socket with a selector, drains each ready
socket in batches and runs the batch through the pipeline under `lock`,
the lock the P4Runtime server also holds while it changes tables, so a
packet never sees half an update. Sending happens after the lock is
released. Frames the pipeline emits on the CPU port go to `packet_in`
(the P4Runtime server's PacketIn path), digest messages (outputs to
`DIGEST_PORT_BASE` + i) to `digest`; PacketOut frames come in through
`inject`.

Fault injection (`--drop-rate`, `--drop-rate-out`) draws from one seeded
generator under the same lock, so a run with the same seed and the same
packet sequence drops the same packets. `--drop-ports` limits it to some
ports (frames in from them, frames out to them), e.g. the links between
switches of a fabric; a frame of another port draws nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import selectors
import threading
from collections import Counter
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Protocol

from softswitch.dataplane.lanes import serve_lanes
from softswitch.dataplane.pcap import PcapDirectory
from softswitch.dataplane.ports import Port
from softswitch.runtime.pipeline import DIGEST_PORT_BASE, Pipeline

TRACE = 5  # log level below DEBUG: per-packet hex dumps
BATCH = 64
IDLE_TIMEOUT = 0.2

log = logging.getLogger("softswitch.dataplane")


@dataclass
class Faults:
    """Seeded random drops on ingress and egress, on every port or only on `ports`."""

    drop_in: float = 0.0
    drop_out: float = 0.0
    seed: int | None = None
    ports: frozenset[int] = frozenset()  # empty: every port
    rng: random.Random = field(init=False)

    def applies(self, port: int) -> bool:
        """Whether frames in from, or out to, `port` may be dropped."""
        return not self.ports or port in self.ports

    def __post_init__(self) -> None:
        for rate in (self.drop_in, self.drop_out):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"drop rate {rate} is not between 0 and 1")
        self.rng = random.Random(self.seed)


def by_number(ports: list[Port], cpu_port: int | None) -> dict[int, Port]:
    """The data ports by number; the numbers distinct and none of them the CPU port's (both loops)."""
    numbered = {port.number: port for port in ports}
    if len(numbered) != len(ports):
        raise ValueError("two ports have the same number")
    if cpu_port is not None and cpu_port in numbered:
        raise ValueError(f"the CPU port {cpu_port} is also a data port")
    return numbered


@dataclass
class PortCounters:
    """One port's traffic as the switch saw it: whole Ethernet frames (both loops count alike)."""

    frames_in: int = 0
    bytes_in: int = 0
    frames_out: int = 0
    bytes_out: int = 0


class DigestSink(Protocol):
    digest: Callable[[int, bytes], None] | None
    stats: MutableMapping[str, int]


def deliver_digest(plane: DigestSink, index: int, data: bytes) -> None:
    """Hand a digest message of the P4Info's `index`-th digest to the controller side (both loops)."""
    sink = plane.digest
    if sink is None:
        plane.stats["dropped_digest_no_controller"] += 1
    else:
        plane.stats["digest"] += 1
        sink(index, data)


class Dataplane:
    """Ports, the installed pipeline and the loop that connects them."""

    def __init__(
        self,
        ports: list[Port],
        cpu_port: int | None = None,
        faults: Faults | None = None,
        pcap: PcapDirectory | None = None,
    ) -> None:
        self.ports = by_number(ports, cpu_port)
        self.cpu_port = cpu_port
        self.faults = faults or Faults()
        self.pcap = pcap
        self.lock = threading.Lock()
        self.pipeline: Pipeline | None = None
        self.packet_in: Callable[[bytes], None] | None = None
        self.digest: Callable[[int, bytes], None] | None = None
        self.stats: Counter[str] = Counter()
        self._ports = {number: PortCounters() for number in self.ports}
        self._selector = selectors.DefaultSelector()
        for port in ports:
            self._selector.register(port.fileno(), selectors.EVENT_READ, port)
        # This loop serves no shared-memory lanes, but holds their names (softswitch/dataplane/lanes.py).
        self._lane_names = serve_lanes(ports, lambda port: None)

    # ------------------------------------------------------------- the loop
    def run(self, stop: threading.Event) -> None:
        """Forward packets until `stop` is set (call from one thread only)."""
        debug = log.isEnabledFor(logging.DEBUG)
        select = self._selector.select
        while not stop.is_set():
            events = select(IDLE_TIMEOUT)
            if not events:
                if self.pcap is not None:
                    self.pcap.flush()
                continue
            for key, _ in events:
                port: Port = key.data
                try:
                    frames = port.receive(BATCH)
                except OSError as error:  # e.g. the interface went away: stop reading it, keep switching
                    log.error(
                        "port %d (%s): receive failed (%s); disabled", port.number, port.describe(), error
                    )
                    self._selector.unregister(key.fileobj)
                    continue
                if frames:
                    self._forward(port.number, frames, debug)

    def inject(self, port: int, frame: bytes) -> None:
        """Run one frame through the pipeline as if it arrived on `port` (PacketOut)."""
        self._forward(port, [frame], log.isEnabledFor(logging.DEBUG))

    def port_counters(self) -> dict[int, PortCounters]:
        """Each data port's frames and bytes so far (copies: the loop keeps counting)."""
        return {number: dataclasses.replace(counts) for number, counts in self._ports.items()}

    def close(self) -> None:
        for server in self._lane_names:
            server.close()
        self._selector.close()
        for port in self.ports.values():
            port.close()
        if self.pcap is not None:
            self.pcap.close()

    # -------------------------------------------------------------- helpers
    def _forward(self, ingress: int, frames: list[bytes], debug: bool) -> None:
        """Pipeline a batch from one port. Debug logs name packets by arrival number, like bmv2's ids."""
        stats = self.stats
        first_id = stats["rx"]
        stats["rx"] += len(frames)
        counts = self._ports.get(ingress)  # None for the CPU port's PacketOuts
        if counts is not None:
            counts.frames_in += len(frames)
            counts.bytes_in += sum(map(len, frames))
        pcap = self.pcap
        if pcap is not None:
            for frame in frames:
                pcap.write(ingress, "in", frame)
        outputs: list[tuple[int, bytes, int]] = []
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                stats["dropped_no_pipeline"] += len(frames)
                if debug:
                    log.debug("port %d: %d frame(s) dropped, no pipeline", ingress, len(frames))
                return
            faults = self.faults
            for packet_id, frame in enumerate(frames, start=first_id):
                if faults.drop_in and faults.applies(ingress) and faults.rng.random() < faults.drop_in:
                    stats["dropped_fault_in"] += 1
                    if debug:
                        log.debug(
                            "pkt %d port %d in: %d bytes, dropped by fault injection",
                            packet_id,
                            ingress,
                            len(frame),
                        )
                    continue
                if debug:
                    log.debug("pkt %d port %d in: %d bytes", packet_id, ingress, len(frame))
                    log.log(TRACE, "pkt %d: %s", packet_id, frame.hex())
                try:
                    produced = pipeline.process(ingress, frame)
                except Exception:
                    # A pipeline bug must not kill the switch; drop the packet, say why.
                    stats["dropped_pipeline_error"] += 1
                    log.exception("pkt %d port %d: the pipeline failed; dropped", packet_id, ingress)
                    continue
                if not produced:
                    stats["consumed"] += 1
                    if debug:
                        log.debug("pkt %d: no output (dropped or consumed by the program)", packet_id)
                for port_number, out in produced:
                    if (
                        faults.drop_out
                        and faults.applies(port_number)
                        and faults.rng.random() < faults.drop_out
                    ):
                        stats["dropped_fault_out"] += 1
                        if debug:
                            log.debug(
                                "pkt %d port %d out: %d bytes, dropped by fault injection",
                                packet_id,
                                port_number,
                                len(out),
                            )
                    else:
                        outputs.append((port_number, out, packet_id))
        for port_number, out, packet_id in outputs:
            self._emit(port_number, out, packet_id, debug)

    def _emit(self, port_number: int, frame: bytes, packet_id: int, debug: bool) -> None:
        if port_number >= DIGEST_PORT_BASE:
            deliver_digest(self, port_number - DIGEST_PORT_BASE, frame)
            return
        if port_number == self.cpu_port:
            sink = self.packet_in
            if sink is None:
                self.stats["dropped_no_controller"] += 1
            else:
                self.stats["packet_in"] += 1
                sink(frame)
            if debug:
                log.debug("pkt %d port %d (CPU) out: %d bytes", packet_id, port_number, len(frame))
            return
        port = self.ports.get(port_number)
        if port is None:
            self.stats["dropped_no_port"] += 1
            if debug:
                log.debug("pkt %d port %d out: no such port, dropped", packet_id, port_number)
            return
        if self.pcap is not None:
            self.pcap.write(port_number, "out", frame)
        if port.send(frame):
            self.stats["tx"] += 1
            counts = self._ports[port_number]
            counts.frames_out += 1
            counts.bytes_out += len(frame)
            if debug:
                log.debug("pkt %d port %d out: %d bytes", packet_id, port_number, len(frame))
                log.log(TRACE, "pkt %d port %d out: %s", packet_id, port_number, frame.hex())
        else:
            self.stats["dropped_unsendable"] += 1
            if debug:
                log.debug(
                    "pkt %d port %d out: %d bytes cannot leave a %s, dropped",
                    packet_id,
                    port_number,
                    len(frame),
                    port.describe(),
                )
