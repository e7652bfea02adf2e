"""Proof that a group's sums crossed the switch: its own counts against the switch's job counters.

Every rank of a job sends the same uses (packets' worth of a call), so when
nothing was aborted the switch must have completed exactly as many uses as
one rank sent (`job_results_out`), with one contribution per rank each
(`job_data_in`). The switch's figures come from the controller's GetCounters,
which reads them from the switch over P4Runtime: nothing the hosts say.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import grpc
import torch.distributed as dist

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import call_metadata
from hostlib.torch.backend import P4ReduceProcessGroup

__all__ = ["SwitchReport", "switch_report"]


@dataclass(frozen=True)
class SwitchReport:
    job: str
    world_size: int
    collectives: Counter[tuple[str, str]]  # (route, collective) -> calls made by this rank
    uses: int  # uses this rank sent DATA for (first transmissions)
    switch: dict[str, int]  # job counter -> packets, as the switch counted them

    @property
    def consistent(self) -> bool:
        """Every use this rank sent completed at the switch once, with every rank's contribution."""
        return (
            self.switch.get("job_results_out") == self.uses
            and self.switch.get("job_data_in") == self.uses * self.world_size
        )

    def lines(self) -> list[str]:
        routes = ", ".join(
            f"{name} via {route}: {n}" for (route, name), n in sorted(self.collectives.items())
        )
        counters = ", ".join(f"{name} {packets}" for name, packets in sorted(self.switch.items()))
        verdict = "every use crossed the switch" if self.consistent else "MISMATCH"
        return [
            f"collectives of this rank: {routes or 'none'}",
            f"switch counters of job {self.job}: {counters}",
            f"this rank sent {self.uses} uses x {self.world_size} ranks = {self.uses * self.world_size} "
            f"contributions: {verdict}",
        ]


def switch_report(group: dist.ProcessGroup | None = None, timeout: float = 10.0) -> SwitchReport:
    """Collective (every rank calls it): wait for the group's sums, then read the switch's job counters.

    Call it before destroy_process_group: the controller forgets a job once every rank has left it.
    """
    pg = group if group is not None else dist.group.WORLD
    if not isinstance(pg, P4ReduceProcessGroup):
        raise TypeError(f"switch_report needs a p4reduce process group, not {type(pg).__name__}")
    pg.flush()
    dist.barrier(group=pg)  # no rank still sending: the counters are final
    stats = pg.comm.stats()
    settings = pg.settings
    metadata = call_metadata(settings.token, pg.credential)
    with grpc.insecure_channel(settings.controller) as channel:
        reply = pb_grpc.JobServiceStub(channel).GetCounters(
            pb.GetCountersRequest(job=pg.job), timeout=timeout, metadata=metadata
        )
    dist.barrier(group=pg)  # nobody leaves the job before every rank has read it
    return SwitchReport(
        job=pg.job,
        world_size=pg.size(),
        collectives=pg.collectives.copy(),
        uses=stats.packets_sent - stats.queries - stats.retransmissions,
        switch={value.counter: value.packets for value in reply.counters},
    )
