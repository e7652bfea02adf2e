"""The topology/config file: switches, hosts and controller settings (YAML or JSON).

One file describes a lab or rack; `p4reduce-ctl provision` and
`p4reduce-ctl serve` read it. Paths inside it are relative to the file.
Validation is complete before anything touches a switch, and every mistake
is reported as one line naming the offending key (docs/controller.md has
the schema and an example).
"""

from __future__ import annotations

import json
import os
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts.protocol import MAX_WORKERS, SLOT_MASK, UDP_PORT
from controller.addresses import (
    parse_endpoint,
    parse_ipv4,
    parse_mac,
    parse_metrics_endpoint,
    parse_port_number,
)
from controller.device_config import Target
from controller.errors import ConfigError
from controller.mastership import DEFAULT_RETRY_SECONDS, Policy

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_POOL_SIZE = 256  # 128 slots in flight per call: the native engine needs them (docs/performance.md)
MIN_POOL_SIZE = 2  # a call uses half of its job's pool (docs/protocol.md, *Host rules*)
MAX_POOL_SIZE = SLOT_MASK + 1  # the 15-bit slot field
DEFAULT_JOIN_TIMEOUT = 60.0
DEFAULT_ELECTION_ID = 10
DEFAULT_ID_QUARANTINE = 10.0  # seconds a deleted job's id rests before another job gets it
# Seconds a rank whose WatchJob stream closed without a LeaveJob has to open it again before its peers
# are told it is gone. A process that dies closes its stream at once (the kernel closes its sockets); a
# live rank whose stream broke opens it again after 0.1 s (hostlib/controller_link.py). Half a second
# names a dead rank well within a second and leaves a reconnect five times its usual time.
DEFAULT_DISCONNECT_GRACE = 0.5
# HTTP/2 keepalive of the job API: the daemon pings each client connection this often and closes one whose
# answer does not come within the timeout, so a rank cut off without its stream closing (a partition, a
# frozen host) is found in about 15 s, before its 30 s lease; 0 turns the pings off.
DEFAULT_KEEPALIVE_SECONDS = 10.0
DEFAULT_KEEPALIVE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class HostConfig:
    name: str
    ipv4: int
    mac: int
    switch: str
    port: int


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    address: str
    device_id: int
    p4info: Path
    device_config: Path
    agg_ipv4: int
    agg_mac: int
    agg_udp_port: int = UDP_PORT
    flood_ports: tuple[int, ...] = ()
    default_host_port: int | None = None
    target: Target | None = None  # None: any; the device config's kind is then confirmed by the push
    # An aggregation node of last resort: a host running p4reduce-switch that takes a job when the switch
    # it was asked for is full or down; never the default switch, never part of the fabric's links.
    last_resort: bool = False
    # Queue depth (packets) at which its ports mark aggregation traffic CE (None: no marking entries);
    # only targets that report queue depths mark (docs/protocol.md, *Congestion*).
    ecn_threshold: int | None = None


@dataclass(frozen=True)
class ControllerSettings:
    listen: str = DEFAULT_LISTEN
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    default_pool_size: int = DEFAULT_POOL_SIZE
    join_timeout_seconds: float = DEFAULT_JOIN_TIMEOUT
    election_id: int = DEFAULT_ELECTION_ID
    id_quarantine_seconds: float = DEFAULT_ID_QUARANTINE
    disconnect_grace_seconds: float = DEFAULT_DISCONNECT_GRACE
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS  # 0: no keepalive pings
    keepalive_timeout_seconds: float = DEFAULT_KEEPALIVE_TIMEOUT_SECONDS
    metrics: tuple[str, int] | None = None  # Prometheus /metrics (host, port); None: off
    mastership: Policy = (
        Policy.RECLAIM
    )  # what the daemon does when it loses a switch (controller/mastership.py)
    mastership_retry_seconds: float = DEFAULT_RETRY_SECONDS


@dataclass(frozen=True)
class LinkConfig:
    """A cable between two switches' ports (the fabric an aggregation tree is built over)."""

    a: str
    a_port: int
    b: str
    b_port: int

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.a, self.a_port), (self.b, self.b_port)

    def __str__(self) -> str:
        return f"{self.a}:{self.a_port} - {self.b}:{self.b_port}"


