"""The lab's controller config and fabric L2, from a lab topology; no Mininet here, so tests need none.

`controller_config` writes `logs/lab-controller.yaml` for a topology and
the lab's choice of where to aggregate (--aggregate-at); `provision_fabric`
gives every switch the L2 entries of a fabric before the controller starts.
"""

from __future__ import annotations

from pathlib import Path

from topology import Topology

ROOT = Path(__file__).resolve().parents[1]

TARGET_NAMES = {"soft": "p4reduce-switch", "bmv2": "bmv2"}  # the controller config's `target`
TREE, ROOT_ONLY = "tree", "root"  # --aggregate-at: every switch for its hosts, or only the tree's root


def controller_config(
    topo: Topology,
    grpc_ports: dict[str, int],
    program: Path,
    p4info: Path,
    pool_size: int = 32,
    kind: str = "soft",
    aggregate_at: str = TREE,
) -> str:
    """The controller's config for the lab's topology.

    `tree`: every host is a host of its own switch and the switch links are
    the config's `links:`, so a job whose ranks sit behind several switches
    is aggregated by a tree of them (the controller computes it). A switch
    name: every host is a host of that switch alone, at the port that leads
    to it (over the links if remote), and the other switches only bridge:
    the whole job aggregates there. Every switch floods over its links too,
    so that broadcasts (and ARP for an aggregation address) reach every host.
    """
    tree = aggregate_at == TREE
    lines = ["controller:", "  lease_seconds: 60", f"  default_pool_size: {pool_size}", "switches:"]
    for index, switch in enumerate(topo.switches):
        lines += [
            f"  - name: {switch.name}",
            f"    target: {TARGET_NAMES[kind]}",
            f"    grpc: 127.0.0.1:{grpc_ports[switch.name]}",
            f"    device_id: {index + 1}",
            f"    p4info: {p4info}",
            f"    device_config: {program}",
            "    aggregation:",
            f"      ipv4: {switch.agg_ipv4}",
            f'      mac: "{switch.agg_mac}"',
        ]
        if tree and topo.link_ports(switch.name):  # its hosts' ports are in the flood group anyway
            lines.append(f"    flood_ports: {topo.link_ports(switch.name)}")
        elif not tree and switch.name != aggregate_at:  # a bridging switch floods over every port
            lines.append(f"    flood_ports: {topo.ports(switch.name)}")
    lines.append("hosts:")
    for host in topo.hosts:
        switch = host.switch if tree else aggregate_at
        port = topo.port_towards(switch, host)
        lines.append(
            f'  - {{name: {host.name}, ipv4: {host.ipv4}, mac: "{host.mac}", switch: {switch}, port: {port}}}'
        )
    if tree and topo.links:
        lines.append("links:")
        lines += [f"  - [{a}:{pa}, {b}:{pb}]" for a, pa, b, pb in topo.links]
    return "\n".join(lines) + "\n"


def aggregation_choice(topo: Topology, choice: str) -> str:
    """--aggregate-at as the lab uses it: `tree`, or the one switch that aggregates every host.

    `root` is the switch the controller would root the job's tree at (the
    spine of a leaf-spine fabric): aggregating only there is the baseline a
    tree is measured against. A single-switch topology is the same either way.
    """
    if choice == TREE:
        return TREE
    if choice == ROOT_ONLY:
        return tree_root(topo)
    return topo.switch(choice).name  # TopologyError naming the switches if it has no such switch


def tree_root(topo: Topology) -> str:
    """The switch at which the controller roots the tree of a job with a rank on every host."""
    import yaml

    from controller.config import parse
    from controller.fabric import tree_for

    text = controller_config(topo, dict.fromkeys(topo.names, 1), Path("p4"), Path("p4info"))
    return tree_for(parse(yaml.safe_load(text), ROOT), {h.switch for h in topo.hosts}).root


def provision_fabric(config: Path, topo: Topology) -> int:
    """Push the pipeline and the fabric's L2 entries to every switch, before the controller starts.

    The controller installs an L2 entry for each host of a switch it knows;
    the switches do not learn. For a host behind another switch (and the
    other switches' aggregation addresses) each switch would flood, so a
    ring's traffic between leaves, or a worker's DATA crossing a bridging
    leaf, would also go to every host on the way. The lab therefore writes
    what a real fabric's L2 would know: every address, at the port of the
    path towards it (Topology.l2_entries). The controller then finds the
    pipeline in place, leaves entries it did not write alone and restores
    them after a switch restart. Returns the number of entries written.
    """
    import asyncio

    from controller.addresses import parse_mac
    from controller.config import load as load_config
    from controller.provision import session_for
    from controller.tables.l2 import L2Entry, L2Forwarding

    topology = load_config(config)

    async def write_all() -> int:
        written = 0
        for switch in topology.switches:
            wanted = [L2Entry(parse_mac(mac, "mac"), port) for mac, port in topo.l2_entries(switch.name)]
            async with session_for(switch, topology.controller.election_id) as session:
                l2 = L2Forwarding()
                updates = l2.reconcile(await l2.read(session), wanted)
                await session.write(updates)
                written += len(updates)
        return written

    return asyncio.run(write_all())
