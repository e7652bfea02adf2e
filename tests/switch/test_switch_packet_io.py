"""PacketIn / PacketOut through the CPU port, with real UDP ports and the packet loop."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from finsy.proto import p4r
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from switch_support import (
    CPU_PORT,
    DEVICE_ID,
    Server,
    StreamClient,
    become_primary,
    reflector_config,
    start_server,
    stop_server,
)

from softswitch.dataplane.loop import Dataplane
from softswitch.dataplane.ports import UdpPort, host_mac, switch_mac
from softswitch.p4runtime.arbitration import uint128


@pytest.fixture
def wired(dataplane_class: type) -> Iterator[tuple[Server, UdpPort, StreamClient]]:
    """Server + packet loop with UDP port 3 on 127.0.0.1, test pipeline pushed, primary connected."""
    port = UdpPort(3, "127.0.0.1", 0)
    dataplane = dataplane_class([port], cpu_port=CPU_PORT)
    server = start_server(dataplane)
    stop = threading.Event()
    loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
    loop.start()
    client = become_primary(server.stub, 10)
    server.stub.SetForwardingPipelineConfig(
        p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID,
            election_id=uint128(10),
            config=reflector_config(),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
    )
    yield server, port, client
    client.close()
    stop.set()
    loop.join(timeout=5)
    stop_server(server)


def next_packet(client: StreamClient) -> p4r.PacketIn:
    while True:
        reply = client.recv()
        if reply.HasField("packet"):
            return reply.packet


def test_a_datagram_becomes_a_packet_in_with_its_ingress_port(
    wired: tuple[Server, UdpPort, StreamClient],
) -> None:
    _, port, client = wired
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.7", 0))
        worker.sendto(b"hello", ("127.0.0.1", port.udp_port))
        packet = next_packet(client)
        assert [(m.metadata_id, m.value) for m in packet.metadata] == [(1, b"\x03"), (2, b"\x00")]
        frame = Ether(packet.payload)
        assert frame.src == ":".join(f"{b:02x}" for b in host_mac(bytes([127, 0, 0, 7])))
        assert frame.dst == ":".join(f"{b:02x}" for b in switch_mac(3))
        assert (frame[IP].src, frame[IP].dst) == ("127.0.0.7", "127.0.0.1")
        assert (frame[UDP].sport, frame[UDP].dport) == (worker.getsockname()[1], port.udp_port)
        assert bytes(frame[UDP].payload) == b"hello"
        checksum = frame[IP].chksum
        del frame[IP].chksum
        assert Ether(bytes(frame))[IP].chksum == checksum  # the synthesized IPv4 checksum is valid


def test_a_packet_out_leaves_on_the_port_its_header_names(
    wired: tuple[Server, UdpPort, StreamClient],
) -> None:
    _, _, client = wired
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.8", 0))
        worker.settimeout(5)
        frame = bytes(
            Ether()
            / IP(src="127.0.0.1", dst="127.0.0.8")
            / UDP(sport=1, dport=worker.getsockname()[1])
            / b"from the controller"
        )
        client.send(
            p4r.StreamMessageRequest(
                packet=p4r.PacketOut(
                    payload=frame,
                    metadata=[
                        p4r.PacketMetadata(metadata_id=1, value=b"\x03"),
                        p4r.PacketMetadata(metadata_id=2, value=b"\x00"),
                    ],
                )
            )
        )
        data, _ = worker.recvfrom(2048)
        assert data == b"from the controller"


def test_bad_packet_out_metadata_is_answered_with_a_stream_error(
    wired: tuple[Server, UdpPort, StreamClient],
) -> None:
    _, _, client = wired
    packet = p4r.PacketOut(payload=b"x", metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x03")])
    client.send(p4r.StreamMessageRequest(packet=packet))
    reply = client.recv()
    assert reply.error.canonical_code == 3  # INVALID_ARGUMENT: metadata 2 is missing
    assert reply.error.packet_out.packet_out == packet


def test_a_backup_cannot_send_packet_out(wired: tuple[Server, UdpPort, StreamClient]) -> None:
    server, _, _ = wired
    backup = StreamClient(server.stub)
    backup.arbitrate(2)
    assert backup.recv().arbitration.status.code == 6
    backup.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"x")))
    # Dropped without a word, as PI drops it (a stream error is optional in the specification).
    assert wait_for(lambda: server.dataplane.stats["dropped_packet_out_not_primary"] == 1)
    assert backup.responses.empty()
    backup.close()


def test_packet_out_without_a_cpu_port_is_dropped_silently() -> None:
    server = start_server(Dataplane([], cpu_port=None))
    try:
        client = become_primary(server.stub, 10)
        client.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"x")))
        assert wait_for(lambda: server.dataplane.stats["dropped_packet_out_no_cpu_port"] == 1)
        assert client.responses.empty()
        client.close()
    finally:
        stop_server(server)


def wait_for(condition, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


def test_frames_to_the_cpu_port_without_a_primary_are_counted(
    wired: tuple[Server, UdpPort, StreamClient],
) -> None:
    server, _, client = wired
    client.close()
    deadline = time.monotonic() + 5
    while server.service.arbitration.primary() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    server.dataplane.inject(3, b"\x00" * 20)
    assert server.dataplane.stats["dropped_packet_in_no_primary"] == 1
