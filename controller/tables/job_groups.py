"""The per-job multicast groups: one replica per rank, (worker's switch port, rid = rank)."""

from __future__ import annotations

import finsy as fy

from contracts.protocol import FLOOD_GROUP
from controller.job import Job, Part, Worker
from controller.p4switch import SwitchSession, Update
from controller.tables.l2 import replica_instance, replica_port


class JobGroups:
    def entity(self, job: Job, with_replicas: bool = True) -> fy.P4MulticastGroupEntry:
        """The job's group: a replica per rank that has joined and not left."""
        replicas = [(w.switch_port, w.rank) for w in job.present()] if with_replicas else []
        return fy.P4MulticastGroupEntry(job.group, replicas=replicas)

    def insert(self, job: Job) -> Update:
        return Update("+", self.entity(job), f"multicast group {job.group} of job {job.name!r}")

    def modify(self, job: Job) -> Update:
        return Update("~", self.entity(job), f"multicast group {job.group} of job {job.name!r}")

    def part_group(self, op: str, job: Job, part: Part, members: list[Worker]) -> Update:
        """A tree part's group: a replica per member of the part (ranks there and child switches)."""
        entity = fy.P4MulticastGroupEntry(part.group, replicas=[(m.switch_port, m.rank) for m in members])
        return Update(op, entity, f"multicast group {part.group} of job {job.name!r} on {part.switch}")

    def delete(self, group: int) -> Update:
        return Update("-", fy.P4MulticastGroupEntry(group), f"multicast group {group}")

    async def read(self, session: SwitchSession) -> dict[int, list[tuple[int, int]]]:
        """Every group but the flood group: id -> [(port, rank)]."""
        groups = await session.read(fy.P4MulticastGroupEntry())
        return {
            g.multicast_group_id: [(replica_port(r), replica_instance(r)) for r in g.replicas]
            for g in groups
            if g.multicast_group_id != FLOOD_GROUP
        }