@dataclass(frozen=True)
class TenantConfig:
    """A team sharing the daemon: its access token, and its quotas (None: no limit)."""

    name: str
    token: str = field(repr=False)
    max_jobs: int | None = None  # jobs on all switches together
    max_slots: int | None = None  # slots on any one switch

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Topology:
    switches: tuple[SwitchConfig, ...]
    hosts: tuple[HostConfig, ...] = ()
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    tenants: tuple[TenantConfig, ...] = ()
    links: tuple[LinkConfig, ...] = ()

    def switch(self, name: str = "") -> SwitchConfig:
        """The named switch; with no name, the first that is not an aggregation node of last resort."""
        if not name:
            return next((s for s in self.switches if not s.last_resort), self.switches[0])
        for sw in self.switches:
            if sw.name == name:
                return sw
        known = ", ".join(sw.name for sw in self.switches)
        raise ConfigError(f"unknown switch {name!r} (configured: {known})")

    def hosts_of(self, switch: str) -> list[HostConfig]:
        return [h for h in self.hosts if h.switch == switch]

    def host_by_ipv4(self, switch: str, ipv4: int) -> HostConfig | None:
        return next((h for h in self.hosts if h.switch == switch and h.ipv4 == ipv4), None)


def load(path: str | Path) -> Topology:
    """Read and validate a config file; ConfigError names the file and the bad key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {first}"
        ) from None
    try:
        return parse(data, path.resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse(data: object, base_dir: Path) -> Topology:
    """Build a Topology from already-decoded YAML/JSON data; paths resolve against base_dir."""
    top = _mapping(
        data, "the file", required={"switches"}, optional={"hosts", "controller", "tenants", "links"}
    )
    switch_list = _list(top["switches"], "switches")
    if not switch_list:
        raise ConfigError("switches: at least one switch is needed")
    switches = tuple(_switch(item, f"switches[{i}]", base_dir) for i, item in enumerate(switch_list))
    _unique([s.name for s in switches], "switch name")
    _unique([s.address + f"/{s.device_id}" for s in switches], "switch grpc address and device_id")
    hosts = tuple(_host(item, f"hosts[{i}]") for i, item in enumerate(_list(top.get("hosts", []), "hosts")))
    names = {s.name for s in switches}
    for i, host in enumerate(hosts):
        if host.switch not in names:
            raise ConfigError(f"hosts[{i}].switch: unknown switch {host.switch!r}")
    _unique([h.name for h in hosts], "host name")
    _unique([f"{h.switch}/{h.mac:x}" for h in hosts], "host MAC on one switch")
    _unique([f"{h.switch}/{h.ipv4}" for h in hosts], "host IPv4 on one switch")
    controller = _controller(top.get("controller", {}))
    tenant_list = _list(top.get("tenants", []), "tenants")
    tenants = tuple(_tenant(item, f"tenants[{i}]") for i, item in enumerate(tenant_list))
    _unique([t.name for t in tenants], "tenant name")
    if len({t.token for t in tenants}) != len(tenants):
        raise ConfigError("tenants: two tenants have the same token (each needs its own)")
    link_list = _list(top.get("links", []), "links")
    links = tuple(_link(item, f"links[{i}]", names) for i, item in enumerate(link_list))
    ends = [f"{sw}:{port}" for link in links for sw, port in ((link.a, link.a_port), (link.b, link.b_port))]
    _unique(ends, "link end (a port carries one cable)")
    for link in links:
        for end in (link.a, link.b):
            if next(s for s in switches if s.name == end).last_resort:
                raise ConfigError(
                    f"links: {end} is an aggregation node of last resort (a host), not in the fabric"
                )
    for host in hosts:
        if f"{host.switch}:{host.port}" in ends:
            raise ConfigError(f"host {host.name!r} is on port {host.port} of {host.switch}, where a link is")
    return Topology(switches=switches, hosts=hosts, controller=controller, tenants=tenants, links=links)


def _link(item: object, where: str, switches: AbstractSet[str]) -> LinkConfig:
    """`[s1:PORT, s2:PORT]`: both ends a known switch's port, not the same switch."""
    ends = _list(item, where)
    if len(ends) != 2:
        raise ConfigError(f"{where}: expected two ends like [leaf1:9, spine:1], got {len(ends)}")
    parsed = []
    for end in ends:
        switch, sep, port = str(end).rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"{where}: {end!r} is not SWITCH:PORT")
        if switch not in switches:
            raise ConfigError(f"{where}: unknown switch {switch!r}")
        parsed.append((switch, parse_port_number(int(port), f"{where}: {end!r} port")))
    (a, a_port), (b, b_port) = parsed
    if a == b:
        raise ConfigError(f"{where}: both ends are on switch {a!r}")
    return LinkConfig(a, a_port, b, b_port)


