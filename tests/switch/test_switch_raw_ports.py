"""Raw Ethernet ports (-i) on veth pairs into network namespaces (root only)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from switch_netns import two_hosts

from softswitch.dataplane.loop import Dataplane
from softswitch.dataplane.ports import RawPort
from softswitch.runtime.state import RuntimeState

pytestmark = pytest.mark.root


class Wire:
    """A two-port wire: what enters port 1 leaves port 2 and vice versa."""

    state = RuntimeState()

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return [(3 - ingress_port, frame)]


ECHO_SERVER = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7777))
s.settimeout(10)
answered = set()
while len(answered) < 3:
    data, peer = s.recvfrom(100)
    s.sendto(data.upper(), peer)
    answered.add(data)
"""

ECHO_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
for word in (b"one", b"two", b"three"):
    for attempt in range(5):  # the server may not be listening yet
        s.sendto(word, (sys.argv[1], 7777))
        try:
            print(s.recvfrom(100)[0].decode())
            break
        except TimeoutError:
            continue
"""


def test_hosts_in_two_namespaces_talk_udp_through_raw_ports(dataplane_class: type) -> None:
    with two_hosts() as (ends, hosts):
        dataplane = dataplane_class([RawPort(1, ends[0]), RawPort(2, ends[1])])
        dataplane.pipeline = Wire()
        stop = threading.Event()
        loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
        loop.start()
        server = subprocess.Popen(
            ["ip", "netns", "exec", hosts[1].namespace, sys.executable, "-c", ECHO_SERVER],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            result = hosts[0].run(sys.executable, "-c", ECHO_CLIENT, hosts[1].ip)
            server.wait(timeout=15)
        finally:
            if server.poll() is None:
                server.kill()
            server.communicate()
            stop.set()
            loop.join(timeout=5)
            dataplane.close()
        assert result.stdout.split() == ["ONE", "TWO", "THREE"], result.stderr
        # ARP and UDP both ways; our own transmissions were not read back as input.
        assert dataplane.stats["rx"] == dataplane.stats["tx"] >= 8


def test_a_vanished_interface_disables_its_port_not_the_switch(caplog: pytest.LogCaptureFixture) -> None:
    with two_hosts() as (ends, _hosts):
        dataplane = Dataplane([RawPort(1, ends[0]), RawPort(2, ends[1])])
        dataplane.pipeline = Wire()
        stop = threading.Event()
        loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
        loop.start()
        try:
            subprocess.run(["ip", "link", "del", ends[0]], check=True, timeout=10)
            stop.wait(0.5)
            assert loop.is_alive()
            dataplane.inject(1, bytes(64))  # the pipeline still runs; port 2 still sends
            assert dataplane.stats["tx"] >= 1
            assert "port 1 (interface" in caplog.text and "disabled" in caplog.text
        finally:
            stop.set()
            loop.join(timeout=5)
            dataplane.close()
