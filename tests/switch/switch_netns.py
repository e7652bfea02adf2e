"""Two hosts in their own network namespaces, each wired by a veth pair to the root namespace.

The switch opens the root-namespace ends (`-i 1@<a>`, `-i 2@<b>`). Everything
is created with unique names and removed on exit, even after a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def require_root_netns() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces and AF_PACKET)")
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2 (ip netns)")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip("ip netns is not available here")


@dataclass
class Host:
    namespace: str
    ip: str
    mac: str

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.namespace, *command], capture_output=True, text=True, timeout=timeout
        )


@contextmanager
def two_hosts() -> Iterator[tuple[list[str], list[Host]]]:
    """Yield (switch-side interface names, hosts) for hosts 10.77.0.1 and 10.77.0.2."""
    require_root_netns()
    tag = f"{os.getpid() % 100000}"
    switch_ends = [f"p4s{tag}a", f"p4s{tag}b"]
    hosts = [Host(f"p4rh{tag}{i}", f"10.77.0.{i + 1}", f"02:77:00:00:00:0{i + 1}") for i in range(2)]
    try:
        for end, host in zip(switch_ends, hosts, strict=True):
            _ip("netns", "add", host.namespace)
            _ip("link", "add", end, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
            _ip("link", "set", end, "up")
            _ip("-n", host.namespace, "link", "set", "eth0", "address", host.mac)
            _ip("-n", host.namespace, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            # Offloads would hand the switch frames with unfinished checksums.
            subprocess.run(
                ["ip", "netns", "exec", host.namespace, "ethtool", "-K", "eth0", "tx", "off"],
                capture_output=True,
                timeout=10,
            )
        yield switch_ends, hosts
    finally:
        for end in switch_ends:
            subprocess.run(["ip", "link", "del", end], capture_output=True, timeout=10)
        for host in hosts:
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True, timeout=10)