MIN_TENANT_TOKEN = 16


def _tenant(item: object, where: str) -> TenantConfig:
    m = _mapping(item, where, required={"name"}, optional={"token", "token_env", "max_jobs", "max_slots"})
    name = _name(m["name"], f"{where}.name")
    if ("token" in m) == ("token_env" in m):
        raise ConfigError(f"{where}: give token or token_env (the name of an environment variable), not both")
    if "token_env" in m:
        variable = str(m["token_env"])
        token = os.environ.get(variable, "")
        if not token:
            raise ConfigError(f"{where}.token_env: environment variable {variable} is not set")
    else:
        token = str(m["token"])
    if len(token) < MIN_TENANT_TOKEN or not token.isprintable():
        raise ConfigError(f"{where}: its token must be at least {MIN_TENANT_TOKEN} printable characters")
    limits = {}
    for key in ("max_jobs", "max_slots"):
        value = m.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{where}.{key}: {value!r} is not a whole number >= 0")
        limits[key] = value
    return TenantConfig(name, token, **limits)


def _switch(item: object, where: str, base_dir: Path) -> SwitchConfig:
    m = _mapping(
        item,
        where,
        required={"name", "grpc", "p4info", "device_config", "aggregation"},
        optional={"device_id", "flood_ports", "default_host_port", "target", "last_resort", "ecn_threshold"},
    )
    agg = _mapping(m["aggregation"], f"{where}.aggregation", required={"ipv4", "mac"}, optional={"udp_port"})
    p4info = _path(m["p4info"], f"{where}.p4info", base_dir)
    device_config = _path(m["device_config"], f"{where}.device_config", base_dir)
    device_id = m.get("device_id", 1)
    if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
        raise ConfigError(f"{where}.device_id: {device_id!r} is not a non-negative integer")
    flood = tuple(
        parse_port_number(p, f"{where}.flood_ports[{i}]")
        for i, p in enumerate(_list(m.get("flood_ports", []), f"{where}.flood_ports"))
    )
    default_port = m.get("default_host_port")
    last_resort = m.get("last_resort", False)
    if not isinstance(last_resort, bool):
        raise ConfigError(f"{where}.last_resort: {last_resort!r} is not true or false")
    if last_resort and default_port is None:
        raise ConfigError(
            f"{where}: an aggregation node of last resort needs default_host_port (ranks reach it over IP)"
        )
    ecn = m.get("ecn_threshold")
    if ecn is not None and (isinstance(ecn, bool) or not isinstance(ecn, int) or not 0 <= ecn < 1 << 19):
        raise ConfigError(f"{where}.ecn_threshold: {ecn!r} is not a queue depth in packets (0..524287)")
    target = m.get("target")
    if target is not None and target not in {t.value for t in Target}:
        choices = " or ".join(t.value for t in Target)
        raise ConfigError(f"{where}.target: {target!r} is not a switch target ({choices})")
    return SwitchConfig(
        name=_name(m["name"], f"{where}.name"),
        address=parse_endpoint(m["grpc"], f"{where}.grpc"),
        device_id=device_id,
        p4info=p4info,
        device_config=device_config,
        agg_ipv4=parse_ipv4(agg["ipv4"], f"{where}.aggregation.ipv4"),
        agg_mac=parse_mac(agg["mac"], f"{where}.aggregation.mac"),
        agg_udp_port=parse_port_number(agg.get("udp_port", UDP_PORT), f"{where}.aggregation.udp_port", 65535),
        flood_ports=flood,
        default_host_port=None
        if default_port is None
        else parse_port_number(default_port, f"{where}.default_host_port"),
        target=None if target is None else Target(target),
        last_resort=last_resort,
        ecn_threshold=ecn,
    )


def _host(item: object, where: str) -> HostConfig:
    m = _mapping(item, where, required={"name", "ipv4", "mac", "switch", "port"})
    return HostConfig(
        name=_name(m["name"], f"{where}.name"),
        ipv4=parse_ipv4(m["ipv4"], f"{where}.ipv4"),
        mac=parse_mac(m["mac"], f"{where}.mac"),
        switch=_name(m["switch"], f"{where}.switch"),
        port=parse_port_number(m["port"], f"{where}.port"),
    )


