"""Parsing and printing of the addresses users type: MAC, IPv4, host:port.

Values travel as ints inside the controller (P4Runtime encodes ints
canonically), and as the usual text forms at the edges.
"""

from __future__ import annotations

import ipaddress
import re

from controller.errors import ConfigError

_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


def parse_mac(text: str, what: str = "MAC address") -> int:
    if not isinstance(text, str) or not _MAC.match(text.strip()):
        raise ConfigError(f"{what}: {text!r} is not a MAC address like 02:00:00:00:00:01")
    return int(re.sub(r"[:-]", "", text.strip()), 16)


def format_mac(value: int) -> str:
    raw = f"{value:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


def parse_ipv4(text: str, what: str = "IPv4 address") -> int:
    try:
        return int(ipaddress.IPv4Address(str(text).strip()))
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not an IPv4 address like 10.0.0.1") from None


def format_ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def parse_endpoint(text: str, what: str = "address") -> str:
    """Check HOST:PORT (IPv6 hosts in brackets) and return it unchanged for gRPC."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{what}: {text!r} is not HOST:PORT (for example 127.0.0.1:9559)")
    return str(text)


def parse_metrics_endpoint(text: object, what: str = "metrics address") -> tuple[str, int]:
    """`HOST:PORT` or a bare `PORT` (then loopback: metrics name jobs and switches) -> (host, port)."""
    value = str(text).strip()
    endpoint = parse_endpoint(f"127.0.0.1:{value}" if value.isdigit() else value, what)
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


def parse_port_number(value: object, what: str, maximum: int = 511) -> int:
    """An integer in 0..maximum (switch ports are 9 bits in v1model)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ConfigError(f"{what}: {value!r} is not an integer in 0..{maximum}")
    return value
