"""How a JoinJob address becomes what the switch matches: port and MAC from request, topology or defaults."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from controller import config
from controller.errors import JobError
from controller.workers import resolve_worker


def topology(default_port: int | None = None) -> config.Topology:
    switch: dict[str, object] = {
        "name": "s1",
        "grpc": "127.0.0.1:9559",
        "p4info": "p",
        "device_config": "d",
        "aggregation": {"ipv4": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
    }
    if default_port is not None:
        switch["default_host_port"] = default_port
    hosts = [{"name": "h1", "ipv4": "10.0.0.1", "mac": "02:00:00:00:00:01", "switch": "s1", "port": 7}]
    return config.parse({"switches": [switch], "hosts": hosts}, Path("."))


def test_a_known_host_gets_its_port_and_mac_from_the_topology() -> None:
    topo = topology()
    worker = resolve_worker(topo, topo.switch(), 3, "10.0.0.1", 40000)
    assert (worker.rank, worker.ipv4, worker.udp_port, worker.switch_port, worker.mac) == (
        3, 0x0A000001, 40000, 7, 0x020000000001,
    )  # fmt: skip


def test_the_request_overrides_the_topology() -> None:
    topo = topology()
    worker = resolve_worker(topo, topo.switch(), 0, "10.0.0.1", 40000, mac="02:aa:00:00:00:01", switch_port=9)
    assert (worker.switch_port, worker.mac) == (9, 0x02AA00000001)


def test_an_unknown_host_sits_behind_the_default_port_with_a_synthesized_mac() -> None:
    topo = topology(default_port=1)
    worker = resolve_worker(topo, topo.switch(), 0, "127.0.0.12", 5000)
    assert (worker.switch_port, worker.mac) == (1, 0x02007F00000C)  # 02:00:<IPv4 bytes>


@pytest.mark.parametrize(
    ("rank", "ipv4", "udp", "mac", "port", "code", "message"),
    [
        (
            0,
            "10.0.0.99",
            5000,
            "",
            0,
            grpc.StatusCode.INVALID_ARGUMENT,
            "10.0.0.99 is not a host of switch s1",
        ),
        (0, "10.0.0.1", 0, "", 0, grpc.StatusCode.INVALID_ARGUMENT, "worker UDP port 0 is outside 1..65535"),
        (0, "10.0.0.1", 5000, "nope", 0, grpc.StatusCode.INVALID_ARGUMENT, "worker MAC: 'nope' is not a MAC"),
        (0, "10.0.0.1", 5000, "", 600, grpc.StatusCode.INVALID_ARGUMENT, "switch port 600 is outside 1..511"),
        (32, "10.0.0.1", 5000, "", 0, grpc.StatusCode.OUT_OF_RANGE, "rank 32 is outside 0..31"),
    ],
)
def test_bad_addresses_are_refused(
    rank: int, ipv4: str, udp: int, mac: str, port: int, code: grpc.StatusCode, message: str
) -> None:
    topo = topology()
    with pytest.raises(JobError) as error:
        resolve_worker(topo, topo.switch(), rank, ipv4, udp, mac, port)
    assert error.value.status == code
    assert message in str(error.value)
