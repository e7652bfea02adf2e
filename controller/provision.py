"""Switch-level provisioning from the topology: L2 forwarding, flood group, aggregation address, ARP.

Idempotent: it reads what the switch has and writes only the difference
(inserts and modifies), so running it again, or after `p4reduce-ctl fwd add`,
changes nothing it does not own. It never deletes entries. The daemon runs
it again after a switch restart, with the L2 entries it found at its start
(`extra`), so entries added with `fwd add` come back too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from controller.config import SwitchConfig, Topology
from controller.errors import ConfigError
from controller.fabric import flood_links, next_hops
from controller.mastership import LinkStats, MastershipSettings
from controller.p4switch import SwitchSession
from controller.tables.aggregation import AggregationAddresses
from controller.tables.ecn import EcnThreshold
from controller.tables.l2 import FloodGroup, L2Entry, L2Forwarding

log = logging.getLogger("controller.provision")


@dataclass(frozen=True)
class ProvisionReport:
    switch: str
    pipeline_pushed: bool
    l2_entries: int
    flood_ports: tuple[int, ...]
    updates: int


async def provision(
    session: SwitchSession, topology: Topology, switch: SwitchConfig, extra: Iterable[L2Entry] = ()
) -> ProvisionReport:
    hosts = topology.hosts_of(switch.name)
    l2, flood, agg = L2Forwarding(), FloodGroup(), AggregationAddresses()
    wanted = [L2Entry(h.mac, h.port) for h in hosts]
    wanted += _fabric_entries(topology, switch.name, {e.mac for e in wanted} | {switch.agg_mac})
    macs = {e.mac for e in wanted}
    wanted += [e for e in extra if e.mac not in macs]
    ports = {h.port for h in hosts} | set(switch.flood_ports) | set(flood_links(topology, switch.name))
    if switch.default_host_port is not None:
        ports.add(switch.default_host_port)
    updates = l2.reconcile(await l2.read(session), wanted)
    updates += flood.reconcile(await flood.read_ports(session), ports)
    updates += await agg.reconcile(session, switch.agg_ipv4, switch.agg_mac)
    if switch.ecn_threshold is not None:
        links = [port for link in topology.links for sw, port in link.ends() if sw == switch.name]
        ecn = EcnThreshold()
        if not ecn.present(session):
            raise ConfigError(
                f"switch {switch.name}: ecn_threshold is set, but its program has no {ecn.TABLE} table "
                "(an older program: rebuild it with `make build`)"
            )
        updates += ecn.reconcile(await ecn.read(session), [*ports, *links], switch.ecn_threshold)
    await session.write(updates)
    log.info("switch %s provisioned: %d host(s), flood ports %s, %d update(s)",
             switch.name, len(hosts), sorted(ports), len(updates))  # fmt: skip
    return ProvisionReport(switch.name, session.pushed, len(hosts), tuple(sorted(ports)), len(updates))


def _fabric_entries(topology: Topology, switch: str, known: set[int]) -> list[L2Entry]:
    """The hosts of the other switches (and those switches' aggregation MACs), at this switch's port on a
    shortest path towards them, so that traffic between racks is forwarded, not flooded. A MAC the config
    gives two places is left to flooding."""
    hops = next_hops(topology, switch)
    found: dict[int, set[int]] = {}
    for host in topology.hosts:
        if host.switch in hops:
            found.setdefault(host.mac, set()).add(hops[host.switch])
    for other in topology.switches:
        if other.name in hops:
            found.setdefault(other.agg_mac, set()).add(hops[other.name])
    return [
        L2Entry(mac, ports.pop())
        for mac, ports in sorted(found.items())
        if len(ports) == 1 and mac not in known
    ]


def session_for(
    switch: SwitchConfig,
    election_id: int,
    force_push: bool = False,
    *,
    mastership: MastershipSettings | None = None,
    stats: LinkStats | None = None,
) -> SwitchSession:
    return SwitchSession(
        switch.name,
        switch.address,
        device_id=switch.device_id,
        election_id=election_id,
        p4info=switch.p4info,
        device_config=switch.device_config,
        force_push=force_push,
        target=switch.target,
        mastership=mastership,
        stats=stats,
    )
