"""The P4 counters, read by name and labelled (job names, drop reason names)."""

from __future__ import annotations

from dataclasses import dataclass

import finsy as fy

from contracts.protocol import DropReason
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import EGRESS, INGRESS

JOB_COUNTERS = (
    "job_data_in",
    "job_results_out",
    "job_duplicates",
    "job_replays",
    "job_missing",
    "job_queries",
    "job_aborts",
)
DROP_COUNTERS = {"ingress_drops": INGRESS, "egress_drops": EGRESS}


@dataclass(frozen=True)
class CounterValue:
    counter: str
    index: int
    label: str
    packets: int
    bytes: int


class Counters:
    async def job_counters(
        self, session: SwitchSession, job_id: int | None = None
    ) -> dict[str, dict[int, tuple[int, int]]]:
        """counter name -> {job id: (packets, bytes)}, all indices (or one job)."""
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for name in JOB_COUNTERS:
            rows = await session.read(fy.P4CounterEntry(f"{INGRESS}.{name}", index=job_id))
            out[name] = {r.index: (r.packet_count, r.byte_count) for r in rows}
        return out

    async def drop_counters(self, session: SwitchSession) -> list[CounterValue]:
        values = []
        for name, control in DROP_COUNTERS.items():
            for row in await session.read(fy.P4CounterEntry(f"{control}.{name}")):
                try:
                    label = DropReason(row.index).name
                except ValueError:
                    continue  # index 0 and the spare indices are never counted
                values.append(CounterValue(name, row.index, label, row.packet_count, row.byte_count))
        return values

    def reset(self, job_id: int) -> list[Update]:
        """Zero a job id's counters, so a recycled id counts only its new job's packets."""
        zero = fy.P4CounterData(packet_count=0, byte_count=0)
        return [
            Update("~", fy.P4CounterEntry(f"{INGRESS}.{name}", index=job_id, data=zero), f"{name}[{job_id}]")
            for name in JOB_COUNTERS
        ]

    async def used_job_ids(self, session: SwitchSession) -> set[int]:
        """Job ids ever used on this switch: any DATA or QUERY accepted under them."""
        counts = await self.job_counters(session)
        used = set()
        for name in ("job_data_in", "job_duplicates", "job_queries"):
            used |= {job_id for job_id, (packets, _) in counts[name].items() if packets}
        return used
