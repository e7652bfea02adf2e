"""A job over several switches: its parts, and every entry each part needs, in a safe order.

controller/fabric.py finds the tree (which switches, who is whose parent,
through which ports); this module turns it into the job's parts (an id, a
slot range and a group on every switch of the tree, from that switch's own
allocators) and into P4Runtime updates (docs/protocol.md, *Aggregation
trees*). The registry takes the switches' locks and writes them.

Order matters, because a switch completes a use with what it has: a child
whose workers' entries were in before its `upstream` entry would multicast
a partial sum to its workers as if it were the result. So on every switch
the entries that say where results go (group, result_dest, upstream,
from_parent) are written before the members' job_table entries, and a
parent before its children; removal runs the other way, members first and
children before parents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc

from contracts.protocol import UDP_PORT
from controller.allocator import SlotRange
from controller.config import SwitchConfig
from controller.errors import JobError
from controller.fabric import AggregationTree
from controller.job import Job, Part, Worker, job_group, new_secret
from controller.p4switch import Update
from controller.tables.job_groups import JobGroups
from controller.tables.job_table import JobTable
from controller.tables.result_dest import ResultDest
from controller.tables.tree import FromParent, Upstream

# (switch) -> (job id, slots) taken there; raises JobError naming the switch when it has no room
Allocate = Callable[[str], tuple[int, SlotRange]]


def plan_parts(job: Job, tree: AggregationTree, allocate: Allocate) -> dict[str, Part]:
    """A part of `job` on every switch of `tree`: the job's own id and slots on its switch, new ones
    elsewhere. Each child's rank in its parent is the lowest rank below it, which no rank attached
    to the parent has."""
    below: dict[str, list[int]] = {s: [] for s in tree.switches}
    for worker in job.present():
        switch = worker.switch or job.switch
        while True:
            below[switch].append(worker.rank)
            up = tree.uplinks.get(switch)
            if up is None:
                break
            switch = up.parent
    parts = {}
    for switch in tree.switches:
        if switch == job.switch:
            job_id, slots = job.job_id, job.slots
        else:
            job_id, slots = allocate(switch)
        up = tree.uplinks.get(switch)
        if up is None:
            parts[switch] = Part(switch, job_id, slots, job_group(job_id))
        else:
            parts[switch] = Part(
                switch,
                job_id,
                slots,
                job_group(job_id),
                up.parent,
                up.child_port,
                up.parent_port,
                min(below[switch]),
                new_secret(),
            )
    return parts


class TreeEntries:
    """Every entry of a job's parts, for the switches of `configs`."""

    def __init__(self, configs: Mapping[str, SwitchConfig]) -> None:
        self.configs = configs
        self.job_table, self.result_dest, self.groups = JobTable(), ResultDest(), JobGroups()
        self.upstream, self.from_parent = Upstream(), FromParent()

    def members(self, job: Job, part: Part) -> list[Worker]:
        """Who sends to `part`: the ranks attached there, and each child switch as the member of rank
        `up_rank` at its aggregation address, UDP port 20562, behind the parent's port towards it."""
        members = job.ranks_on(part.switch)
        for child in job.children(part.switch):
            own = self.configs[child.switch]
            members.append(
                Worker(
                    child.up_rank,
                    own.agg_ipv4,
                    UDP_PORT,
                    own.agg_mac,
                    child.parent_port,
                    child.up_key,
                    part.switch,
                )
            )
        return sorted(members, key=lambda w: w.rank)

    def size(self, job: Job, part: Part) -> int:
        """The part's num_workers: every rank attached there (those that left too: a use still needs them,
        as on one switch) and its children."""
        attached = [w for w in job.workers.values() if (w.switch or job.switch) == part.switch]
        return len(attached) + len(job.children(part.switch))

    def install(self, job: Job, part: Part) -> tuple[list[Update], list[Update]]:
        """(where results go, then the members' job_table entries): two writes, in this order."""
        members = self.members(job, part)
        first = [self.groups.part_group("+", job, part, members)]
        first += [self.result_dest.entry("+", job, m, part) for m in members]
        if part.parent:
            parent = job.parts[part.parent]
            own, up = self.configs[part.switch], self.configs[part.parent]
            first.append(self.upstream.entry("+", job, part, parent, own, up))
            first.append(self.from_parent.entry("+", job, part, parent, up))
        size = self.size(job, part)
        return first, [self.job_table.rank_entry("+", job, m, part, size) for m in members]

    def removal(self, job: Job, part: Part) -> tuple[list[Update], list[Update]]:
        """(the members' job_table entries, then the rest): two writes, in this order."""
        members = self.members(job, part)
        rest = [self.result_dest.entry("-", job, m, part) for m in members]
        if part.parent:
            parent, up = job.parts[part.parent], self.configs[part.parent]
            rest.append(self.upstream.delete_key(part.job_id))
            rest.append(self.from_parent.delete_key(parent.job_id, up.agg_ipv4))
        rest.append(self.groups.delete(part.group))
        return [self.job_table.rank_entry("-", job, m, part) for m in members], rest

    def order(self, job: Job) -> list[Part]:
        """Parents before children (install order); reversed, the removal order."""

        def depth(part: Part) -> int:
            return 0 if not part.parent else 1 + depth(job.parts[part.parent])

        return sorted(job.parts.values(), key=lambda p: (depth(p), p.switch))


def check_same_program(job: Job, switches: list[str], facts: Mapping[str, tuple[int, bool]]) -> None:
    """Every switch of a tree runs the tree roles and the same K; else a one-line refusal naming it.
    `facts`: switch -> (values per packet, has the tree tables)."""
    k = {facts[s][0] for s in switches}
    for switch in switches:
        if not facts[switch][1]:
            raise JobError(
                f"job {job.name!r} needs switch {switch} in its aggregation tree, but its program has no "
                f"{Upstream.TABLE} table (an older or TNA program: docs/p4src.md)",
                grpc.StatusCode.FAILED_PRECONDITION,
            )
    if len(k) > 1:
        listed = ", ".join(f"{s}: {facts[s][0]}" for s in switches)
        raise JobError(
            f"job {job.name!r}: the switches of its tree carry different values per packet ({listed})",
            grpc.StatusCode.FAILED_PRECONDITION,
        )
