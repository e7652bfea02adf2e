"""A lab stops at the first daemon that dies, with the last lines of its log (issue 20).

On bmv2 the lab used to print "controller provisioned the switch(es)" after
its controller had exited, then ping with 100 % loss and fail at JoinJob
with "connection refused". These tests make the embedded switch and the
controller die at start and later, and check that the lab's start-up code
says which one and why; the switch log choice is checked on the embedded
switch (bmv2's command line is built by the same module and exercised by
the tests that start simple_switch_grpc when it is installed).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from hostlib.launch import LaunchError, build_program, free_port, start_controller
from tests.ports import free_udp_port

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts)
from targets import SwitchSpec, soft_launch  # noqa: E402
from topology import generate  # noqa: E402

needs_mininet = pytest.mark.skipif(
    os.geteuid() != 0 or importlib.util.find_spec("mininet") is None or shutil.which("mn") is None,
    reason="a Mininet network needs root and Debian's mininet package",
)


def write_config(path: Path, grpc_port: int, program: Path, p4info: Path) -> Path:
    path.write_text(
        "switches:\n"
        "  - name: s1\n"
        f"    grpc: 127.0.0.1:{grpc_port}\n"
        f"    p4info: {p4info}\n"
        f"    device_config: {program}\n"
        "    aggregation: {ipv4: 10.0.0.254, mac: '02:00:00:00:00:fe'}\n"
    )
    return path


def test_a_controller_that_exits_while_starting_is_reported_with_its_log(tmp_path: Path) -> None:
    # Its job API port is bound at once, before it reaches the switch: an open port proves nothing.
    program, p4info = build_program(ROOT / "build")
    config = write_config(tmp_path / "controller.yaml", free_port(), program, p4info)  # no switch there
    log = tmp_path / "controller.log"
    started = time.monotonic()
    with pytest.raises(LaunchError) as caught:
        start_controller(config, free_port(), log)
    message = str(caught.value)
    assert message.startswith("the controller (p4reduce-ctl serve) exited with code 1:")
    assert "is unreachable (is the switch running?)" in message  # its own last line
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(("choice", "per_packet"), [("trace", True), ("info", False), ("off", False)])
def test_the_switch_log_choice_decides_what_the_embedded_switch_logs(
    choice: str, per_packet: bool, tmp_path: Path
) -> None:
    grpc_address, udp = f"127.0.0.1:{free_port()}", free_udp_port()
    udp_ports = (f"1@127.0.0.1:{udp}",)
    spec = SwitchSpec("s1", grpc_address, 1, udp_ports=udp_ports, log_dir=tmp_path, switch_log=choice)
    launch = soft_launch(spec)
    with launch.console_log.open("ab") as out:
        process = subprocess.Popen(launch.command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        with grpc.insecure_channel(grpc_address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"hello", ("127.0.0.1", udp))
        time.sleep(0.5)
    finally:
        process.terminate()
        process.wait(timeout=10)
    text = launch.trace_log.read_text()
    assert ("dropped, no pipeline" in text) == per_packet  # one line per frame only when tracing
    assert ("P4Runtime server on" in text) == (choice != "off")


# ============================================================ in a Mininet network (root)
@pytest.fixture
def lab() -> object:
    """mininet/lab.py as a module; each test stops the network it starts (net.stop())."""
    return pytest.importorskip("lab", reason="the lab needs Debian's mininet")


@needs_mininet
@pytest.mark.root
def test_a_switch_that_exits_at_once_stops_the_network_with_its_log(lab: object, tmp_path: Path) -> None:
    with socket.socket() as taken:  # its gRPC port is in use: the switch exits as it starts
        taken.bind(("127.0.0.1", 0))
        net = lab.build_network(generate("star", 1), "soft", {"s1": taken.getsockname()[1]}, None, 0.0)  # type: ignore[attr-defined]
        for switch in net.switches:
            switch.log_dir, switch.pcap_dir = tmp_path, tmp_path / "pcaps"
        try:
            with pytest.raises(LaunchError) as caught:
                net.start()
        finally:
            net.stop()
    message = str(caught.value)
    assert message.startswith("switch s1 exited with code 1:")
    assert "p4reduce-switch: error: cannot listen on 127.0.0.1:" in message
    assert (tmp_path / "pcaps" / "s1").is_dir()  # created for it: bmv2 would exit without it


@needs_mininet
@pytest.mark.root
def test_a_switch_or_controller_that_dies_later_is_reported_with_its_log(lab: object, tmp_path: Path) -> None:
    topo = generate("star", 1)
    grpc_ports = {"s1": free_port()}
    program, p4info = build_program(ROOT / "build")
    config = tmp_path / "controller.yaml"
    config.write_text(lab.controller_config(topo, grpc_ports, program, p4info))  # type: ignore[attr-defined]
    net = lab.build_network(topo, "soft", grpc_ports, None, 0.0, switch_log="info")  # type: ignore[attr-defined]
    for switch in net.switches:
        switch.log_dir, switch.pcap_dir = tmp_path, None
    controller = None
    log = tmp_path / "controller.log"
    try:
        net.start()
        controller = start_controller(config, free_port(), log)
        lab.check_running(net, controller, log)  # type: ignore[attr-defined]
        controller.kill()
        controller.wait(timeout=10)
        with pytest.raises(LaunchError, match=r"the controller exited with code -9; .*controller.log ends:"):
            lab.check_running(net, controller, log)  # type: ignore[attr-defined]
        [switch] = net.switches
        switch.process.kill()
        switch.process.wait(timeout=10)
        with pytest.raises(LaunchError) as caught:
            lab.check_running(net, controller, log)  # type: ignore[attr-defined]
        assert str(caught.value).startswith(f"switch s1 exited with code -9; {tmp_path / 's1.log'} ends:\n")
        assert "pipeline committed" in str(caught.value)  # the end of its log: what it did last
    finally:
        if controller is not None and controller.poll() is None:
            controller.kill()
        net.stop()
