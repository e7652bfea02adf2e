"""Lab topologies: a JSON file (mininet/topos/*.json) or a generated star/line.

A topology names switches (each with an aggregation address the controller
installs), hosts (IPv4, MAC, the switch they hang off) and switch-to-switch
links. Port numbers are derived, not written: a switch's hosts take ports
1, 2, ... in file order, then its switch links in file order. The switch
links must form a tree (a star, a line, a leaf–spine fabric with one
spine): the lab's switches flood unknown and broadcast frames over every
link, which a loop would circulate for ever.

Which switches aggregate is the lab's choice, not the file's
(mininet/lab.py, --aggregate-at): by default each switch aggregates its own
hosts and the controller joins them into a tree; or one switch aggregates
every host and the others only bridge.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,9}$")  # Mininet's interface names (NAME-ethN) stay within 15 bytes


class TopologyError(ValueError):
    """The topology file is malformed; the message names the problem in one line."""


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
        """The first switch: where a single-switch lab aggregates when nothing else is said."""
        return self.switches[0]

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise TopologyError(f"unknown switch {name!r} (the topology has {', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.switches]

    def hosts_of(self, switch: str) -> list[Host]:
        return [h for h in self.hosts if h.switch == switch]

    def ports(self, switch: str) -> list[int]:
        ports = [h.port for h in self.hosts if h.switch == switch]
        return sorted(ports + self.link_ports(switch))

    def link_ports(self, switch: str) -> list[int]:
        """`switch`'s ports that carry a switch link."""
        ports = [pa for a, pa, _, _ in self.links if a == switch]
        return sorted(ports + [pb for _, _, b, pb in self.links if b == switch])

    def next_hop(self, switch: str, target: str) -> int:
        """The port of `switch` on the (only) path towards switch `target`; 0 when they are the same."""
        if switch == target:
            return 0
        first_port: dict[str, int] = {switch: 0}
        queue = deque([switch])
        while queue:
            here = queue.popleft()
            for there, port in self._neighbours(here):
                if there not in first_port:
                    first_port[there] = first_port[here] or port
                    if there == target:
                        return first_port[there]
                    queue.append(there)
        raise TopologyError(f"switch {target} is not reachable from {switch} over the switch links")

    def port_towards(self, switch: str, host: Host) -> int:
        """The port of `switch` that leads to `host`: its own port, or the link on the way to its switch."""
        return host.port if host.switch == switch else self.next_hop(switch, host.switch)

    def l2_entries(self, switch: str) -> list[tuple[str, int]]:
        """(MAC, port) for every host and every other switch's aggregation address, as `switch` reaches them.

        The switches do not learn addresses, and the controller knows only the
        hosts it was told are on a switch; without these a frame for a host
        behind another switch is flooded to every host on the way, which
        would load the very links an experiment measures.
        """
        entries = [(h.mac, self.port_towards(switch, h)) for h in self.hosts]
        return entries + [
            (s.agg_mac, self.next_hop(switch, s.name)) for s in self.switches if s.name != switch
        ]

    def _neighbours(self, switch: str) -> list[tuple[str, int]]:
        out = [(b, pa) for a, pa, b, _ in self.links if a == switch]
        return out + [(a, pb) for a, _, b, pb in self.links if b == switch]


def load(path: Path) -> Topology:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TopologyError(f"{path}: {error}") from None
    return parse(doc, str(path))


