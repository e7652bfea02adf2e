"""A job's aggregation tree over the fabric of switches (docs/protocol.md, *Aggregation trees*).

The fabric is the config file's switches and `links:`. A job's ranks sit
behind some of its switches; the tree is the smallest subtree of the
fabric that reaches all of them, rooted at the switch that joins them:
the one whose farthest rank-holding switch is nearest (ties: the smaller
sum of distances, then the name), so in a leaf–spine fabric ranks on two
leaves are joined at a spine, and ranks on one leaf never leave it. Each
other switch of the tree sends its partial sums to its parent along a
shortest path (ties broken by name, so every run builds the same tree).
In a fabric with several spines, the tree takes one of them: finding the
smallest tree in a general graph is NP-hard (a Steiner tree); shortest
paths from the chosen root are within twice of it and exact in trees.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from controller.config import Topology
from controller.errors import ConfigError


@dataclass(frozen=True)
class Uplink:
    """A child's way to its parent: the child's port towards it, and the parent's port it arrives on."""

    parent: str
    child_port: int
    parent_port: int


@dataclass(frozen=True)
class AggregationTree:
    root: str
    uplinks: dict[str, Uplink]  # child switch -> its way up (the root has none)
    ranked: frozenset[str]  # the switches that have ranks of the job

    @property
    def switches(self) -> list[str]:
        """The tree's switches, root first, then by depth and name (the order to install children last)."""
        return sorted({self.root, *self.uplinks}, key=lambda s: (self.depth(s), s))

    def depth(self, switch: str) -> int:
        depth = 0
        while switch != self.root:
            switch = self.uplinks[switch].parent
            depth += 1
        return depth

    def children(self, switch: str) -> list[str]:
        return sorted(child for child, up in self.uplinks.items() if up.parent == switch)

    def describe(self) -> list[str]:
        """One line per switch: what it aggregates and for whom (for `job show`)."""
        lines = []
        for switch in self.switches:
            below = self.children(switch)
            parts = ["its ranks"] if switch in self.ranked else []
            parts += [f"{c} (port {self.uplinks[c].parent_port})" for c in below]
            up = self.uplinks.get(switch)
            where = "root" if up is None else f"for {up.parent} via port {up.child_port}"
            lines.append(f"{switch}: {where}; aggregates {', '.join(parts)}")
        return lines


def _graph(topology: Topology) -> dict[str, list[tuple[str, int, int]]]:
    """switch -> [(neighbour, our port, its port)], sorted by neighbour name."""
    graph: dict[str, list[tuple[str, int, int]]] = {s.name: [] for s in topology.switches}
    for link in topology.links:
        graph[link.a].append((link.b, link.a_port, link.b_port))
        graph[link.b].append((link.a, link.b_port, link.a_port))
    for edges in graph.values():
        edges.sort()
    return graph


def _distances(graph: dict[str, list[tuple[str, int, int]]], start: str) -> dict[str, int]:
    seen = {start: 0}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there, _, _ in graph[here]:
            if there not in seen:
                seen[there] = seen[here] + 1
                queue.append(there)
    return seen


def tree_for(topology: Topology, ranked: Iterable[str]) -> AggregationTree:
    """The aggregation tree that joins the switches in `ranked`; ConfigError if the fabric cannot."""
    targets = frozenset(ranked)
    if not targets:
        raise ConfigError("a job's tree needs at least one switch with ranks")
    graph = _graph(topology)
    unknown = sorted(targets - graph.keys())
    if unknown:
        raise ConfigError(f"unknown switch {unknown[0]!r} in the job's ranks")
    best: tuple[int, int, str] | None = None
    for candidate in sorted(graph):
        reach = _distances(graph, candidate)
        if not targets <= reach.keys():
            continue
        score = (max(reach[t] for t in targets), sum(reach[t] for t in targets), candidate)
        best = score if best is None or score < best else best
    if best is None:
        first = sorted(targets)[0]
        cut = sorted(t for t in targets if t not in _distances(graph, first))
        raise ConfigError(f"switches {first!r} and {cut[0]!r} are not connected by the config's links")
    root = best[2]
    # Breadth-first from the root, neighbours by name: every switch's parent is its first way back.
    parent: dict[str, Uplink] = {}
    seen = {root}
    queue = deque([root])
    while queue:
        here = queue.popleft()
        for there, port, their_port in graph[here]:
            if there not in seen:
                seen.add(there)
                parent[there] = Uplink(here, their_port, port)
                queue.append(there)
    # Keep the paths from the root to each ranked switch, nothing else.
    uplinks: dict[str, Uplink] = {}
    for target in targets:
        switch = target
        while switch != root and switch not in uplinks:
            uplinks[switch] = parent[switch]
            switch = parent[switch].parent
    return AggregationTree(root, dict(sorted(uplinks.items())), targets)


def next_hops(topology: Topology, switch: str) -> dict[str, int]:
    """Every other switch the links reach from `switch`, and `switch`'s port on a shortest path to it
    (neighbours by name, so every run picks the same path): where its L2 entries for their hosts point."""
    graph = _graph(topology)
    hops: dict[str, int] = {}
    queue = deque([(switch, 0)])
    seen = {switch}
    while queue:
        here, first = queue.popleft()
        for there, port, _ in graph[here]:
            if there not in seen:
                seen.add(there)
                hops[there] = first or port
                queue.append((there, first or port))
    return hops


def flood_links(topology: Topology, switch: str) -> list[int]:
    """`switch`'s ports on the fabric's spanning tree (breadth first from the first switch, by name): the
    link ports its flood group may use. A fabric with a cycle (two spines) would loop every broadcast
    on the other links for ever."""
    graph = _graph(topology)
    if not topology.links:
        return []
    start = min(s.name for s in topology.switches)
    ports: list[int] = []
    seen, queue = {start}, deque([start])
    while queue:
        here = queue.popleft()
        for there, port, their_port in graph[here]:
            if there not in seen:
                seen.add(there)
                queue.append(there)
                if here == switch:
                    ports.append(port)
                if there == switch:
                    ports.append(their_port)
    return sorted(ports)
