"""Ports, the packet loop's bookkeeping, fault injection and captures (no root needed)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether

from softswitch.dataplane.loop import Dataplane, Faults, PortCounters
from softswitch.dataplane.pcap import PcapDirectory, read_pcap
from softswitch.dataplane.ports import UdpPort, host_mac, ipv4_checksum, switch_mac
from softswitch.runtime.state import RuntimeState


class Echo:
    """Sends every frame out of the port named by its first byte; byte 0xEE raises."""

    state = RuntimeState()

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        if frame[0] == 0xEE:
            raise RuntimeError("pipeline bug")
        return [(frame[0], frame)]


@contextmanager
def looping(dataplane: Dataplane) -> Iterator[None]:
    """The packet loop runs in a thread for the duration of the block."""
    stop = threading.Event()
    loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
    loop.start()
    try:
        yield
    finally:
        stop.set()
        loop.join(timeout=5)


@pytest.fixture
def udp_port() -> UdpPort:
    port = UdpPort(4, "127.0.0.1", 0)
    yield port
    port.close()


def test_macs_are_synthesized_without_collisions() -> None:
    assert host_mac(bytes([127, 0, 0, 9])) == bytes.fromhex("02007f000009")
    assert switch_mac(4) == bytes.fromhex("025052000004")
    assert host_mac(bytes([80, 82, 0, 4])) != switch_mac(4)  # second byte 0x00 vs 0x50


def test_ipv4_checksum_matches_scapy() -> None:
    header = bytes(IP(src="10.1.2.3", dst="10.9.8.7", ttl=17, id=5, len=60))[:20]
    zeroed = header[:10] + b"\x00\x00" + header[12:]
    assert ipv4_checksum(zeroed) == int.from_bytes(header[10:12], "big")


def test_a_datagram_becomes_an_ethernet_ipv4_udp_frame(udp_port: UdpPort) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.3", 0))
        sender_port = worker.getsockname()[1]
        for i in range(3):
            worker.sendto(bytes([i]) * 140, ("127.0.0.1", udp_port.udp_port))
        frames: list[bytes] = []
        while len(frames) < 3:
            frames += udp_port.receive(64)
    for i, raw in enumerate(frames):
        frame = Ether(raw)
        assert (frame.dst, frame.src) == ("02:50:52:00:00:04", "02:00:7f:00:00:03")
        assert frame[IP].len == 20 + 8 + 140 and frame[IP].ttl == 64 and frame[IP].proto == 17
        assert frame[UDP].sport == sender_port and frame[UDP].len == 148 and frame[UDP].chksum == 0
        assert bytes(frame[UDP].payload) == bytes([i]) * 140
    assert udp_port.receive(64) == []  # never blocks


def test_ipv4_udp_frames_leave_as_datagrams_to_their_destination(udp_port: UdpPort) -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b,
    ):
        a.bind(("127.0.0.5", 0))
        b.bind(("127.0.0.6", 0))
        a.settimeout(5)
        b.settimeout(5)
        # Two replicas of one result to two workers sharing the port; Ethernet padding is not payload.
        for sock, text in ((a, b"to a"), (b, b"to b")):
            ip, port = sock.getsockname()
            assert udp_port.send(
                bytes(Ether() / IP(dst=ip) / UDP(sport=20562, dport=port) / text) + b"\x00" * 8
            )
        assert a.recvfrom(100)[0] == b"to a"
        assert b.recvfrom(100)[0] == b"to b"


@pytest.mark.parametrize(
    "frame",
    [
        bytes(Ether() / ARP()),
        bytes(Ether() / IP(dst="127.0.0.1") / ICMP()),
        bytes(Ether() / IP(dst="127.0.0.1") / UDP(dport=9))[:40],
        b"",
    ],
    ids=["arp", "icmp", "truncated", "empty"],
)
def test_frames_that_are_not_ipv4_udp_cannot_leave_a_udp_port(udp_port: UdpPort, frame: bytes) -> None:
    assert udp_port.send(frame) is False


def test_the_packet_loop_counts_what_it_cannot_deliver(udp_port: UdpPort, dataplane_class: type) -> None:
    dataplane = dataplane_class([udp_port], cpu_port=None)
    dataplane.inject(4, b"\x04" + b"\x00" * 40)  # no pipeline yet
    dataplane.pipeline = Echo()
    dataplane.inject(4, b"\x09" + b"\x00" * 40)  # no port 9
    dataplane.inject(4, b"\x04" + b"\x00" * 40)  # port 4 exists but this is no IPv4/UDP frame
    dataplane.inject(4, b"\xee" + b"\x00" * 40)  # the pipeline raises: dropped, the switch lives on
    assert dataplane.stats["dropped_no_pipeline"] == 1
    assert dataplane.stats["dropped_no_port"] == 1
    assert dataplane.stats["dropped_unsendable"] == 1
    assert dataplane.stats["dropped_pipeline_error"] == 1


def dropped_indices(
    seed: int, rate_in: float, rate_out: float, dataplane_class: type = Dataplane
) -> tuple[list[int], dict[str, int]]:
    dataplane = dataplane_class([], cpu_port=200, faults=Faults(rate_in, rate_out, seed))
    dataplane.pipeline = Echo()
    seen: list[int] = []
    dataplane.packet_in = lambda frame: seen.append(frame[1])
    for i in range(200):
        dataplane.inject(1, bytes([200, i]))
    return [i for i in range(200) if i not in seen], dict(dataplane.stats)


def test_fault_injection_is_reproducible_with_a_seed(dataplane_class: type) -> None:
    first, stats = dropped_indices(42, 0.2, 0.1, dataplane_class)
    second, _ = dropped_indices(42, 0.2, 0.1, dataplane_class)
    other, _ = dropped_indices(43, 0.2, 0.1, dataplane_class)
    assert first == second and first != other
    assert stats["dropped_fault_in"] + stats["dropped_fault_out"] == len(first)
    assert 20 < stats["dropped_fault_in"] < 60 and 5 < stats["dropped_fault_out"] < 40
    assert dropped_indices(1, 0.0, 0.0, dataplane_class)[0] == []
    with pytest.raises(ValueError, match="between 0 and 1"):
        Faults(-0.1)


def test_fault_injection_limited_to_some_ports_leaves_the_others_untouched(dataplane_class: type) -> None:
    """--drop-ports: a lossy link between two switches, the switch's other ports lossless (both loops)."""
    dataplane = dataplane_class([], cpu_port=200, faults=Faults(0.5, 0.0, 7, frozenset({2})))
    dataplane.pipeline = Echo()
    seen: list[tuple[int, int]] = []
    dataplane.packet_in = lambda frame: seen.append((frame[1], frame[2]))
    for i in range(200):
        for port in (1, 2):
            dataplane.inject(port, bytes([200, port, i]))
    from_1 = [i for port, i in seen if port == 1]
    from_2 = [i for port, i in seen if port == 2]
    assert from_1 == list(range(200)), "port 1 is not lossy"
    assert 60 < len(from_2) < 140 and dataplane.stats["dropped_fault_in"] == 200 - len(from_2)
    # Out to a lossy port too: every frame goes out to the CPU port, which is the only lossy one here.
    out = dataplane_class([], cpu_port=200, faults=Faults(0.0, 0.5, 7, frozenset({200})))
    out.pipeline = Echo()
    kept: list[int] = []
    out.packet_in = lambda frame: kept.append(frame[1])
    for i in range(200):
        out.inject(1, bytes([200, i]))
    assert 60 < len(kept) < 140 and out.stats["dropped_fault_out"] == 200 - len(kept)


