"""The test servers' ports: free, and never one the kernel could hand a client meanwhile."""

from __future__ import annotations

import socket

import pytest

from tests import ports
from tests.ports import LOWEST, _ephemeral_start, free_tcp_port, free_udp_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_listened_on() -> None:
    for pick, kind in ((free_tcp_port, socket.SOCK_STREAM), (free_udp_port, socket.SOCK_DGRAM)):
        port = pick()
        assert LOWEST <= port < _ephemeral_start()
        with socket.socket(socket.AF_INET, kind) as server:
            server.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_tcp_port()))
        held.listen()
        taken = held.getsockname()[1]
        other = free_tcp_port()
        picks = iter([taken, other])  # the random choice lands on the port in use first
        monkeypatch.setattr(ports._random, "randint", lambda low, high: next(picks))
        assert free_tcp_port() == other
