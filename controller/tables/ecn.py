"""`Egress.ecn_threshold`: the queue depth at which a port marks aggregation traffic CE (docs/protocol.md,
*Congestion*).

Targets that know their queues (bmv2, Tofino) mark an ECN-capable answer
leaving a port whose queue holds at least `depth` packets when it is
enqueued; a port without an entry never marks. The controller writes one
entry per port it knows of a switch whose config sets `ecn_threshold`.
"""

from __future__ import annotations

from collections.abc import Iterable

import finsy as fy

from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import EGRESS
from controller.tables.values import field

MAX_DEPTH = (1 << 19) - 1  # v1model's enq_qdepth is bit<19>


class EcnThreshold:
    TABLE = f"{EGRESS}.ecn_threshold"
    KEY = "standard_metadata.egress_port"
    ACTION = f"{EGRESS}.set_ecn_threshold"

    def entity(self, port: int, depth: int) -> fy.P4TableEntry:
        return fy.P4TableEntry(
            self.TABLE,
            match=fy.P4TableMatch({self.KEY: port}),
            action=fy.P4TableAction(self.ACTION, depth=depth),
        )

    def present(self, session: SwitchSession) -> bool:
        try:
            return bool(session.schema.tables[self.TABLE])
        except (KeyError, ValueError):
            return False

    async def read(self, session: SwitchSession) -> dict[int, int]:
        """port -> depth of every entry the switch holds."""
        rows = await session.read(fy.P4TableEntry(self.TABLE))
        return {field(dict(r.match or {}), self.KEY): field(dict(r.action.args), "depth") for r in rows}

    def reconcile(self, current: dict[int, int], ports: Iterable[int], depth: int) -> list[Update]:
        """Inserts and modifies that make every port in `ports` mark at `depth` (others are left alone)."""
        updates = []
        for port in sorted(set(ports)):
            if current.get(port) != depth:
                op = "+" if port not in current else "~"
                updates.append(Update(op, self.entity(port, depth), f"ecn_threshold port {port} -> {depth}"))
        return updates
