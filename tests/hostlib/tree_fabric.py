"""One job over a tree of switches: host engines, leaves and a spine, all the real P4 program, on a
virtual clock with scripted faults on every link (docs/protocol.md, *Aggregation trees*).

The layout of a leaf–spine fabric: leaf i (0 .. L-1) has `per_leaf` workers on its ports 1 ..,
its parent (the spine) behind port UPLINK; the spine has leaf i on its port i + 1. Every worker's
rank is global (0 .. N-1) and its world size N, as the controller gives them; at its leaf the job
has the leaf's workers as members (worker_bit by their place on the leaf, rid = global rank) and an
`upstream` entry: the spine's instance of the job, in which leaf i is rank i with a key of its own.
The spine's job has the L leaves as members. Nothing in the hosts knows the tree.

Like tests/hostlib/fabric.py (one switch), every packet is an event: `fault` decides per packet,
on each link and each way, whether it is lost, duplicated or delayed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from contracts.protocol import UDP_PORT
from hostlib.engine import Membership
from softswitch.backends.python.executor import Pipeline
from tests.executor.pipeline_driver import PipelineDriver
from tests.hostlib.fabric import LINK_DELAY, VirtualClock, compiled, datagram, frame, make_engine
from tests.protocol_scenarios import (
    SWITCH_MAC,
    Host,
    Install,
    TableEntry,
    install,
    ip_int,
    mac_int,
    standard_setup,
)

UPLINK = 8
SPINE_IP, SPINE_MAC = "10.0.200.254", "02:00:00:00:c8:fe"
LEAF_JOB, SPINE_JOB = 21, 50
EPOCH_LEAF, EPOCH_SPINE = 0x5EED0021, 0x5EED0050


def leaf_ip(leaf: int) -> str:
    """The leaf's own address in the spine's instance of the job (its workers use SWITCH_IP)."""
    return f"10.0.{100 + leaf}.254"


@dataclass(frozen=True)
class Hop:
    """A packet on a link: `link` is "worker" (rank's link to its leaf) or "spine" (leaf's uplink)."""

    link: str
    upstream: bool  # towards the spine
    who: int  # the rank, or the leaf
    number: int  # per (link, direction, who), in sending order
    payload: bytes  # a worker link's UDP payload; a spine link's whole frame

    @property
    def msg_type(self) -> int:
        return self.payload[42 if self.link == "spine" else 0]  # behind Ethernet, IPv4 and UDP


TreeFault = Callable[[Hop], list[float]]


def no_faults(hop: Hop) -> list[float]:
    return [0.0]


@dataclass
class TreeFabric(VirtualClock):
    leaves: int = 2
    per_leaf: int = 2
    pool: int = 8
    k: int = 64
    fault: TreeFault = no_faults
    engine: str = "spec"
    backend: str = "python"
    progress_timeout: float = 10.0
    now: float = 0.0
    log: list[tuple[float, Hop, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        program, info = compiled(self.k)
        self.world = self.leaves * self.per_leaf
        self.keys = [0x2000_0001 * (r + 1) & 0xFFFFFFFF for r in range(self.world)]
        self.leaf_keys = [0x3000_0003 * (i + 1) & 0xFFFFFFFF for i in range(self.leaves)]
        self.switches = [
            self._switch(program, info) for _ in range(self.leaves + 1)
        ]  # leaves, then the spine
        for i in range(self.leaves):
            self._install_leaf(i)
        self._install_spine()
        self.engines = [
            make_engine(self.engine, Membership(LEAF_JOB, r, self.keys[r], self.world, self.pool, self.k),
                        self.progress_timeout)
            for r in range(self.world)
        ]  # fmt: skip
        self._events: list[tuple[float, int, str, int, int, bytes]] = []
        self._order = itertools.count()
        self._numbers: dict[tuple[str, bool, int], itertools.count[int]] = {}

    # ------------------------------------------------------------------ set-up
    def _switch(self, program: object, info: object) -> PipelineDriver:
        if self.backend == "python":
            return PipelineDriver(Pipeline(program, info), info)
        from softswitch.backends.loader import new_pipeline

        return PipelineDriver(new_pipeline(program, info, self.backend), info)

    @property
    def spine(self) -> PipelineDriver:
        return self.switches[-1]

    def host(self, rank: int) -> Host:
        """Rank `rank`'s host: port (its place on its leaf) + 1, an address of its own."""
        place = rank % self.per_leaf
        return Host(port=place + 1, mac=f"02:00:00:00:{rank // 256:02x}:{rank % 256:02x}",
                    ip=f"10.1.{rank // 256}.{rank % 256 + 1}", udp_port=40000 + rank)  # fmt: skip

    def leaf_of(self, rank: int) -> int:
        return rank // self.per_leaf

    def _install_leaf(self, leaf: int) -> None:
        driver = self.switches[leaf]
        install(driver, standard_setup()[0])  # the workers' aggregation address SWITCH_IP, ARP, L2
        ranks = range(leaf * self.per_leaf, (leaf + 1) * self.per_leaf)
        entries = [
            TableEntry("MyIngress.agg_addresses", {"hdr.ipv4.dst_addr": ip_int(leaf_ip(leaf))},
                       "MyIngress.accept_aggregation"),  # fmt: skip
            TableEntry(
                "MyIngress.upstream", {"hdr.p4r.job_id": LEAF_JOB}, "MyIngress.set_upstream",
                {"port": UPLINK, "parent_mac": mac_int(SPINE_MAC), "parent_ip": ip_int(SPINE_IP),
                 "own_ip": ip_int(leaf_ip(leaf)), "parent_job": SPINE_JOB, "parent_rank": leaf,
                 "parent_key": self.leaf_keys[leaf]},
            ),
            TableEntry(
                "MyIngress.from_parent", {"hdr.p4r.job_id": SPINE_JOB, "hdr.ipv4.src_addr": ip_int(SPINE_IP)},
                "MyIngress.set_child",
                {"job_id": LEAF_JOB, "base": 500, "pool_size": self.pool, "mcast_grp": 30,
                 "parent_port": UPLINK, "key": self.leaf_keys[leaf], "epoch": EPOCH_LEAF},
            ),
        ]  # fmt: skip
        for place, rank in enumerate(ranks):
            h = self.host(rank)
            entries += self._member(LEAF_JOB, rank, place, self.per_leaf, h.port, h.ip, h.udp_port,
                                    h.mac, self.keys[rank], 500, 30, EPOCH_LEAF)  # fmt: skip
        install(driver, Install(entries=tuple(entries),
                                groups=((30, tuple((self.host(r).port, r) for r in ranks)),)))  # fmt: skip

    def _install_spine(self) -> None:
        entries = [
            TableEntry("MyIngress.agg_addresses", {"hdr.ipv4.dst_addr": ip_int(SPINE_IP)},
                       "MyIngress.accept_aggregation"),
        ]  # fmt: skip
        for leaf in range(self.leaves):
            entries += self._member(SPINE_JOB, leaf, leaf, self.leaves, leaf + 1, leaf_ip(leaf), UDP_PORT,
                                    SWITCH_MAC, self.leaf_keys[leaf], 900, 40, EPOCH_SPINE)  # fmt: skip
        groups = ((40, tuple((leaf + 1, leaf) for leaf in range(self.leaves))),)
        install(self.spine, Install(entries=tuple(entries), groups=groups))

    def _member(
        self, job: int, rank: int, place: int, members: int, port: int, ip: str, udp: int, mac: str,
        key: int, base: int, group: int, epoch: int,
    ) -> list[TableEntry]:  # fmt: skip
        return [
            TableEntry(
                "MyIngress.job_table", {"hdr.p4r.job_id": job, "hdr.p4r.rank": rank}, "MyIngress.set_job",
                {"base": base, "pool_size": self.pool, "num_workers": members, "worker_bit": 1 << place,
                 "mcast_grp": group, "sender_port": port, "sender_ip": ip_int(ip), "sender_udp_port": udp,
                 "key": key, "epoch": epoch},
            ),
            TableEntry(
                "MyEgress.result_dest", {"hdr.p4r.job_id": job, "standard_metadata.egress_rid": rank},
                "MyEgress.set_result_dest",
                {"dst_mac": mac_int(mac), "dst_ip": ip_int(ip), "dst_udp_port": udp, "key": key},
            ),
        ]  # fmt: skip

    # ------------------------------------------------------------------ events
    def _send(
        self, link: str, upstream: bool, who: int, payload: bytes, target: tuple[str, int, int]
    ) -> None:
        number = next(self._numbers.setdefault((link, upstream, who), itertools.count()))
        hop = Hop(link, upstream, who, number, payload)
        delays = self.fault(hop)
        self.log.append((self.now, hop, len(delays)))
        kind, node, port = target
        for extra in delays:
            heapq.heappush(
                self._events, (self.now + LINK_DELAY + extra, next(self._order), kind, node, port, payload)
            )

    def _from_rank(self, rank: int, payload: bytes) -> None:
        self._send("worker", True, rank, payload, ("leaf", self.leaf_of(rank), self.host(rank).port))

    def _deliver(self, kind: str, node: int, port: int, payload: bytes) -> None:
        if kind == "host":
            for reply in self.engines[node].receive(payload, self.now):
                self._from_rank(node, reply)
            return
        if kind == "leaf":
            if port == UPLINK:  # a frame from the spine, as it left the spine
                outputs = self.switches[node].send(UPLINK, payload)
            else:
                rank = node * self.per_leaf + port - 1
                outputs = self.switches[node].send(port, frame(self.host(rank), payload))
            for out_port, out in outputs:
                if out_port == UPLINK:
                    self._send("spine", True, node, out, ("spine", 0, node + 1))
                else:
                    rank = node * self.per_leaf + out_port - 1
                    self._send("worker", False, rank, datagram(out)[1], ("host", rank, 0))
            return
        for out_port, out in self.spine.send(port, payload):  # the spine: ports 1 .. L are the leaves
            self._send("spine", False, out_port - 1, out, ("leaf", out_port - 1, UPLINK))

    # ------------------------------------------------------------------ inspection
    def spine_counter(self, name: str) -> int:
        return self.spine.counter(name, SPINE_JOB)[0]

    def leaf_counter(self, leaf: int, name: str) -> int:
        return self.switches[leaf].counter(name, LEAF_JOB)[0]

    def hops(self, link: str, *, upstream: bool | None = None, msg_type: int | None = None) -> list[Hop]:
        return [h for _, h, _ in self.log if h.link == link and (upstream is None or h.upstream == upstream)
                and (msg_type is None or h.msg_type == msg_type)]  # fmt: skip
