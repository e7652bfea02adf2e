"""`Ingress.job_table`: which (job, rank) may aggregate, into which slots, from which sender.

Besides one entry per rank of an installed job, every job has a *record*
entry at rank 255 (ranks are 0..31, so no worker ever uses it) written when
the job is created. It keeps the job on the switch while ranks are still
joining, so a restarted controller finds it, and it is inert: its pool size
is 0, so any DATA that claimed rank 255 would be dropped as
SLOT_OUT_OF_RANGE before touching a slot. Its `metadata` (P4Runtime
TableEntry.metadata, kept by simple_switch_grpc and the embedded switch)
holds the job name, sizes, generation and the SHA-256 of its credential as
JSON (never the credential itself); its action parameters carry base,
world size, group and the job's epoch, and its sender_udp_port field the
pool size, so a switch that drops metadata still yields everything but the
name. Every rank's entry carries that rank's key (docs/protocol.md), so a
restarted controller recovers keys and epochs from the switch alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import finsy as fy

from controller.allocator import SlotRange
from controller.job import Job, Part, Worker, job_group
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import INGRESS
from controller.tables.values import field

RECORD_RANK = 255


@dataclass(frozen=True)
class JobRow:
    """One job_table entry as read back from the switch."""

    job_id: int
    rank: int
    base: int
    pool_size: int
    num_workers: int
    mcast_grp: int
    sender_port: int
    sender_ip: int
    sender_udp_port: int
    key: int
    epoch: int
    metadata: dict[str, object]


class JobTable:
    TABLE = f"{INGRESS}.job_table"
    ACTION = f"{INGRESS}.set_job"
    KEYS = ("hdr.p4r.job_id", "hdr.p4r.rank")

    def _match(self, job_id: int, rank: int) -> fy.P4TableMatch:
        return fy.P4TableMatch({self.KEYS[0]: job_id, self.KEYS[1]: rank})

    @staticmethod
    def metadata(job: Job) -> bytes:
        """What the action parameters cannot hold: the name, the generation, the credential's hash and the
        tenant (so that a restarted daemon counts the job against its tenant's quota)."""
        data = {"name": job.name, "world_size": job.world_size, "pool_size": job.slots.size}
        if job.generation:
            data["generation"] = job.generation
        if job.credential_hash:
            data["credential"] = job.credential_hash
        if job.tenant:
            data["tenant"] = job.tenant
        if job.placement:
            data["placement"] = job.placement
        if job.parts:  # the tree, so that a restarted daemon finds the job's parts on the other switches
            data["tree"] = {s: tree_fields(p) for s, p in job.parts.items()}
        return json.dumps(data, sort_keys=True).encode()

    def record(self, op: str, job: Job) -> Update:
        action = None
        if op != "-":
            action = fy.P4TableAction(
                self.ACTION,
                base=job.slots.base,
                pool_size=0,
                num_workers=job.world_size,
                worker_bit=0,
                mcast_grp=job.group,
                sender_port=0,
                sender_ip=0,
                sender_udp_port=job.slots.size,
                key=0,
                epoch=job.epoch,
            )
        entity = fy.P4TableEntry(
            self.TABLE, match=self._match(job.job_id, RECORD_RANK), action=action, metadata=self.metadata(job)
        )
        return Update(op, entity, f"job_table record of job {job.name!r} (id {job.job_id})")

    def rank_entry(
        self, op: str, job: Job, worker: Worker, part: Part | None = None, num_workers: int = 0
    ) -> Update:
        """A member's entry: a rank of a job on its switch, or (with `part`) a member of a tree's part
        of `num_workers` members (a rank attached there or a child switch)."""
        part = part or job.home()
        action = None
        if op != "-":
            action = fy.P4TableAction(
                self.ACTION,
                base=part.slots.base,
                pool_size=part.slots.size,
                num_workers=num_workers or job.world_size,
                worker_bit=1 << worker.rank,
                mcast_grp=part.group,
                sender_port=worker.switch_port,
                sender_ip=worker.ipv4,
                sender_udp_port=worker.udp_port,
                key=worker.key,
                epoch=job.epoch,
            )
        entity = fy.P4TableEntry(
            self.TABLE,
            match=self._match(part.job_id, worker.rank),
            action=action,
            metadata=self.metadata(job),
        )
        return Update(op, entity, f"job_table job {job.name!r} (id {part.job_id}) rank {worker.rank}")

    def delete_key(self, job_id: int, rank: int) -> Update:
        return Update(
            "-", fy.P4TableEntry(self.TABLE, match=self._match(job_id, rank)), f"job_table ({job_id}, {rank})"
        )

    async def read(self, session: SwitchSession) -> list[JobRow]:
        rows = []
        for entry in await session.read(fy.P4TableEntry(self.TABLE)):
            match, args = dict(entry.match or {}), dict(entry.action.args)
            try:
                meta = json.loads(entry.metadata.decode()) if entry.metadata else {}
            except (UnicodeDecodeError, json.JSONDecodeError):
                meta = {}
            rows.append(
                JobRow(
                    job_id=field(match, self.KEYS[0]),
                    rank=field(match, self.KEYS[1]),
                    base=field(args, "base"),
                    pool_size=field(args, "pool_size"),
                    num_workers=field(args, "num_workers"),
                    mcast_grp=field(args, "mcast_grp"),
                    sender_port=field(args, "sender_port"),
                    sender_ip=field(args, "sender_ip"),
                    sender_udp_port=field(args, "sender_udp_port"),
                    key=field(args, "key"),
                    epoch=field(args, "epoch"),
                    metadata=meta if isinstance(meta, dict) else {},
                )
            )
        return rows


def record_slots(row: JobRow) -> SlotRange:
    """The slot range a record entry describes (pool size from metadata, else from sender_udp_port)."""
    size = row.metadata.get("pool_size", row.sender_udp_port)
    return SlotRange(row.base, int(size) if isinstance(size, int) else row.sender_udp_port)


TREE_FIELDS = ("id", "base", "parent", "child_port", "parent_port", "up_rank", "up_key")


def tree_fields(part: Part) -> list[object]:
    """A part as the record's metadata keeps it (TREE_FIELDS order; size and group follow from the job)."""
    return [
        part.job_id,
        part.slots.base,
        part.parent,
        part.child_port,
        part.parent_port,
        part.up_rank,
        part.up_key,
    ]


def tree_parts(meta: dict[str, object], pool_size: int) -> dict[str, Part] | None:
    """The parts a record's metadata names; None when it names none or is malformed."""
    tree = meta.get("tree")
    if not isinstance(tree, dict) or not tree:
        return None
    parts = {}
    for switch, values in tree.items():
        if not isinstance(values, list) or len(values) != len(TREE_FIELDS):
            return None
        job_id, base, parent, child_port, parent_port, up_rank, up_key = values
        ints = (job_id, base, child_port, parent_port, up_rank, up_key)
        if not all(isinstance(v, int) for v in ints) or not isinstance(parent, str):
            return None
        parts[switch] = Part(
            switch,
            job_id,
            SlotRange(base, pool_size),
            job_group(job_id),
            parent,
            child_port,
            parent_port,
            up_rank,
            up_key,
        )
    return parts