def _controller(item: object) -> ControllerSettings:
    m = _mapping(
        item,
        "controller",
        optional={
            "listen",
            "lease_seconds",
            "default_pool_size",
            "join_timeout_seconds",
            "election_id",
            "id_quarantine_seconds",
            "disconnect_grace_seconds",
            "keepalive_seconds",
            "keepalive_timeout_seconds",
            "metrics",
            "mastership",
            "mastership_retry_seconds",
        },  # fmt: skip
    )
    pool = m.get("default_pool_size", DEFAULT_POOL_SIZE)
    if isinstance(pool, bool) or not isinstance(pool, int) or not 2 <= pool <= MAX_POOL_SIZE:
        raise ConfigError(
            f"controller.default_pool_size: {pool!r} is not an integer in 2..{MAX_POOL_SIZE} "
            "(each call uses half of it; the switch's own slot count is the upper bound at run time)"
        )
    election = m.get("election_id", DEFAULT_ELECTION_ID)
    if isinstance(election, bool) or not isinstance(election, int) or not 1 <= election < 2**128:
        raise ConfigError(f"controller.election_id: {election!r} is not a positive integer")
    mastership = m.get("mastership", Policy.RECLAIM.value)
    if mastership not in {p.value for p in Policy}:
        raise ConfigError(
            f"controller.mastership: {mastership!r} is not a policy (reclaim: take a switch back by the "
            "P4Runtime rule once its other primary has gone; yield: stay backup)"
        )
    return ControllerSettings(
        listen=parse_endpoint(m.get("listen", DEFAULT_LISTEN), "controller.listen"),
        lease_seconds=_seconds(m.get("lease_seconds", DEFAULT_LEASE_SECONDS), "controller.lease_seconds"),
        default_pool_size=pool,
        join_timeout_seconds=_seconds(
            m.get("join_timeout_seconds", DEFAULT_JOIN_TIMEOUT), "controller.join_timeout_seconds"
        ),
        election_id=election,
        id_quarantine_seconds=_seconds(
            m.get("id_quarantine_seconds", DEFAULT_ID_QUARANTINE),
            "controller.id_quarantine_seconds",
            zero=True,
        ),
        disconnect_grace_seconds=_seconds(
            m.get("disconnect_grace_seconds", DEFAULT_DISCONNECT_GRACE),
            "controller.disconnect_grace_seconds",
            zero=True,
        ),
        keepalive_seconds=_seconds(
            m.get("keepalive_seconds", DEFAULT_KEEPALIVE_SECONDS), "controller.keepalive_seconds", zero=True
        ),
        keepalive_timeout_seconds=_seconds(
            m.get("keepalive_timeout_seconds", DEFAULT_KEEPALIVE_TIMEOUT_SECONDS),
            "controller.keepalive_timeout_seconds",
        ),
        metrics=parse_metrics_endpoint(m["metrics"], "controller.metrics") if m.get("metrics") else None,
        mastership=Policy(mastership),
        mastership_retry_seconds=_seconds(
            m.get("mastership_retry_seconds", DEFAULT_RETRY_SECONDS), "controller.mastership_retry_seconds"
        ),
    )


def check_world_size(world_size: int) -> None:
    if not 1 <= world_size <= MAX_WORKERS:
        raise ConfigError(f"world size {world_size} is outside 1..{MAX_WORKERS}")


def _mapping(
    item: object,
    where: str,
    required: AbstractSet[str] = frozenset(),
    optional: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(item).__name__}")
    missing = sorted(required - item.keys())
    if missing:
        raise ConfigError(f"{where}: missing key {', '.join(missing)}")
    unknown = sorted(str(k) for k in item.keys() - required - optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise ConfigError(f"{where}: unknown key {', '.join(unknown)} (allowed: {allowed})")
    return item


def _list(item: object, where: str) -> list[Any]:
    if not isinstance(item, list):
        raise ConfigError(f"{where}: expected a list, got {type(item).__name__}")
    return item


def _name(item: object, where: str) -> str:
    if not isinstance(item, str) or not item.strip():
        raise ConfigError(f"{where}: expected a non-empty name")
    return item


def _path(item: object, where: str, base_dir: Path) -> Path:
    if not isinstance(item, str) or not item:
        raise ConfigError(f"{where}: expected a file path")
    return (base_dir / item).resolve()


def _seconds(item: object, where: str, zero: bool = False) -> float:
    if isinstance(item, bool) or not isinstance(item, int | float) or not (item >= 0 if zero else item > 0):
        raise ConfigError(f"{where}: {item!r} is not a {'' if zero else 'positive '}number of seconds")
    return float(item)


def _unique(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ConfigError(f"duplicate {what} {v!r}")
        seen.add(v)