def test_captures_hold_every_frame_per_port_and_direction(
    tmp_path: Path, udp_port: UdpPort, dataplane_class: type
) -> None:
    pcap = PcapDirectory(tmp_path)
    dataplane = dataplane_class([udp_port], faults=Faults(), pcap=pcap)
    dataplane.pipeline = Echo()
    with looping(dataplane), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.9", 0))
        worker.settimeout(5)
        # Echo sends a frame out of the port named by its first byte: port 2 (0x02 is the MAC's first byte).
        worker.sendto(b"x" * 10, ("127.0.0.1", udp_port.udp_port))
        for _ in range(100):
            if dataplane.stats["rx"]:
                break
            time.sleep(0.05)
    dataplane.close()
    [inbound] = read_pcap(tmp_path / "4_in.pcap")
    assert inbound.endswith(b"x" * 10) and Ether(inbound)[IP].src == "127.0.0.9"
    assert dataplane.stats["dropped_no_port"] == 1  # port 2 does not exist: nothing captured going out
    assert not (tmp_path / "2_out.pcap").exists()


@pytest.mark.parametrize("seed", [0, 1, 42, 2**40 + 7, -5])
def test_both_loops_drop_the_same_frames_for_the_same_seed(seed: int) -> None:
    pytest.importorskip("softswitch.dataplane.native")
    from tests.conftest import NO_COMPILER

    if NO_COMPILER:
        pytest.skip("no C compiler (cc): the native loop cannot run")
    from softswitch.dataplane.native import NativeDataplane

    assert dropped_indices(seed, 0.3, 0.2, NativeDataplane) == dropped_indices(seed, 0.3, 0.2, Dataplane)


