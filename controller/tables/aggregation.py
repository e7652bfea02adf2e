"""`Ingress.agg_addresses` and `Ingress.arp_responder`: the aggregation address and its ARP answer."""

from __future__ import annotations

import finsy as fy

from controller.addresses import format_ipv4, format_mac
from controller.p4switch import SwitchSession, Update
from controller.tables.p4names import INGRESS
from controller.tables.values import field


class AggregationAddresses:
    AGG_TABLE = f"{INGRESS}.agg_addresses"
    AGG_KEY = "hdr.ipv4.dst_addr"
    AGG_ACTION = f"{INGRESS}.accept_aggregation"
    ARP_TABLE = f"{INGRESS}.arp_responder"
    ARP_KEY = "hdr.arp.target_proto_addr"
    ARP_ACTION = f"{INGRESS}.arp_reply"

    def agg_entity(self, ipv4: int) -> fy.P4TableEntry:
        return fy.P4TableEntry(
            self.AGG_TABLE,
            match=fy.P4TableMatch({self.AGG_KEY: ipv4}),
            action=fy.P4TableAction(self.AGG_ACTION),
        )

    def arp_entity(self, ipv4: int, mac: int) -> fy.P4TableEntry:
        return fy.P4TableEntry(
            self.ARP_TABLE,
            match=fy.P4TableMatch({self.ARP_KEY: ipv4}),
            action=fy.P4TableAction(self.ARP_ACTION, mac=mac),
        )

    async def reconcile(self, session: SwitchSession, ipv4: int, mac: int) -> list[Update]:
        """Updates that make the switch accept and answer ARP for `ipv4` with `mac`."""
        updates = []
        accepted = {
            field(dict(r.match), self.AGG_KEY) for r in await session.read(fy.P4TableEntry(self.AGG_TABLE))
        }
        if ipv4 not in accepted:
            updates.append(Update("+", self.agg_entity(ipv4), f"agg_addresses {format_ipv4(ipv4)}"))
        answers = {
            field(dict(r.match), self.ARP_KEY): field(dict(r.action.args), "mac")
            for r in await session.read(fy.P4TableEntry(self.ARP_TABLE))
        }
        if answers.get(ipv4) != mac:
            op = "+" if ipv4 not in answers else "~"
            label = f"arp_responder {format_ipv4(ipv4)} -> {format_mac(mac)}"
            updates.append(Update(op, self.arp_entity(ipv4, mac), label))
        return updates
