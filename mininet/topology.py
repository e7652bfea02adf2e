"""Lab topologies: a JSON file (mininet/topos/*.json) or a generated star/line.

A topology names switches (each with an aggregation address the controller
installs), hosts (IPv4, MAC, the switch they hang off) and switch-to-switch
links. Port numbers are derived, not written: a switch's hosts take ports
1, 2, ... in file order, then its switch links in file order. The first
switch aggregates; hosts on other switches reach it over the switch links,
which is the lab's layer-2 path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class TopologyError(ValueError):
    """The topology file is malformed; the message names the problem."""


@dataclass(frozen=True)
class Host:
    name: str
    ipv4: str
    mac: str
    switch: str
    port: int  # on its own switch


@dataclass(frozen=True)
class Switch:
    name: str
    agg_ipv4: str
    agg_mac: str


@dataclass(frozen=True)
class Topology:
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    links: tuple[tuple[str, int, str, int], ...]  # (switch a, port on a, switch b, port on b)

    @property
    def aggregator(self) -> Switch:
        return self.switches[0]

    def ports(self, switch: str) -> list[int]:
        ports = [h.port for h in self.hosts if h.switch == switch]
        ports += [pa for a, pa, _, _ in self.links if a == switch]
        ports += [pb for _, _, b, pb in self.links if b == switch]
        return sorted(ports)

    def port_towards(self, switch: str, host: Host) -> int:
        """The port of `switch` that leads to `host` (its own port, or the link towards its switch)."""
        if host.switch == switch:
            return host.port
        for a, pa, b, pb in self.links:
            if a == switch and b == host.switch:
                return pa
            if b == switch and a == host.switch:
                return pb
        raise TopologyError(f"{host.name} is not reachable from {switch} over one link")


def load(path: Path) -> Topology:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TopologyError(f"{path}: {error}") from None
    return parse(doc, str(path))


def parse(doc: dict, where: str = "topology") -> Topology:
    try:
        switches = tuple(
            Switch(s["name"], s["aggregation"]["ipv4"], s["aggregation"]["mac"]) for s in doc["switches"]
        )
        names = [s.name for s in switches]
        if not switches or len(set(names)) != len(names):
            raise TopologyError(f"{where}: switches must be non-empty with unique names")
        next_port = dict.fromkeys(names, 1)
        hosts = []
        for h in doc["hosts"]:
            if h["switch"] not in next_port:
                raise TopologyError(f"{where}: host {h['name']} hangs off unknown switch {h['switch']}")
            hosts.append(Host(h["name"], h["ipv4"], h["mac"], h["switch"], next_port[h["switch"]]))
            next_port[h["switch"]] += 1
        links = []
        for a, b in doc.get("switch_links", []):
            if a not in next_port or b not in next_port or a == b:
                raise TopologyError(f"{where}: bad switch link {a}-{b}")
            links.append((a, next_port[a], b, next_port[b]))
            next_port[a] += 1
            next_port[b] += 1
    except (KeyError, TypeError) as error:
        raise TopologyError(f"{where}: missing or malformed field {error}") from None
    if not hosts:
        raise TopologyError(f"{where}: no hosts")
    return Topology(switches, tuple(hosts), tuple(links))


def generate(kind: str, workers: int) -> Topology:
    """`star`: one switch and N hosts; `line`: two switches, hosts split between them."""
    if not 1 <= workers <= 32:
        raise TopologyError("workers must be 1..32")
    switch_count = 1 if kind == "star" else 2
    if kind not in ("star", "line"):
        raise TopologyError(f"unknown topology kind {kind!r} (star or line)")
    switches = [
        {
            "name": f"s{i + 1}",
            "aggregation": {"ipv4": f"10.0.0.{254 - i}", "mac": f"02:00:00:00:00:{254 - i:02x}"},
        }
        for i in range(switch_count)
    ]
    hosts = [
        {
            "name": f"h{i + 1}",
            "ipv4": f"10.0.0.{i + 1}",
            "mac": f"02:00:00:00:00:{i + 1:02x}",
            "switch": f"s{1 + (i * switch_count) // workers}",
        }
        for i in range(workers)
    ]
    links = [["s1", "s2"]] if switch_count == 2 else []
    return parse({"switches": switches, "hosts": hosts, "switch_links": links}, kind)