class Reply:
    """Sends every IPv4/UDP frame back to its sender, and a copy to each of `also` (IPv4, UDP port)."""

    state = RuntimeState()

    def __init__(self, also: tuple[tuple[str, int], ...] = ()) -> None:
        self.also = [(socket.inet_aton(host), port.to_bytes(2, "big")) for host, port in also]

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        ip, udp = 14, 34
        sender = (frame[ip + 12 : ip + 16], frame[udp : udp + 2])
        out = []
        for host, port in [sender, *self.also]:
            header = frame[: ip + 12] + frame[ip + 16 : ip + 20] + host + frame[udp + 2 : udp + 4] + port
            out.append((ingress_port, header + frame[udp + 4 :]))
        return out


UDP_SEGMENT = 103  # linux/udp.h: send one message that the kernel cuts into datagrams of this size


def test_datagrams_sent_as_one_gso_message_are_frames_of_their_own_both_ways(
    udp_port: UdpPort, dataplane_class: type
) -> None:
    # On loopback a GSO message reaches a socket that takes GRO buffers whole: the native loop
    # must cut it into the sender's datagrams. Its replies, and their copies to a second host
    # (alternating with them in the batch, as a multicast's copies do), are joined again per
    # address on the way out: each host must get the same datagrams in the same order.
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other,
    ):
        worker.bind(("127.0.0.11", 0))
        other.bind(("127.0.0.12", 0))
        for s in (worker, other):
            s.settimeout(5)
        dataplane = dataplane_class([udp_port], cpu_port=None)
        dataplane.pipeline = Reply(also=(other.getsockname(),))
        datagrams = [bytes([i]) * 100 for i in range(1, 7)] + [b"\x07" * 40]  # the last may be shorter
        try:
            with looping(dataplane):
                gso = [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("H", 100))]
                worker.sendmsg([b"".join(datagrams)], gso, 0, ("127.0.0.1", udp_port.udp_port))
                worker.sendto(b"\x08" * 100, ("127.0.0.1", udp_port.udp_port))  # and one more, alone
                received = [worker.recv(2048) for _ in range(8)]
                copies = [other.recv(2048) for _ in range(8)]
        finally:
            dataplane.close()
    assert received == copies == [*datagrams, b"\x08" * 100]
    assert dataplane.stats["rx"] == 8 and dataplane.stats["tx"] == 16
    frames = sum(len(d) + HEADERS for d in received)  # as Ethernet frames, whichever way they were sent
    assert dataplane.port_counters() == {4: PortCounters(8, frames, 16, 2 * frames)}


HEADERS = 42  # Ethernet, IPv4 and UDP in front of a UDP port's datagram


def test_each_port_counts_frames_and_bytes_in_and_out(dataplane_class: type) -> None:
    ports = [UdpPort(4, "127.0.0.1", 0), UdpPort(5, "127.0.0.1", 0)]
    dataplane = dataplane_class(ports, cpu_port=None)
    dataplane.pipeline = Reply()
    with looping(dataplane), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.13", 0))
        worker.settimeout(5)
        for size in (10, 200, 1000):
            worker.sendto(b"d" * size, ("127.0.0.1", ports[0].udp_port))
            assert worker.recv(2048) == b"d" * size
        dataplane.inject(5, bytes(20))  # a PacketOut-like frame: in on port 5, not IPv4/UDP, cannot leave
    during = dataplane.port_counters()
    dataplane.close()
    sent = 10 + 200 + 1000 + 3 * HEADERS
    assert during == {4: PortCounters(3, sent, 3, sent), 5: PortCounters(1, 20, 0, 0)}
    assert dataplane.port_counters() == during  # kept after close, for a last scrape
