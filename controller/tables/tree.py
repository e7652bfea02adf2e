"""`Ingress.upstream` and `Ingress.from_parent`: a child switch's two entries for a job of a tree.

On a switch whose part of a job has a parent (docs/protocol.md,
*Aggregation trees*), `upstream` says where the partial sums go and who the
switch is in the parent's instance of the job; `from_parent` says which
local job the parent's packets (RESULT, MISSING, ABORT, STALE) are about,
matched on the parent's job id and address. The parent knows the child as
an ordinary member (job_table, result_dest, a group replica): see the
registry's members of a part.
"""

from __future__ import annotations

from dataclasses import dataclass

import finsy as fy

from controller.config import SwitchConfig
from controller.job import Job, Part
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import INGRESS
from controller.tables.values import field


@dataclass(frozen=True)
class FromParentRow:
    parent_job: int
    parent_ip: int
    job_id: int  # the local job


class Upstream:
    TABLE = f"{INGRESS}.upstream"
    ACTION = f"{INGRESS}.set_upstream"
    KEY = "hdr.p4r.job_id"

    def entry(
        self, op: str, job: Job, part: Part, parent: Part, own: SwitchConfig, up: SwitchConfig
    ) -> Update:
        action = None
        if op != "-":
            action = fy.P4TableAction(
                self.ACTION,
                port=part.child_port,
                parent_mac=up.agg_mac,
                parent_ip=up.agg_ipv4,
                own_ip=own.agg_ipv4,
                parent_job=parent.job_id,
                parent_rank=part.up_rank,
                parent_key=part.up_key,
            )
        entity = fy.P4TableEntry(self.TABLE, match=fy.P4TableMatch({self.KEY: part.job_id}), action=action)
        return Update(op, entity, f"upstream of job {job.name!r} (id {part.job_id}) on {part.switch}")

    def delete_key(self, job_id: int) -> Update:
        entity = fy.P4TableEntry(self.TABLE, match=fy.P4TableMatch({self.KEY: job_id}))
        return Update("-", entity, f"upstream ({job_id})")

    async def read(self, session: SwitchSession) -> list[int]:
        """The local job ids that have an upstream entry."""
        return [field(dict(e.match or {}), self.KEY) for e in await session.read(fy.P4TableEntry(self.TABLE))]


class FromParent:
    TABLE = f"{INGRESS}.from_parent"
    ACTION = f"{INGRESS}.set_child"
    KEYS = ("hdr.p4r.job_id", "hdr.ipv4.src_addr")

    def _match(self, parent_job: int, parent_ip: int) -> fy.P4TableMatch:
        return fy.P4TableMatch({self.KEYS[0]: parent_job, self.KEYS[1]: parent_ip})

    def entry(self, op: str, job: Job, part: Part, parent: Part, up: SwitchConfig) -> Update:
        action = None
        if op != "-":
            action = fy.P4TableAction(
                self.ACTION,
                job_id=part.job_id,
                base=part.slots.base,
                pool_size=part.slots.size,
                mcast_grp=part.group,
                parent_port=part.child_port,
                key=part.up_key,
                epoch=job.epoch,
            )
        entity = fy.P4TableEntry(self.TABLE, match=self._match(parent.job_id, up.agg_ipv4), action=action)
        return Update(op, entity, f"from_parent of job {job.name!r} (id {part.job_id}) on {part.switch}")

    def delete_key(self, parent_job: int, parent_ip: int) -> Update:
        entity = fy.P4TableEntry(self.TABLE, match=self._match(parent_job, parent_ip))
        return Update("-", entity, f"from_parent ({parent_job}, {parent_ip:#x})")

    async def read(self, session: SwitchSession) -> list[FromParentRow]:
        rows = []
        for entry in await session.read(fy.P4TableEntry(self.TABLE)):
            match, args = dict(entry.match or {}), dict(entry.action.args)
            rows.append(
                FromParentRow(field(match, self.KEYS[0]), field(match, self.KEYS[1]), field(args, "job_id"))
            )
        return rows
