"""`Egress.result_dest`: where each replica to a job goes (per rank = egress rid), with that rank's key."""

from __future__ import annotations

from dataclasses import dataclass

import finsy as fy

from controller.job import Job, Part, Worker
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import EGRESS
from controller.tables.values import field


@dataclass(frozen=True)
class ResultDestRow:
    job_id: int
    rank: int
    mac: int
    ipv4: int
    udp_port: int
    key: int


class ResultDest:
    TABLE = f"{EGRESS}.result_dest"
    ACTION = f"{EGRESS}.set_result_dest"
    KEYS = ("hdr.p4r.job_id", "standard_metadata.egress_rid")

    def _match(self, job_id: int, rank: int) -> fy.P4TableMatch:
        return fy.P4TableMatch({self.KEYS[0]: job_id, self.KEYS[1]: rank})

    def entry(self, op: str, job: Job, worker: Worker, part: Part | None = None) -> Update:
        job_id = (part or job.home()).job_id
        action = None
        if op != "-":
            action = fy.P4TableAction(
                self.ACTION,
                dst_mac=worker.mac,
                dst_ip=worker.ipv4,
                dst_udp_port=worker.udp_port,
                key=worker.key,
            )
        entity = fy.P4TableEntry(self.TABLE, match=self._match(job_id, worker.rank), action=action)
        return Update(op, entity, f"result_dest job {job.name!r} (id {job_id}) rank {worker.rank}")

    def delete_key(self, job_id: int, rank: int) -> Update:
        entity = fy.P4TableEntry(self.TABLE, match=self._match(job_id, rank))
        return Update("-", entity, f"result_dest ({job_id}, {rank})")

    async def read(self, session: SwitchSession) -> list[ResultDestRow]:
        rows = []
        for entry in await session.read(fy.P4TableEntry(self.TABLE)):
            match, args = dict(entry.match or {}), dict(entry.action.args)
            rows.append(
                ResultDestRow(
                    job_id=field(match, self.KEYS[0]),
                    rank=field(match, self.KEYS[1]),
                    mac=field(args, "dst_mac"),
                    ipv4=field(args, "dst_ip"),
                    udp_port=field(args, "dst_udp_port"),
                    key=field(args, "key"),
                )
            )
        return rows
