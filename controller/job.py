"""A job as the controller knows it: name, id, slot range, group, and its workers by rank."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.addresses import format_ipv4
from controller.allocator import SlotRange


@dataclass(frozen=True)
class Worker:
    """Where a rank sends from and receives results: as the switch sees it."""

    rank: int
    ipv4: int
    udp_port: int
    mac: int
    switch_port: int

    def __str__(self) -> str:
        return f"{format_ipv4(self.ipv4)}:{self.udp_port} (port {self.switch_port})"


@dataclass
class Job:
    name: str
    job_id: int
    switch: str
    world_size: int
    slots: SlotRange
    group: int
    workers: dict[int, Worker] = field(default_factory=dict)
    installed: bool = False  # job_table/result_dest entries and the group are on the switch
    heartbeats: dict[int, float] = field(default_factory=dict)  # rank -> monotonic time of last sign of life
    left: set[int] = field(default_factory=set)

    @property
    def state(self) -> str:
        return "active" if self.installed else "waiting"

    def missing_ranks(self) -> list[int]:
        return [r for r in range(self.world_size) if r not in self.workers]


def job_group(job_id: int) -> int:
    """Each job's multicast group: group 1 is the flood group, so job j uses j + 1 (2 .. 1024)."""
    return job_id + 1
