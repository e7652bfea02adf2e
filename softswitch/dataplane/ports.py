"""The switch's ports: raw Ethernet on a Linux interface, or a host-stack UDP socket.

Every port moves whole Ethernet frames in and out of the pipeline:

- `RawPort` (`-i N@IFACE`) reads and writes frames on an interface with an
  AF_PACKET socket, as bmv2 does; it needs root (CAP_NET_RAW).
- `UdpPort` (`--udp-port N@ADDR:UDPPORT`) needs no privileges: it binds a
  UDP socket and turns each datagram into an Ethernet/IPv4/UDP frame
  (source = the datagram's sender, destination = ADDR:UDPPORT), and each
  frame the pipeline sends out of the port back into a datagram sent from
  the socket to the frame's IPv4 destination and UDP destination port. So
  workers on 127.0.0.x talk to the switch with ordinary UDP sockets.

MAC addresses on a UDP port are synthesized (there is no Ethernet): a host
is 02:00:<its four IPv4 bytes>, the switch side of port N is
02:50:52:00:<N as 16 bits> ("PR" in the second and third bytes), so the
two families never collide. Frames that are not IPv4/UDP cannot leave a
UDP port; `send` returns False and the caller counts the drop.
"""

from __future__ import annotations

import socket
import struct
from typing import Protocol

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_IGNORE_OUTGOING = 23  # Linux 4.20+
PACKET_MR_PROMISC = 1
MAX_FRAME = 65536
SOCKET_BUFFER = 4 * 1024 * 1024

_IPV4_UDP = struct.Struct("!HBBHHHBBH4s4sHHHH")  # ethertype, IPv4 header, UDP header
_CHECKSUM_WORDS = struct.Struct("!10H")


class Port(Protocol):
    """What the packet loop needs from a port."""

    number: int

    def fileno(self) -> int: ...

    def receive(self, budget: int) -> list[bytes]:
        """Up to `budget` frames that are waiting (never blocks)."""
        ...

    def send(self, frame: bytes) -> bool:
        """Send one frame; False when this port cannot carry it."""
        ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


def host_mac(ipv4: bytes) -> bytes:
    """The synthesized MAC of a host on a UDP port."""
    return b"\x02\x00" + ipv4


def switch_mac(port: int) -> bytes:
    """The synthesized MAC of the switch side of UDP port `port`."""
    return b"\x02\x50\x52\x00" + (port & 0xFFFF).to_bytes(2, "big")


def ipv4_checksum(header: bytes) -> int:
    """The ones'-complement checksum of a 20-byte IPv4 header (checksum field 0)."""
    total = sum(_CHECKSUM_WORDS.unpack(header))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class UdpPort:
    """A rootless port: datagrams on a bound UDP socket <-> Ethernet/IPv4/UDP frames."""

    def __init__(self, number: int, address: str, udp_port: int) -> None:
        self.number = number
        self.address = address
        self.udp_port = udp_port
        self._local_ip = socket.inet_aton(address)  # OSError unless a dotted IPv4 address
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                self._sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
            self._sock.bind((address, udp_port))
        except OSError:
            self._sock.close()
            raise
        self.udp_port = self._sock.getsockname()[1]  # the one the kernel chose when udp_port is 0
        self._sock.setblocking(False)
        self._switch_mac = switch_mac(number)
        self._ethernet: dict[bytes, bytes] = {}  # sender IPv4 -> Ethernet header

    def fileno(self) -> int:
        return self._sock.fileno()

    def describe(self) -> str:
        return f"udp {self.address}:{self.udp_port}"

    def receive(self, budget: int) -> list[bytes]:
        frames = []
        recvfrom = self._sock.recvfrom
        for _ in range(budget):
            try:
                payload, (src_ip, src_port) = recvfrom(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:
                # An ICMP port-unreachable for an earlier send; not a frame.
                continue
            frames.append(self.frame(socket.inet_aton(src_ip), src_port, payload))
        return frames

    def frame(self, src_ip: bytes, src_port: int, payload: bytes) -> bytes:
        """The Ethernet/IPv4/UDP frame the pipeline sees for one datagram."""
        ethernet = self._ethernet.get(src_ip)
        if ethernet is None:
            ethernet = self._ethernet[src_ip] = self._switch_mac + host_mac(src_ip)
        udp_length = 8 + len(payload)
        headers = bytearray(
            _IPV4_UDP.pack(
                0x0800,
                0x45,
                0,
                20 + udp_length,
                0,
                0x4000,
                64,
                17,
                0,
                src_ip,
                self._local_ip,
                src_port,
                self.udp_port,
                udp_length,
                0,
            )
        )
        struct.pack_into("!H", headers, 12, ipv4_checksum(bytes(headers[2:22])))
        return ethernet + headers + payload

    def send(self, frame: bytes) -> bool:
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[14] >> 4 != 4 or frame[23] != 17:
            return False
        udp = 14 + (frame[14] & 0x0F) * 4
        if len(frame) < udp + 8:
            return False
        dst_port, udp_length = struct.unpack_from("!HH", frame, udp + 2)
        if udp_length < 8:
            return False
        payload = frame[udp + 8 : udp + udp_length]
        try:
            self._sock.sendto(payload, (socket.inet_ntoa(frame[30:34]), dst_port))
        except OSError:
            return False
        return True

    def close(self) -> None:
        self._sock.close()


class RawPort:
    """Raw Ethernet frames on a Linux interface (AF_PACKET; needs root)."""

    def __init__(self, number: int, interface: str) -> None:
        self.number = number
        self.interface = interface
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            self._sock.bind((interface, 0))
            index = socket.if_nametoindex(interface)
            membership = struct.pack("iHH8s", index, PACKET_MR_PROMISC, 0, b"")
            self._sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, membership)
            for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                self._sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:
            self._sock.close()
            raise
        try:  # the kernel would hand every frame we send back to us, as OUTGOING, to be thrown away
            self._sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass  # older kernels: receive() still filters them
        self._sock.setblocking(False)

    def fileno(self) -> int:
        return self._sock.fileno()

    def describe(self) -> str:
        return f"interface {self.interface}"

    def receive(self, budget: int) -> list[bytes]:
        frames = []
        recvfrom = self._sock.recvfrom
        for _ in range(budget):
            try:
                frame, address = recvfrom(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                break
            if address[2] != PACKET_OUTGOING:  # our own transmissions come back as OUTGOING
                frames.append(frame)
        return frames

    def send(self, frame: bytes) -> bool:
        try:
            self._sock.send(frame)
        except OSError:
            return False
        return True

    def close(self) -> None:
        self._sock.close()
