"""A worker whose route to the switch cannot carry the job's DATA in one frame is refused at join.

The kernel would fragment every DATA and the switch never reassembles: without
the check, a K too large for the link is silent loss and then a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from contracts.protocol import SUPPORTED_VALUES_PER_PACKET
from hostlib.communicator import Communicator, JobSpec, PathMtuError
from tests.switch.switch_netns import require_root_netns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec(k: int) -> JobSpec:
    return JobSpec(
        job_id=3, world_size=2, pool_size=8, switch_address=("127.0.0.1", 20562), values_per_packet=k, key=1
    )


def test_loopback_carries_every_k() -> None:
    for k in SUPPORTED_VALUES_PER_PACKET:
        Communicator(spec(k), 0, ("127.0.0.2", 0)).close()


def test_a_route_whose_mtu_is_too_small_for_k_is_refused_with_the_size_it_needs() -> None:
    require_root_netns()
    namespace = f"p4rmtu{os.getpid() % 100000}"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from tests.hostlib.test_path_mtu import spec
        from hostlib.communicator import Communicator, PathMtuError
        Communicator(spec(256), 0, ("127.0.0.2", 0)).close()  # 1076-byte packets fit 1500
        try:
            Communicator(spec(1024), 0, ("127.0.0.2", 0))
        except PathMtuError as error:
            print(error)
        else:
            print("accepted")
        """
    )
    subprocess.run(["ip", "netns", "add", namespace], check=True, timeout=10)
    try:
        subprocess.run(
            ["ip", "-n", namespace, "link", "set", "lo", "mtu", "1500", "up"], check=True, timeout=10
        )
        done = subprocess.run(
            ["ip", "netns", "exec", namespace, sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
    finally:
        subprocess.run(["ip", "netns", "del", namespace], timeout=10)
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert "MTU of 1500 bytes" in message and "4148-byte IPv4 packets" in message, message
    assert "ip link set DEV mtu 4148" in message


def test_the_error_is_a_value_error_callers_already_catch() -> None:
    assert issubclass(PathMtuError, ValueError)
