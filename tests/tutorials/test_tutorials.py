"""p4lang/tutorials exercises, each a program written here from the exercise's description, run in
the embedded switch's executor packet by packet, on both backends: what the exercise says must come
out, comes out. Control-plane state is installed by P4Info name, as the exercise's controller does.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import Ether

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.runtime.pipeline import Pipeline
from tests.executor.pipeline_driver import PipelineDriver

HERE = Path(__file__).parent
MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def load(name: str, backend: str) -> Pipeline:
    program, info = compile_program(HERE / f"{name}.p4")
    return new_pipeline(program, info, backend)


def switch(name: str, backend: str) -> PipelineDriver:
    """The exercise's program loaded on `backend`, driven by P4Info names."""
    program, info = compile_program(HERE / f"{name}.p4")
    return PipelineDriver(new_pipeline(program, info, backend), info)


# ------------------------------------------------------------------------- calc


def calc_frame(op: bytes, a: int, b: int, magic: bytes = b"P4\x01") -> bytes:
    return MAC_B + MAC_A + b"\x12\x34" + magic + op + struct.pack(">III", a, b, 0)


@pytest.mark.parametrize(
    ("op", "a", "b", "result"),
    [
        (b"+", 7, 5, 12),
        (b"-", 7, 9, 2**32 - 2),
        (b"&", 0b1100, 0b1010, 0b1000),
        (b"|", 1, 2, 3),
        (b"^", 6, 3, 5),
    ],
)
def test_calc_answers_to_the_sender_with_the_result(
    op: bytes, a: int, b: int, result: int, backend: str
) -> None:
    ((port, frame),) = load("calc", backend).process(3, calc_frame(op, a, b))
    assert port == 3  # back out of the port it came in on
    assert frame[:12] == MAC_A + MAC_B  # addresses swapped
    assert struct.unpack(">III", frame[18:30]) == (a, b, result)


def test_calc_drops_unknown_operators_and_foreign_packets(backend: str) -> None:
    calc = load("calc", backend)
    assert calc.process(1, calc_frame(b"*", 1, 2)) == []
    assert calc.process(1, calc_frame(b"+", 1, 2, magic=b"P5\x01")) == []  # lookahead says: not calc
    assert calc.process(1, calc_frame(b"+", 1, 2)[:20]) == []  # too short to look ahead


# ---------------------------------------------------------------- source_routing

IPV4 = bytes.fromhex("450000140000000040110000") + bytes([10, 0, 1, 1, 10, 0, 2, 2])


def routed(*ports: int) -> bytes:
    hops = b"".join(
        struct.pack(">H", (1 << 15 if i == len(ports) - 1 else 0) | p) for i, p in enumerate(ports)
    )
    return MAC_B + MAC_A + b"\x12\x34" + hops + IPV4


def test_source_routing_pops_one_hop_per_switch(backend: str) -> None:
    switch = load("source_routing", backend)
    ((port, frame),) = switch.process(1, routed(4, 2, 3))
    assert port == 4
    assert frame == routed(2, 3)  # the first hop is gone, the rest intact
    ((port, frame),) = switch.process(1, frame)
    assert (port, frame) == (2, routed(3))


def test_source_routing_last_hop_restores_ipv4_and_decrements_ttl(backend: str) -> None:
    ((port, frame),) = load("source_routing", backend).process(1, routed(3))
    assert port == 3
    assert frame[12:14] == b"\x08\x00"
    assert frame[14:] == IPV4[:8] + bytes([IPV4[8] - 1]) + IPV4[9:]


def test_source_routing_drops_packets_without_a_route(backend: str) -> None:
    assert load("source_routing", backend).process(1, MAC_B + MAC_A + b"\x08\x00" + IPV4) == []


def test_source_routing_more_hops_than_the_stack_holds_is_a_parser_error_not_a_crash(backend: str) -> None:
    # Ten hops overflow the 9-entry stack: StackOutOfBounds stops the parser; ingress still runs.
    out = load("source_routing", backend).process(1, routed(*range(1, 11)))
    assert [port for port, _ in out] == [1]


# -------------------------------------------------------------------- IPv4 helpers

