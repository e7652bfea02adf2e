"""Prometheus metrics of p4reduce-switch (`--metrics HOST:PORT`): ports, the packet loop, P4 counters.

Every value is read when Prometheus scrapes, from the counters the switch
keeps anyway (the packet loop's, each port's, and the loaded program's
counter arrays), so an idle scrape costs the packet loop nothing. The
program's counters are exported by their P4Info names with an `index`
label, only where an index has counted something: a p4reduce program then
shows its per-job and per-drop-reason counters, and any other program its
own. What the controller knows (jobs by name, slots, tenants) is the
controller's metrics (controller/metrics.py); the names here start with
`p4reduce_port_`, `p4reduce_dataplane_` and `p4reduce_p4_` so the two
never collide. docs/softswitch.md lists every family.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from softswitch.dataplane.native import STATS

if TYPE_CHECKING:
    from softswitch.p4runtime.server import P4RuntimeService

log = logging.getLogger("softswitch.metrics")

# The packet loop's counters (both loops' `stats` keys) that are not drops.
LOOP_FRAMES = {
    "rx": ("p4reduce_dataplane_frames_received", "Frames read from the data ports and PacketOuts."),
    "tx": ("p4reduce_dataplane_frames_sent", "Frames the data ports sent."),
    "consumed": ("p4reduce_dataplane_frames_consumed", "Frames the program dropped or consumed (no output)."),
    "packet_in": ("p4reduce_dataplane_packet_ins", "Frames sent to the controller as PacketIn."),
    "digest": ("p4reduce_dataplane_digests", "Digest messages the program generated."),
    "lane_rx": (
        "p4reduce_dataplane_lane_frames_received",
        "Frames taken from shared-memory lanes (in rx too).",
    ),
    "lane_tx": ("p4reduce_dataplane_lane_frames_sent", "Frames put into shared-memory lanes (in tx too)."),
    "lane_full": (
        "p4reduce_dataplane_lane_full",
        "Frames for a lane whose ring was full, sent by UDP instead.",
    ),
    "lane_corrupt": (
        "p4reduce_dataplane_lanes_corrupt",
        "Lanes closed: their rank left an impossible index or length.",
    ),
}
DROPPED = "dropped_"


class SwitchCollector(Collector):
    """Reads one switch's counters at scrape time."""

    def __init__(self, service: P4RuntimeService) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        yield from self._ports()
        yield from self._loop()
        yield from self._program()

    def _ports(self) -> Iterator[Metric]:
        frames = CounterMetricFamily(
            "p4reduce_port_frames", "Ethernet frames through a data port.", labels=["port", "direction"]
        )
        octets = CounterMetricFamily(
            "p4reduce_port_bytes",
            "Bytes of Ethernet frames through a data port (a UDP port counts the 42 header bytes it adds).",
            labels=["port", "direction"],
        )
        for number, counts in sorted(self.service.dataplane.port_counters().items()):
            port = str(number)
            frames.add_metric([port, "in"], counts.frames_in)
            frames.add_metric([port, "out"], counts.frames_out)
            octets.add_metric([port, "in"], counts.bytes_in)
            octets.add_metric([port, "out"], counts.bytes_out)
        yield frames
        yield octets

    def _loop(self) -> Iterator[Metric]:
        stats = dict(self.service.dataplane.stats.items())
        for key, (name, documentation) in LOOP_FRAMES.items():
            yield CounterMetricFamily(name, documentation, value=stats.get(key, 0))
        dropped = CounterMetricFamily(
            "p4reduce_dataplane_frames_dropped",
            "Frames the packet loop (not the program) dropped, by reason.",
            labels=["reason"],
        )
        reasons = {key for key in (*STATS, *stats) if key.startswith(DROPPED)}  # the C loop's always shown
        for key in sorted(reasons):
            dropped.add_metric([key.removeprefix(DROPPED)], stats.get(key, 0))
        yield dropped

    def _program(self) -> Iterator[Metric]:
        current = self.service.current
        loaded = GaugeMetricFamily(
            "p4reduce_dataplane_pipeline_loaded", "1 while a P4 program is loaded and running."
        )
        loaded.add_metric([], int(current is not None and current.pipeline is not None))
        yield loaded
        packets = CounterMetricFamily(
            "p4reduce_p4_counter_packets",
            "Packets counted by the program's counter arrays (indices that counted something).",
            labels=["counter", "index"],
        )
        octets = CounterMetricFamily(
            "p4reduce_p4_counter_bytes",
            "Bytes counted by the program's counter arrays (indices that counted something).",
            labels=["counter", "index"],
        )
        if current is not None and current.pipeline is not None:
            with self.service.dataplane.lock:  # a consistent view: the loop counts under the same lock
                rows = [
                    (counter.name, index, counter.packets[index], counter.bytes[index], counter.unit)
                    for counter in current.store.state.counters.values()
                    for index in range(counter.size)
                    if counter.packets[index] or counter.bytes[index]
                ]
            for name, index, packet_count, byte_count, unit in rows:
                if unit in ("packets", "both"):
                    packets.add_metric([name, str(index)], packet_count)
                if unit in ("bytes", "both"):
                    octets.add_metric([name, str(index)], byte_count)
        yield packets
        yield octets


def metrics_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or a bare `PORT` (loopback: metrics name jobs and hosts)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT or PORT (PORT 1..65535)")
    return host, int(port)


def serve_metrics(service: P4RuntimeService, host: str, port: int) -> WSGIServer:
    """Serve /metrics on host:port from a thread of prometheus_client's (a daemon thread)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwitchCollector(service))
    server, _ = start_http_server(port, addr=host, registry=registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
    return server
