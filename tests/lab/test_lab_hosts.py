"""What a lab host knows before its first call: the switch's aggregation address, statically.

With injected loss a rank's ARP request for the aggregation address (or the switch's answer) could be
lost; the kernel asks again only after a second, and the first call waited that second. The lab's hosts
therefore have a permanent neighbour entry for every switch's aggregation address (mininet/lab.py,
configure_hosts), as a real cluster's hosts would have resolved it long before. The switch's own ARP
responder is still asked here, from a lab host, so that the lab shows it answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hostlib.launch import build_program, free_port, start_controller
from tests.lab.test_lab_startup import needs_mininet

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts)
from topology import generate  # noqa: E402

# A broadcast ARP request from the host's interface, and the sender of the first answer (or "none").
ASK = (
    "from scapy.all import ARP, Ether, conf, srp1; conf.verb = 0; "
    "r = srp1(Ether(dst='ff:ff:ff:ff:ff:ff') / ARP(pdst='{ip}'), iface='{intf}', timeout=2, retry=2); "
    "print(r[ARP].hwsrc if r is not None and ARP in r and r[ARP].op == 2 else 'none')"
)


@needs_mininet
@pytest.mark.root
def test_lab_hosts_know_the_aggregation_address_and_the_switch_still_answers_arp(tmp_path: Path) -> None:
    lab = pytest.importorskip("lab", reason="the lab needs Debian's mininet")
    topo = generate("star", 2)
    grpc_ports = {"s1": free_port()}
    program, p4info = build_program(ROOT / "build")
    config = tmp_path / "controller.yaml"
    config.write_text(lab.controller_config(topo, grpc_ports, program, p4info))
    net = lab.build_network(topo, "soft", grpc_ports, None, 0.0)
    for switch in net.switches:
        switch.log_dir, switch.pcap_dir = tmp_path, None
    controller = None
    try:
        net.start()
        lab.configure_hosts(net, topo)
        controller = start_controller(config, free_port(), tmp_path / "controller.log")
        [switch] = topo.switches
        for h in topo.hosts:
            host = net.get(h.name)
            entry = host.cmd(f"ip neigh show {switch.agg_ipv4} dev {host.defaultIntf()}")
            assert switch.agg_mac in entry and "PERMANENT" in entry, f"{h.name}: {entry!r}"
        # The data plane's ARP responder (provisioned by the controller) answers a host that asks.
        host = net.get(topo.hosts[0].name)
        answer = host.cmd(f'{sys.executable} -c "{ASK.format(ip=switch.agg_ipv4, intf=host.defaultIntf())}"')
        assert answer.strip().splitlines()[-1] == switch.agg_mac, answer
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=10)
        net.stop()
