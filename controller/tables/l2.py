"""`Ingress.l2_forward` and the flood group: ordinary traffic crosses the switch by destination MAC."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import finsy as fy
from finsy.p4entity import P4Replica

from contracts.protocol import FLOOD_GROUP
from controller.addresses import format_mac
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import INGRESS
from controller.tables.values import field


@dataclass(frozen=True, order=True)
class L2Entry:
    mac: int
    port: int

    def __str__(self) -> str:
        return f"{format_mac(self.mac)} -> port {self.port}"


class L2Forwarding:
    TABLE = f"{INGRESS}.l2_forward"
    KEY = "hdr.ethernet.dst_addr"
    ACTION = f"{INGRESS}.forward"

    def entity(self, mac: int, port: int | None = None) -> fy.P4TableEntry:
        action = None if port is None else fy.P4TableAction(self.ACTION, port=port)
        return fy.P4TableEntry(self.TABLE, match=fy.P4TableMatch({self.KEY: mac}), action=action)

    def update(self, op: str, entry: L2Entry) -> Update:
        port = None if op == "-" else entry.port
        return Update(op, self.entity(entry.mac, port), f"l2_forward {format_mac(entry.mac)}")

    async def read(self, session: SwitchSession) -> list[L2Entry]:
        rows = await session.read(fy.P4TableEntry(self.TABLE))
        return sorted(
            L2Entry(field(dict(row.match or {}), self.KEY), field(dict(row.action.args), "port"))
            for row in rows
        )

    def reconcile(self, current: Iterable[L2Entry], wanted: Iterable[L2Entry]) -> list[Update]:
        """Inserts and modifies that make every wanted entry present (others are left alone)."""
        have = {e.mac: e for e in current}
        updates = []
        for entry in sorted(set(wanted)):
            if entry.mac not in have:
                updates.append(self.update("+", entry))
            elif have[entry.mac].port != entry.port:
                updates.append(self.update("~", entry))
        return updates


class FloodGroup:
    """Multicast group 1: every port that leads to a host (docs/protocol.md, *Other traffic*)."""

    GROUP = FLOOD_GROUP

    def entity(self, ports: Iterable[int]) -> fy.P4MulticastGroupEntry:
        return fy.P4MulticastGroupEntry(self.GROUP, replicas=[(p, 0) for p in sorted(set(ports))])

    async def read_ports(self, session: SwitchSession) -> list[int] | None:
        groups = await session.read(fy.P4MulticastGroupEntry(self.GROUP))
        if not groups:
            return None
        return sorted(replica_port(r) for r in groups[0].replicas)

    def reconcile(self, current: list[int] | None, ports: Iterable[int]) -> list[Update]:
        wanted = sorted(set(ports))
        if not wanted or current == wanted:
            return []
        return [Update("+" if current is None else "~", self.entity(wanted), f"flood group {self.GROUP}")]


def replica_port(replica: int | P4Replica) -> int:
    """finsy decodes a replica to a bare port when its instance is 0, else to a P4Replica."""
    return replica if isinstance(replica, int) else replica.port


def replica_instance(replica: int | P4Replica) -> int:
    return 0 if isinstance(replica, int) else replica.instance
