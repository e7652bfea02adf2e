"""A job as the controller knows it: name, id, slot range, group, and its workers by rank."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field

from controller.addresses import format_ipv4
from controller.allocator import SlotRange


@dataclass(frozen=True)
class Worker:
    """Where a rank sends from and receives results, as the switch sees it, and the rank's key.

    The key (docs/protocol.md, *Membership*) is drawn when the rank joins and lives in its
    job_table and result_dest entries; a rank that joins again gets a new one.
    """

    rank: int
    ipv4: int
    udp_port: int
    mac: int
    switch_port: int
    key: int = 0
    switch: str = ""  # the switch it is attached to ('' : the job's own)

    def __str__(self) -> str:
        return f"{format_ipv4(self.ipv4)}:{self.udp_port} (port {self.switch_port})"

    def same_place(self, other: Worker) -> bool:
        """The same rank at the same addresses (a retried join), whatever the keys."""
        return (self.rank, self.ipv4, self.udp_port, self.mac, self.switch_port, self.switch) == (
            other.rank, other.ipv4, other.udp_port, other.mac, other.switch_port, other.switch,
        )  # fmt: skip


def new_secret() -> int:
    """A random non-zero 32-bit number: a rank's key or a job's epoch."""
    return secrets.randbelow(2**32 - 1) + 1


@dataclass(frozen=True)
class Part:
    """The job on one switch of its aggregation tree (docs/protocol.md, *Aggregation trees*).

    Each switch of the tree has the job under an id, slot range and group of its own; its members
    are the ranks attached to it and its child switches. A switch with a parent is, in the parent's
    part, a member of rank `up_rank` (the lowest rank below it, so never a rank attached to the
    parent) with key `up_key`, reached through `parent_port`; it sends up out of `child_port`.
    """

    switch: str
    job_id: int
    slots: SlotRange
    group: int
    parent: str = ""  # '' at the root
    child_port: int = 0  # this switch's port towards its parent
    parent_port: int = 0  # the parent's port towards this switch
    up_rank: int = 0
    up_key: int = 0


@dataclass
class Job:
    name: str
    job_id: int
    switch: str
    world_size: int
    slots: SlotRange
    group: int
    epoch: int = field(default_factory=new_secret)  # this incarnation's owner mark on its slots
    workers: dict[int, Worker] = field(default_factory=dict)
    installed: bool = False  # job_table/result_dest entries and the group are on the switch
    heartbeats: dict[int, float] = field(default_factory=dict)  # rank -> monotonic time of last sign of life
    left: set[int] = field(default_factory=set)
    credential_hash: str = ""  # SHA-256 of the job's credential ('' only for jobs of an older daemon)
    generation: int = 0  # times the switch lost the job's state and it was reinstalled with new keys
    resumes: dict[int, int] = field(default_factory=dict)  # rank -> calls begun, this generation
    watchers: set[asyncio.Queue[JobEvent]] = field(default_factory=set)
    disconnected: dict[int, float] = field(default_factory=dict)  # rank -> when its watch stream closed
    tenant: str = ""  # whose quota it counts against ('' : created without a tenant's token)
    departures: dict[int, JobEvent] = field(default_factory=dict)  # rank -> its rank_left, for late watchers
    # The aggregation tree, once installed over several switches: switch -> the job there (the
    # job's own switch included when the tree reaches it). Empty: the job aggregates on its switch.
    parts: dict[str, Part] = field(default_factory=dict)
    ended: str = ""  # why it was deleted (told to ranks still waiting to join)
    placement: str = ""  # why it is not on the switch it was asked for ('' when it is)

    @property
    def root(self) -> str:
        """The switch that completes every use: the tree's root, or the job's switch."""
        return next((p.switch for p in self.parts.values() if not p.parent), self.switch)

    def home(self) -> Part:
        """The job on its own switch, as a part (the record's id, slots and group)."""
        return Part(self.switch, self.job_id, self.slots, self.group)

    def part(self, switch: str) -> Part:
        """The job on `switch`: a part of its tree, or (no tree) the job itself."""
        if not self.parts:
            return self.home()
        return self.parts[switch]

    def held(self) -> dict[str, int]:
        """Slots the job holds per switch: its own range, and its tree's parts on other switches."""
        held = {self.switch: self.slots.size}
        for part in self.parts.values():
            held.setdefault(part.switch, part.slots.size)
        return held

    def id_on(self, switch: str) -> int:
        """The job's id on `switch` (its tree's part there, else its own id)."""
        part = self.parts.get(switch)
        return part.job_id if part is not None else self.job_id

    def ranks_on(self, switch: str) -> list[Worker]:
        """The present ranks attached to `switch`, by rank."""
        return [w for w in self.present() if (w.switch or self.switch) == switch]

    def children(self, switch: str) -> list[Part]:
        return sorted((p for p in self.parts.values() if p.parent == switch), key=lambda p: p.switch)

    @property
    def state(self) -> str:
        return "active" if self.installed else "waiting"

    def missing_ranks(self) -> list[int]:
        return [r for r in range(self.world_size) if r not in self.workers]

    def present(self) -> list[Worker]:
        """The ranks that joined and have not left, by rank."""
        return [w for _, w in sorted(self.workers.items()) if w.rank not in self.left]

    def publish(self, event: JobEvent) -> None:
        """Tell every rank watching the job (WatchJob)."""
        for queue in self.watchers:
            queue.put_nowait(event)


@dataclass(frozen=True)
class JobEvent:
    """Something a job's ranks must hear at once (contracts/jobapi.proto, JobEvent)."""

    kind: (
        str  # "deleted", "switch_restarted" or "rank_left" ("closing" ends the streams when the daemon stops)
    )
    message: str
    generation: int
    rank: int = 0  # the silent rank, when a lease took the job; the rank that left
    calls_begun: int = 0  # rank_left: the calls the rank had begun (its peers' calls below it can finish)


def job_group(job_id: int) -> int:
    """Each job's multicast group: group 1 is the flood group, so job j uses j + 1 (2 .. 1024)."""
    return job_id + 1
