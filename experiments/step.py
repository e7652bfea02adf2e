"""The row every experiment records; apart from the cluster, so reports and their tests need no Mininet."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One all-reduce through the cluster, as every worker and the switch saw it."""

    system: str
    workers: int
    elements: int
    dtype: str
    iteration: int
    tensor_bytes: int
    seconds: float  # the slowest worker's all-reduce time
    ok: bool  # every worker's result matched numpy's sum
    retransmissions: int  # DATA sent again, summed over workers (p4reduce only)
    queries: int  # header-only QUERY packets about late uses, summed over workers (p4reduce only)
    up_bytes: float  # mean over workers: bytes the switch received on the worker's port
    down_bytes: float  # mean over workers: bytes the switch sent on the worker's port
    switch_packets: int  # packets the switch received on all worker ports
    switch_cpu: float  # switch process CPU seconds / wall seconds during the step
    error: str = ""

    @property
    def goodput(self) -> float:
        """Input bytes per second per worker: the figure a training job feels."""
        return self.tensor_bytes / self.seconds if self.seconds else 0.0

    @property
    def packets_per_second(self) -> float:
        """Packets into the switch per second of all-reduce: the switch's own throughput."""
        return self.switch_packets / self.seconds if self.seconds else 0.0