NEXT_HOP_1, NEXT_HOP_2 = bytes.fromhex("080000000111"), bytes.fromhex("080000000222")


def mac(raw: bytes) -> str:
    return raw.hex(":")


def ipv4(dst: str, src: str = "10.0.1.1", ttl: int = 64, **fields: object) -> bytes:
    """An Ethernet + IPv4 frame from host A to the switch, with a valid header checksum."""
    return bytes(Ether(dst=mac(MAC_B), src=mac(MAC_A)) / IP(src=src, dst=dst, ttl=ttl, **fields) / UDP())


def checksum_ok(header: bytes) -> bool:
    """The ones'-complement sum over an IPv4 header, checksum included, is all ones."""
    total = sum(int.from_bytes(header[i : i + 2], "big") for i in range(0, len(header), 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def routes(driver: PipelineDriver, control: str = "Forward") -> PipelineDriver:
    """The basic exercise's routes: 10.0.0.0/8 via next hop 1 on port 1, 10.0.2.0/24 via 2 on port 2."""
    for prefix, length, hop, port in ((0x0A000000, 8, NEXT_HOP_1, 1), (0x0A000200, 24, NEXT_HOP_2, 2)):
        driver.table_add(
            f"{control}.ipv4_lpm",
            {"hdr.ipv4.dst": (prefix, length)},
            f"{control}.ipv4_forward",
            {"dst_mac": int.from_bytes(hop, "big"), "port": port},
        )
    return driver


def forwarded(out: list[tuple[int, bytes]], port: int, hop: bytes, sent: bytes) -> IP:
    """The one frame out went to `port` towards `hop`, TTL one less, checksum valid; its IPv4 layer."""
    ((out_port, frame),) = out
    assert out_port == port
    assert frame[:12] == hop + MAC_B  # next hop's MAC; the switch's (the old destination) as source
    assert frame[22] == sent[22] - 1  # TTL
    assert checksum_ok(frame[14:34])
    return Ether(frame)[IP]


# ------------------------------------------------------------------------ basic


def test_basic_forwards_by_longest_prefix_decrementing_ttl(backend: str) -> None:
    basic = routes(switch("basic", backend))
    sent = ipv4("10.0.2.5")
    ip = forwarded(basic.send(4, sent), 2, NEXT_HOP_2, sent)
    assert bytes(ip.payload) == sent[34:]  # the rest untouched
    sent = ipv4("10.9.9.9", ttl=1)
    assert forwarded(basic.send(4, sent), 1, NEXT_HOP_1, sent).ttl == 0


def test_basic_drops_what_it_has_no_route_for(backend: str) -> None:
    basic = routes(switch("basic", backend))
    assert basic.send(1, ipv4("192.168.0.1")) == []
    assert basic.send(1, bytes(Ether(dst=mac(MAC_B), src=mac(MAC_A), type=0x806) / (b"\0" * 28))) == []


# ----------------------------------------------------------------- basic_tunnel


def tunnelled(dst_id: int, inner: bytes) -> bytes:
    return MAC_B + MAC_A + b"\x12\x12" + struct.pack(">HH", 0x800, dst_id) + inner[14:]


def test_basic_tunnel_forwards_by_tunnel_id_whatever_the_ipv4_destination(backend: str) -> None:
    tunnel = routes(switch("basic_tunnel", backend))
    tunnel.table_add("Forward.tunnel_exact", {"hdr.tunnel.dst_id": 7}, "Forward.tunnel_forward", {"port": 3})
    sent = tunnelled(7, ipv4("10.0.2.5"))
    assert tunnel.send(1, sent) == [(3, sent)]  # unchanged: the tunnel is not routed
    assert tunnel.send(1, tunnelled(8, ipv4("10.0.2.5"))) == []  # unknown tunnel: dropped
    sent = ipv4("10.0.2.5")
    forwarded(tunnel.send(1, sent), 2, NEXT_HOP_2, sent)  # plain IPv4 still routed


# -------------------------------------------------------------------------- qos


@pytest.mark.parametrize(
    ("layer", "dscp"), [(UDP(), 46), (TCP(), 44), (ICMP(), 0)], ids=["udp-EF", "tcp-VA", "other-DF"]
)
def test_qos_marks_dscp_by_protocol_and_keeps_ecn(layer: object, dscp: int, backend: str) -> None:
    qos = routes(switch("qos", backend))
    sent = bytes(Ether(dst=mac(MAC_B), src=mac(MAC_A)) / IP(dst="10.0.2.5", tos=(12 << 2) | 1) / layer)
    ip = forwarded(qos.send(1, sent), 2, NEXT_HOP_2, sent)
    assert (ip.tos >> 2, ip.tos & 3) == (dscp, 1)


# -------------------------------------------------------------------------- ecn


def test_ecn_marks_capable_packets_only_at_the_threshold(backend: str) -> None:
    ecn = routes(switch("ecn", backend))
    # The switch has no queue (depth 0): under the exercise's threshold of 10 nothing is marked.
    for bits in range(4):
        sent = ipv4("10.0.2.5", tos=bits)
        assert forwarded(ecn.send(1, sent), 2, NEXT_HOP_2, sent).tos == bits
    ecn.set_default("Mark.ecn_threshold", "Mark.set_threshold", {"depth": 0})
    for bits, marked in ((0, 0), (1, 3), (2, 3), (3, 3)):  # not ECN-capable (0) is never marked
        sent = ipv4("10.0.2.5", tos=(5 << 2) | bits)
        assert forwarded(ecn.send(1, sent), 2, NEXT_HOP_2, sent).tos == (5 << 2) | marked


# --------------------------------------------------------------------- firewall

INSIDE, OUTSIDE = "10.0.1.1", "10.0.3.3"


def firewall(backend: str) -> PipelineDriver:
    """Host 10.0.1.1 inside on port 1, 10.0.3.3 outside on port 3."""
    fw = switch("firewall", backend)
    for host, port in ((0x0A000101, 1), (0x0A000303, 3)):
        fw.table_add(
            "Firewall.ipv4_lpm",
            {"hdr.ipv4.dst": (host, 32)},
            "Firewall.ipv4_forward",
            {"dst_mac": int.from_bytes(NEXT_HOP_1, "big"), "port": port},
        )
    for ingress, egress, direction in ((1, 3, 0), (3, 1, 1)):
        fw.table_add(
            "Firewall.check_ports",
            {"sm.ingress_port": ingress, "sm.egress_spec": egress},
            "Firewall.set_direction",
            {"dir": direction},
        )
    return fw


def tcp(src: str, dst: str, sport: int, dport: int, flags: str) -> bytes:
    return bytes(
        Ether(dst=mac(MAC_B), src=mac(MAC_A))
        / IP(src=src, dst=dst)
        / TCP(sport=sport, dport=dport, flags=flags)
    )


def test_firewall_lets_in_only_replies_to_connections_opened_from_inside(backend: str) -> None:
    fw = firewall(backend)
    reply = tcp(OUTSIDE, INSIDE, 80, 5000, "SA")
    assert fw.send(3, reply) == []  # nobody inside asked
    assert fw.send(1, tcp(INSIDE, OUTSIDE, 5000, 80, "A")) != []  # out is always allowed...
    assert fw.send(3, reply) == []  # ...but only a SYN opens the way back
    assert [port for port, _ in fw.send(1, tcp(INSIDE, OUTSIDE, 5000, 80, "S"))] == [3]
    assert [port for port, _ in fw.send(3, reply)] == [1]
    assert [port for port, _ in fw.send(3, tcp(OUTSIDE, INSIDE, 80, 5000, "A"))] == [1]
    assert fw.send(3, tcp(OUTSIDE, INSIDE, 81, 5000, "SA")) == []  # another connection: still closed
    # One connection, one cell in each half of the Bloom filter.
    for name in ("Firewall.bloom_1", "Firewall.bloom_2"):
        assert sum(fw.register(name, i) for i in range(4096)) == 1


def test_firewall_does_not_filter_other_traffic(backend: str) -> None:
    fw = firewall(backend)
    sent = ipv4(INSIDE, src=OUTSIDE)  # UDP from outside
    assert [port for port, _ in fw.send(3, sent)] == [1]


# ----------------------------------------------------------------- load_balance

VIRTUAL = 0x0A000001  # 10.0.0.1, the address the exercise balances
NHOPS = {2: (NEXT_HOP_1, "10.0.2.2", 0x0A000202), 3: (NEXT_HOP_2, "10.0.3.3", 0x0A000303)}
PORT_MAC = {2: 0x020000000F02, 3: 0x020000000F03}


def balancer(backend: str) -> PipelineDriver:
    lb = switch("load_balance", backend)
    lb.table_add(
        "Balance.ecmp_group",
        {"hdr.ipv4.dst": (VIRTUAL, 32)},
        "Balance.set_ecmp_select",
        {"base": 0, "count": 2},
    )
    for select, port in enumerate(NHOPS):
        hop, _, address = NHOPS[port]
        lb.table_add(
            "Balance.ecmp_nhop",
            {"meta.ecmp_select": select},
            "Balance.set_nhop",
            {"nhop_mac": int.from_bytes(hop, "big"), "nhop_ipv4": address, "port": port},
        )
        lb.table_add(
            "Rewrite.send_frame", {"sm.egress_port": port}, "Rewrite.rewrite_mac", {"smac": PORT_MAC[port]}
        )
    return lb


def test_load_balance_spreads_flows_over_next_hops_and_keeps_each_flow_on_one(backend: str) -> None:
    lb = balancer(backend)
    chosen: dict[int, int] = {}
    for sport in range(1000, 1032):
        sent = tcp("10.0.1.1", "10.0.0.1", sport, 80, "A")
        ((port, frame),) = lb.send(1, sent)
        hop, address, _ = NHOPS[port]
        out = Ether(frame)
        assert (out.dst, out.src, out[IP].dst) == (mac(hop), mac(PORT_MAC[port].to_bytes(6, "big")), address)
        assert out[IP].ttl == 63 and checksum_ok(frame[14:34])
        assert lb.send(1, sent)[0][0] == port  # the same flow, the same path
        chosen[sport] = port
    assert set(chosen.values()) == {2, 3}


def test_load_balance_drops_other_destinations(backend: str) -> None:
    assert balancer(backend).send(1, tcp("10.0.1.1", "10.0.9.9", 1000, 80, "A")) == []


# -------------------------------------------------------------------- multicast


def test_multicast_floods_to_the_group_except_the_ingress_port(backend: str) -> None:
    l2 = switch("multicast", backend)
    l2.multicast_group(1, [(port, 1) for port in (1, 2, 3, 4)])
    broadcast = b"\xff" * 6 + MAC_A + b"\x08\x00" + b"payload"
    assert sorted(l2.send(2, broadcast)) == [(1, broadcast), (3, broadcast), (4, broadcast)]
    l2.table_add(
        "Switching.mac_lookup",
        {"hdr.ethernet.dst": int.from_bytes(MAC_B, "big")},
        "Switching.forward",
        {"port": 4},
    )
    unicast = MAC_B + MAC_A + b"\x08\x00" + b"payload"
    assert l2.send(2, unicast) == [(4, unicast)]
    assert l2.send(4, unicast) == []  # never back out of the port it came in on


# -------------------------------------------------------------------------- mri

MRI_OPTION = bytes([0x5F, 4, 0, 0])  # copy 0, class 2, option 31; length 4; count 0


def test_mri_pushes_each_switch_trace_on_top(backend: str) -> None:
    first, second = routes(switch("mri", backend)), routes(switch("mri", backend))
    first.set_default("Trace.swtrace", "Trace.add_swtrace", {"swid": 7})
    second.set_default("Trace.swtrace", "Trace.add_swtrace", {"swid": 9})
    sent = ipv4("10.0.2.5", options=MRI_OPTION)
    ((_, hop1),) = first.send(1, sent)
    ((port, hop2),) = second.send(1, hop1)
    assert port == 2
    ip = hop2[14:]
    assert ip[0] == 0x46 + 4  # IHL grew by two words per switch
    assert struct.unpack(">H", ip[2:4])[0] == len(sent) - 14 + 16  # total length too
    assert ip[20:24] == bytes([0x5F, 4 + 16, 0, 2])  # option length and count
    assert struct.unpack(">IIII", ip[24:40]) == (9, 0, 7, 0)  # newest first; queue depth 0 here
    assert ip[40:] == sent[38:]  # then the UDP header, untouched


def test_mri_leaves_packets_without_the_option_alone(backend: str) -> None:
    mri = routes(switch("mri", backend))
    mri.set_default("Trace.swtrace", "Trace.add_swtrace", {"swid": 7})
    sent = ipv4("10.0.2.5")
    assert len(forwarded(mri.send(1, sent), 2, NEXT_HOP_2, sent)) == len(sent) - 14


# ----------------------------------------------------------------- link_monitor

PROBE_RECORD = struct.Struct(">BBI6s6s")  # bos|swid, port, bytes, last time, this time


def probe(hop_cnt: int, records: bytes, ports: list[int]) -> bytes:
    return b"\xff" * 6 + MAC_A + b"\x08\x12" + bytes([hop_cnt]) + records + bytes(ports)


def test_link_monitor_probes_collect_the_bytes_sent_on_each_link(backend: str) -> None:
    monitor = routes(switch("link_monitor", backend))
    monitor.set_default("Monitor.swid", "Monitor.set_swid", {"swid": 5})
    data = [ipv4("10.0.2.5"), ipv4("10.0.2.6", options=b"\x01" * 8)]
    for frame in data:
        assert [port for port, _ in monitor.send(1, frame)] == [2]
    sent = probe(0, b"", [2, 3])
    ((port, first),) = monitor.send(1, sent)
    assert port == 2
    record = (0x80 | 5, 2, sum(map(len, data)) + len(sent), bytes(6), bytes(6))  # no clock: times 0
    assert first == probe(1, PROBE_RECORD.pack(*record), [2, 3])
    assert monitor.register("Monitor.byte_cnt_reg", 2) == 0  # counting starts again
    # The next hop (here the same switch again) follows the second port and stacks its record on top.
    ((port, second),) = monitor.send(1, first)
    assert port == 3
    newest = (5, 3, len(first), bytes(6), bytes(6))
    assert second == probe(2, PROBE_RECORD.pack(*newest) + PROBE_RECORD.pack(*record), [2, 3])


# -------------------------------------------------------------------- p4runtime

TUNNEL_ID = 100


def tunnel_switch(backend: str, last_hop: bool) -> PipelineDriver:
    """A switch of the exercise's tunnel 100 towards 10.0.2.2: the first (pushes) or the last (pops)."""
    sw = switch("p4runtime", backend)
    sw.table_add(
        "Tunnel.ipv4_lpm", {"hdr.ipv4.dst": (0x0A000202, 32)}, "Tunnel.tunnel_ingress", {"dst_id": TUNNEL_ID}
    )
    if last_hop:
        host = {"dst_mac": int.from_bytes(NEXT_HOP_2, "big"), "port": 1}
        sw.table_add("Tunnel.tunnel_exact", {"hdr.tunnel.dst_id": TUNNEL_ID}, "Tunnel.tunnel_egress", host)
    else:
        sw.table_add(
            "Tunnel.tunnel_exact", {"hdr.tunnel.dst_id": TUNNEL_ID}, "Tunnel.tunnel_forward", {"port": 2}
        )
    return sw


def test_p4runtime_tunnel_is_pushed_forwarded_popped_and_counted(backend: str) -> None:
    first, last = tunnel_switch(backend, last_hop=False), tunnel_switch(backend, last_hop=True)
    sent = ipv4("10.0.2.2")
    ((port, inside),) = first.send(1, sent)
    assert port == 2
    assert inside == tunnelled(TUNNEL_ID, sent)  # tunnel header between Ethernet and IPv4
    ((port, delivered),) = last.send(3, inside)
    assert port == 1
    assert delivered == NEXT_HOP_2 + sent[6:]  # the host's MAC; nothing else changed
    assert first.counter("Tunnel.ingress_tunnel_counter", TUNNEL_ID) == (1, len(sent))
    assert last.counter("Tunnel.egress_tunnel_counter", TUNNEL_ID) == (1, len(inside))
    assert first.send(1, ipv4("10.0.3.3")) == []  # no tunnel provisioned: dropped
