"""Free ports for the servers tests start, chosen below the kernel's ephemeral range.

A port the kernel gives a bind to port 0 is ephemeral: between the test
closing that probe socket and its server binding the port, any outgoing
connection on the machine (a gRPC client of the same test, another test
run) may get it as its local port, and the server fails with "address in
use". Ports below the ephemeral range are never handed out that way, so
only another listener could take one, and the probe bind rules that out
at the moment of choosing.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20000  # below: well-known and registered services a test must not shadow
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.Random()  # seeded from the OS: parallel runs pick different ports


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM, host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, outside the ephemeral range when the range leaves room."""
    top = _ephemeral_start() - 1
    for _ in range(200):
        port = _random.randint(LOWEST, top) if top > LOWEST else 0
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise RuntimeError(f"no free port in {LOWEST}..{top} on {host}")


def free_tcp_port() -> int:
    return free_port(socket.SOCK_STREAM)


def free_udp_port() -> int:
    return free_port(socket.SOCK_DGRAM)
