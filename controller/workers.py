"""Turning a worker's JoinJob address into what the switch matches on.

A worker knows its IPv4 address and UDP port; its MAC and switch port come
from the request when it knows them, else from the topology's hosts, else
from the switch's `default_host_port` (the rootless embedded switch puts
every loopback worker on one port). Without a MAC the worker gets the
locally administered 02:00:<its IPv4 bytes>, the embedded switch's own
convention for hosts behind a UDP port.
"""

from __future__ import annotations

import grpc

from contracts.protocol import MAX_WORKERS
from controller.addresses import format_ipv4, parse_ipv4, parse_mac
from controller.config import SwitchConfig, Topology
from controller.errors import ConfigError, JobError
from controller.job import Worker


def resolve_worker(
    topology: Topology,
    switch: SwitchConfig,
    rank: int,
    ipv4: str,
    udp_port: int,
    mac: str = "",
    switch_port: int = 0,
) -> Worker:
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    if not 0 <= rank < MAX_WORKERS:
        raise JobError(f"rank {rank} is outside 0..{MAX_WORKERS - 1}", grpc.StatusCode.OUT_OF_RANGE)
    try:
        ip = parse_ipv4(ipv4, "worker address")
        mac_value = parse_mac(mac, "worker MAC") if mac else None
    except ConfigError as exc:
        raise JobError(str(exc), invalid) from None
    if ip == 0 or ip == 0xFFFFFFFF or ip >> 28 == 0xE:
        raise JobError(
            f"worker address {format_ipv4(ip)} is not one the switch will ever see as a packet's source: "
            "join from the address the worker sends from (bind its socket to it)",
            invalid,
        )
    if not 1 <= udp_port <= 65535:
        raise JobError(f"worker UDP port {udp_port} is outside 1..65535", invalid)
    if switch_port > 511:
        raise JobError(f"switch port {switch_port} is outside 1..511", invalid)
    host = topology.host_by_ipv4(switch.name, ip)
    port = switch_port or (host.port if host else switch.default_host_port)
    if port is None:
        raise JobError(
            f"worker {format_ipv4(ip)} is not a host of switch {switch.name} in the topology and gave no "
            "switch port (add it to hosts: or set the switch's default_host_port)",
            invalid,
        )
    if mac_value is None:
        mac_value = host.mac if host else (0x0200 << 32) | ip
    return Worker(rank=rank, ipv4=ip, udp_port=udp_port, mac=mac_value, switch_port=port)