def parse(doc: object, where: str = "topology") -> Topology:
    """Check everything the lab relies on; each mistake is one line naming the field."""
    if not isinstance(doc, dict):
        raise TopologyError(f"{where}: expected a JSON object with switches, hosts and switch_links")
    unknown = sorted(set(doc) - {"comment", "switches", "hosts", "switch_links"})
    if unknown:
        raise TopologyError(f"{where}: unknown key {unknown[0]!r} (comment, switches, hosts, switch_links)")
    switches = tuple(
        _switch(s, f"{where}: switches[{i}]") for i, s in enumerate(_list(doc, "switches", where))
    )
    if not switches:
        raise TopologyError(f"{where}: switches must be non-empty")
    _unique([s.name for s in switches], f"{where}: switch name")
    next_port = {s.name: 1 for s in switches}
    hosts = []
    for i, h in enumerate(_list(doc, "hosts", where)):
        host = _host(h, f"{where}: hosts[{i}]", next_port)
        hosts.append(host)
        next_port[host.switch] += 1
    if not hosts:
        raise TopologyError(f"{where}: no hosts")
    _unique([h.name for h in hosts] + [s.name for s in switches], f"{where}: node name")
    _unique([h.ipv4 for h in hosts] + [s.agg_ipv4 for s in switches], f"{where}: IPv4 address")
    _unique([h.mac for h in hosts] + [s.agg_mac for s in switches], f"{where}: MAC address")
    links = []
    for i, link in enumerate(doc.get("switch_links", [])):
        if not (isinstance(link, list) and len(link) == 2 and all(end in next_port for end in link)):
            raise TopologyError(f"{where}: switch_links[{i}]: {link!r} is not a pair of known switches")
        a, b = link
        if a == b:
            raise TopologyError(f"{where}: switch_links[{i}]: both ends are {a}")
        links.append((a, next_port[a], b, next_port[b]))
        next_port[a] += 1
        next_port[b] += 1
    topo = Topology(switches, tuple(hosts), tuple(links))
    _check_tree(topo, where)
    return topo


def _check_tree(topo: Topology, where: str) -> None:
    """Every switch reachable, and no loop: n switches need exactly n - 1 links to be a tree."""
    first = topo.switches[0].name
    for s in topo.switches[1:]:
        try:
            topo.next_hop(first, s.name)
        except TopologyError:
            raise TopologyError(
                f"{where}: switch {s.name} is not connected to {first} by switch_links"
            ) from None
    if len(topo.links) != len(topo.switches) - 1:
        raise TopologyError(
            f"{where}: the switch links form a loop (or a parallel link): the lab floods over every link, "
            "so they must form a tree"
        )


def _list(doc: dict, key: str, where: str) -> list:
    value = doc.get(key)
    if not isinstance(value, list):
        raise TopologyError(f"{where}: {key} must be a list")
    return value


def _fields(item: object, where: str, required: set[str]) -> dict:
    if not isinstance(item, dict):
        raise TopologyError(f"{where}: expected an object")
    missing, extra = sorted(required - set(item)), sorted(set(item) - required)
    if missing or extra:
        problem = f"missing field {missing[0]!r}" if missing else f"unknown field {extra[0]!r}"
        raise TopologyError(f"{where}: {problem}")
    return item


def _switch(item: object, where: str) -> Switch:
    s = _fields(item, where, {"name", "aggregation"})
    agg = _fields(s["aggregation"], f"{where}.aggregation", {"ipv4", "mac"})
    return Switch(_name(s["name"], where), _ipv4(agg["ipv4"], where), _mac(agg["mac"], where))


def _host(item: object, where: str, switches: dict[str, int]) -> Host:
    h = _fields(item, where, {"name", "ipv4", "mac", "switch"})
    if h["switch"] not in switches:
        raise TopologyError(f"{where}: host {h['name']} hangs off unknown switch {h['switch']!r}")
    return Host(_name(h["name"], where), _ipv4(h["ipv4"], where), _mac(h["mac"], where), h["switch"],
                switches[h["switch"]])  # fmt: skip


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise TopologyError(f"{where}: name {value!r} is not 1-10 letters and digits, a letter first")
    return value


def _ipv4(value: object, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise TopologyError(f"{where}: {value!r} is not an IPv4 address like 10.0.0.1") from None


def _mac(value: object, where: str) -> str:
    if not isinstance(value, str) or not MAC.match(value):
        raise TopologyError(f"{where}: {value!r} is not a MAC address like 02:00:00:00:00:01")
    return value


def _unique(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise TopologyError(f"{what} {value} is used twice")
        seen.add(value)


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
