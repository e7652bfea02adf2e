"""Packet-level scenarios of the p4reduce wire protocol (docs/protocol.md), for any switch.

Each scenario starts from a freshly loaded program (all registers and counters
zero, no table entries), installs the standard setup below unless it says
otherwise, then sends frames and states exactly which frames must come out,
and which counters and registers must hold what. A switch is reached only
through the small `Driver` protocol, so the same table runs against the
embedded switch, bmv2 or a reference model.

This module has no tests of its own: tests that own a switch call
`run_scenario(driver, scenario)` for every entry of `SCENARIOS`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw

from contracts.protocol import (
    FLOOD_GROUP,
    PACKET_DTYPE,
    PAYLOAD_BYTES,
    RESULT_TTL,
    SET_BIT,
    SLOT_COUNT,
    UDP_PORT,
    VALUES_PER_PACKET,
    DropReason,
    MsgType,
)


class Driver(Protocol):
    """What a scenario needs from a switch, by P4Info names ("MyIngress.job_table", "hdr.p4r.job_id")."""

    def table_add(self, table: str, match: dict[str, int], action: str, params: dict[str, int]) -> None: ...
    def set_default(self, table: str, action: str, params: dict[str, int]) -> None: ...
    def multicast_group(self, group: int, replicas: list[tuple[int, int]]) -> None: ...  # (port, rid)
    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]: ...  # (egress port, frame), in order
    def counter(self, name: str, index: int) -> tuple[int, int]: ...  # (packets, bytes)
    def register(self, name: str, index: int) -> int: ...


# --------------------------------------------------------------------------------------------------------
# Addresses of the standard setup
# --------------------------------------------------------------------------------------------------------

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.0.254"


@dataclass(frozen=True)
class Host:
    """A host behind a switch port; workers also have a registered UDP port."""

    port: int
    mac: str
    ip: str
    udp_port: int


def _host(n: int) -> Host:
    return Host(port=n, mac=f"02:00:00:00:00:{n:02x}", ip=f"10.0.0.{n}", udp_port=40000 + n)


H1, H2, H3, H4, H5, H6 = (_host(n) for n in range(1, 7))
HOSTS = (H1, H2, H3, H4, H5, H6)
UNKNOWN_MAC = "02:00:00:00:00:99"


@dataclass(frozen=True)
class Job:
    """A job as the controller would install it; workers[r] has rank r."""

    job_id: int
    base: int
    pool_size: int
    mcast_grp: int
    workers: tuple[Host, ...]

    def global_slot(self, slot: int) -> int:
        return self.base + slot

    def index(self, slot: int, set_bit: int) -> int:
        """Register index of (slot, set) in the per-set registers."""
        return set_bit * SLOT_COUNT + self.base + slot


JOB_A = Job(job_id=7, base=100, pool_size=8, mcast_grp=2, workers=(H1, H2, H3))
JOB_B = Job(job_id=9, base=200, pool_size=4, mcast_grp=3, workers=(H4, H5))

# --------------------------------------------------------------------------------------------------------
# Steps and scenarios
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: Mapping[str, int]
    action: str
    params: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Install:
    """Control-plane changes made between packets."""

    entries: tuple[TableEntry, ...] = ()
    groups: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()  # (group, ((port, rid), ...))


@dataclass(frozen=True)
class Out:
    """A frame that must leave the switch, compared field by field and then byte for byte."""

    port: int
    frame: bytes


@dataclass(frozen=True)
class Send:
    """Send `frame` into `port`; exactly the frames in `expect` must leave (in any order across ports)."""

    port: int
    frame: bytes
    expect: tuple[Out, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Check:
    """Counter values (packets, bytes) and register values that must hold at this point."""

    counters: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    registers: Mapping[tuple[str, int], int] = field(default_factory=dict)


Step = Install | Send | Check


@dataclass(frozen=True)
class Scenario:
    name: str
    doc: str
    steps: tuple[Step, ...]
    standard_setup: bool = True


DROP_COUNTERS = ("MyIngress.ingress_drops", "MyEgress.egress_drops")

# --------------------------------------------------------------------------------------------------------
# Frame builders
# --------------------------------------------------------------------------------------------------------


def ip_int(address: str) -> int:
    return int(ipaddress.IPv4Address(address))


def mac_int(address: str) -> int:
    return int(address.replace(":", ""), 16)


def wrap32(value: int) -> int:
    """A Python int as the signed 32-bit value the switch's wrapping adder yields."""
    return (value + 2**31) % 2**32 - 2**31


def vector(*head: int, seed: int = 0) -> tuple[int, ...]:
    """K signed values: `head` first, then a deterministic filler that differs per seed and mixes signs."""
    tail = [
        wrap32((i * 7919 + seed * 104729) * (-1) ** (i + seed)) for i in range(len(head), VALUES_PER_PACKET)
    ]
    return tuple(head) + tuple(tail)


def vector_sum(*vectors: Sequence[int]) -> tuple[int, ...]:
    return tuple(wrap32(sum(column)) for column in zip(*vectors, strict=True))


def p4reduce_payload(
    *,
    msg_type: int,
    rank: int,
    job_id: int,
    slot: int,
    set_bit: int,
    exp: int,
    flags: int,
    chunk: int,
    values: Sequence[int],
) -> bytes:
    record = np.zeros(1, dtype=PACKET_DTYPE)
    record["msg_type"] = msg_type
    record["rank"] = rank
    record["job_id"] = job_id
    record["set_slot"] = (SET_BIT if set_bit else 0) | slot
    record["exp"] = exp
    record["flags"] = flags
    record["chunk"] = chunk
    record["values"][0] = np.asarray(values, dtype=np.int64).astype(np.int32)
    return record.tobytes()


def data_packet(
    sender: Host,
    job_id: int,
    rank: int,
    slot: int,
    values: Sequence[int],
    *,
    set_bit: int = 0,
    exp: int = 0,
    chunk: int = 0,
    flags: int = 0,
    msg_type: int = MsgType.DATA,
    dst_mac: str = SWITCH_MAC,
    dst_ip: str = SWITCH_IP,
    ip_chksum: int | None = None,
    udp_chksum: int | None = 0,
    ip_len: int | None = None,
    udp_len: int | None = None,
    extra: bytes = b"",
    ttl: int = 40,
) -> bytes:
    """A DATA frame as a worker sends it; keyword overrides build the malformed variants.

    The TTL differs from RESULT_TTL so that a switch that forgets to reset it is caught.
    """
    payload = p4reduce_payload(
        msg_type=msg_type,
        rank=rank,
        job_id=job_id,
        slot=slot,
        set_bit=set_bit,
        exp=exp,
        flags=flags,
        chunk=chunk,
        values=values,
    )
    frame = (
        Ether(src=sender.mac, dst=dst_mac)
        / IP(src=sender.ip, dst=dst_ip, id=chunk & 0xFFFF, flags="DF", ttl=ttl, chksum=ip_chksum, len=ip_len)
        / UDP(sport=sender.udp_port, dport=UDP_PORT, chksum=udp_chksum, len=udp_len)
        / Raw(payload + extra)
    )
    return bytes(frame)


def result_packet(
    dest: Host,
    job_id: int,
    rank: int,
    slot: int,
    values: Sequence[int],
    *,
    set_bit: int = 0,
    exp: int = 0,
    chunk: int = 0,
    flags: int = 0,
) -> bytes:
    """The RESULT a worker must receive; IPv4 identification and flags are those of the DATA that made it."""
    payload = p4reduce_payload(
        msg_type=MsgType.RESULT,
        rank=rank,
        job_id=job_id,
        slot=slot,
        set_bit=set_bit,
        exp=exp,
        flags=flags,
        chunk=chunk,
        values=values,
    )
    frame = (
        Ether(src=SWITCH_MAC, dst=dest.mac)
        / IP(src=SWITCH_IP, dst=dest.ip, id=chunk & 0xFFFF, flags="DF", ttl=RESULT_TTL)
        / UDP(sport=UDP_PORT, dport=dest.udp_port, chksum=0)
        / Raw(payload)
    )
    return bytes(frame)


def multicast_results(
    job: Job, rank: int, slot: int, values: Sequence[int], **fields: int
) -> tuple[Out, ...]:
    """One RESULT per worker of `job`, each out of that worker's port; `rank` is the completing sender's."""
    return tuple(Out(w.port, result_packet(w, job.job_id, rank, slot, values, **fields)) for w in job.workers)


def contribution(job: Job, rank: int, slot: int, values: Sequence[int], **fields: int) -> bytes:
    worker = job.workers[rank]
    return data_packet(worker, job.job_id, rank, slot, values, **fields)


def flooded(frame: bytes, ingress_port: int) -> tuple[Out, ...]:
    return tuple(Out(h.port, frame) for h in HOSTS if h.port != ingress_port)


def job_install(job: Job, ranks_with_dest: Iterable[int] | None = None) -> Install:
    """job_table and result_dest entries and the multicast group, as the controller writes them."""
    entries: list[TableEntry] = []
    dest_ranks = set(range(len(job.workers)) if ranks_with_dest is None else ranks_with_dest)
    for rank, w in enumerate(job.workers):
        entries.append(
            TableEntry(
                "MyIngress.job_table",
                {"hdr.p4r.job_id": job.job_id, "hdr.p4r.rank": rank},
                "MyIngress.set_job",
                {
                    "base": job.base,
                    "pool_size": job.pool_size,
                    "num_workers": len(job.workers),
                    "worker_bit": 1 << rank,
                    "mcast_grp": job.mcast_grp,
                    "sender_port": w.port,
                    "sender_ip": ip_int(w.ip),
                    "sender_udp_port": w.udp_port,
                },
            )
        )
        if rank in dest_ranks:
            entries.append(
                TableEntry(
                    "MyEgress.result_dest",
                    {"hdr.p4r.job_id": job.job_id, "standard_metadata.egress_rid": rank},
                    "MyEgress.set_result_dest",
                    {"dst_mac": mac_int(w.mac), "dst_ip": ip_int(w.ip), "dst_udp_port": w.udp_port},
                )
            )
    replicas = tuple((w.port, rank) for rank, w in enumerate(job.workers))
    return Install(entries=tuple(entries), groups=((job.mcast_grp, replicas),))


def standard_setup() -> tuple[Install, ...]:
    """Switch address, L2 table for H1..H6, the flood group, and jobs A (ranks on H1..H3) and B (H4, H5)."""
    entries = [
        TableEntry(
            "MyIngress.arp_responder",
            {"hdr.arp.target_proto_addr": ip_int(SWITCH_IP)},
            "MyIngress.arp_reply",
            {"mac": mac_int(SWITCH_MAC)},
        ),
        TableEntry(
            "MyIngress.agg_addresses",
            {"hdr.ipv4.dst_addr": ip_int(SWITCH_IP)},
            "MyIngress.accept_aggregation",
        ),
    ]
    entries += [
        TableEntry(
            "MyIngress.l2_forward",
            {"hdr.ethernet.dst_addr": mac_int(h.mac)},
            "MyIngress.forward",
            {"port": h.port},
        )
        for h in HOSTS
    ]
    flood = Install(entries=tuple(entries), groups=((FLOOD_GROUP, tuple((h.port, 0) for h in HOSTS)),))
    return (flood, job_install(JOB_A), job_install(JOB_B))


# --------------------------------------------------------------------------------------------------------
# The scenarios
# --------------------------------------------------------------------------------------------------------

DATA_LEN = 14 + 20 + 8 + PAYLOAD_BYTES
IDX = JOB_A.index  # register index of (slot, set) for job A
J = JOB_A.job_id

# Three contributions whose sums cover sign mixing and wrap-around in both directions.
A0 = vector(1, -5, 2**31 - 1, -(2**31), 0, seed=1)
A1 = vector(2, 3, 1, -1, -7, seed=2)
A2 = vector(3, -1, 0, 0, 7, seed=3)
A_SUM = vector_sum(A0, A1, A2)


def _drops(reason: DropReason, packets: int, byte_count: int) -> dict[tuple[str, int], tuple[int, int]]:
    return {("MyIngress.ingress_drops", reason.value): (packets, byte_count)}


def _complete_slot(job: Job, slot: int, vectors: Sequence[Sequence[int]], **fields: int) -> tuple[Send, ...]:
    """All workers of `job` contribute once to `slot`; the last one completes it."""
    steps = []
    last = len(vectors) - 1
    for rank, values in enumerate(vectors):
        expect = multicast_results(job, last, slot, vector_sum(*vectors), **fields) if rank == last else ()
        steps.append(Send(job.workers[rank].port, contribution(job, rank, slot, values, **fields), expect))
    return tuple(steps)


def _with_ip(frame: bytes, **changes: object) -> bytes:
    """`frame` with IPv4 fields changed (lengths and checksum recomputed)."""
    pkt = Ether(frame)
    for name, value in changes.items():
        pkt[IP].setfieldval(name, value)
    pkt[IP].len = pkt[IP].ihl = pkt[IP].chksum = None
    return bytes(pkt)


def _scenarios() -> tuple[Scenario, ...]:
    wrong_port = data_packet(H1, J, 0, 0, A0)
    bad_len_ip = data_packet(H1, J, 0, 0, A0, extra=b"\0\0\0\0")
    bad_len_udp = data_packet(H1, J, 0, 0, A0, udp_len=8 + PAYLOAD_BYTES + 2)
    truncated = data_packet(H1, J, 0, 0, A0)[:100]
    truncated_udp = data_packet(H1, J, 0, 0, A0)[:38]
    arp_request = bytes(
        Ether(src=H1.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=H1.mac, psrc=H1.ip, pdst=SWITCH_IP)
    )
    arp_reply = bytes(
        Ether(src=SWITCH_MAC, dst=H1.mac)
        / ARP(op=2, hwsrc=SWITCH_MAC, psrc=SWITCH_IP, hwdst=H1.mac, pdst=H1.ip)
    )
    arp_other = bytes(
        Ether(src=H1.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=H1.mac, psrc=H1.ip, pdst=H2.ip)
    )
    l2_frame = bytes(
        Ether(src=H1.mac, dst=H2.mac) / IP(src=H1.ip, dst=H2.ip, chksum=0xDEAD) / UDP(sport=5, dport=6)
    )
    l2_p4r_port = data_packet(H1, J, 0, 0, A0, dst_mac=H2.mac, dst_ip=H2.ip)
    unknown_mac = bytes(
        Ether(src=H3.mac, dst=UNKNOWN_MAC) / IP(src=H3.ip, dst="10.9.9.9") / UDP(sport=7, dport=8)
    )

    b0, b1 = vector(10, -20, seed=4), vector(-10, 25, seed=5)
    c0, c1 = vector(100, seed=6), vector(-1, seed=7)
    job_c = Job(
        job_id=12, base=JOB_A.base, pool_size=2, mcast_grp=4, workers=(H4, H5)
    )  # reuses job A's range
    job_d = Job(job_id=13, base=300, pool_size=1, mcast_grp=5, workers=(H1, H6))
    job_e = Job(job_id=11, base=SLOT_COUNT - 2, pool_size=4, mcast_grp=6, workers=(H6,))  # overruns the pool
    job_solo = Job(job_id=14, base=400, pool_size=1, mcast_grp=7, workers=(H6,))
    with_options = _with_ip(contribution(JOB_A, 0, 0, A0), options=[IPOption_NOP()] * 4)
    fragment = _with_ip(contribution(JOB_A, 0, 0, A0), frag=1)
    s1 = (vector(5, seed=8), vector(6, seed=9), vector(7, seed=10))
    s2 = (vector(-5, seed=11), vector(60, seed=12), vector(-70, seed=13))

    return (
        Scenario(
            "first_middle_last",
            "The first contribution overwrites, the middle adds, the last completes and is multicast to "
            "every worker with signed, wrapping sums and the maximum exponent; a nonzero UDP checksum on "
            "input is ignored.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, exp=140, chunk=5, flags=3), note="first"),
                Check(
                    registers={
                        ("MyIngress.bitmap", IDX(0, 0)): 0b001,
                        ("MyIngress.remaining", IDX(0, 0)): 2,
                        ("MyIngress.owner", JOB_A.global_slot(0)): J,
                    }
                ),
                Send(
                    2,
                    contribution(JOB_A, 1, 0, A1, exp=130, chunk=5, flags=3, udp_chksum=None),
                    note="middle",
                ),
                Check(
                    registers={("MyIngress.bitmap", IDX(0, 0)): 0b011, ("MyIngress.remaining", IDX(0, 0)): 1}
                ),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, exp=135, chunk=5, flags=3),
                    multicast_results(JOB_A, 2, 0, A_SUM, exp=140, chunk=5, flags=3),
                    note="last",
                ),
                Check(
                    counters={
                        ("MyIngress.job_data_in", J): (3, 3 * DATA_LEN),
                        ("MyIngress.job_results_out", J): (1, DATA_LEN),
                        ("MyIngress.job_retransmissions", J): (0, 0),
                    },
                    registers={
                        ("MyIngress.bitmap", IDX(0, 0)): 0b111,
                        ("MyIngress.remaining", IDX(0, 0)): 0,
                        ("MyIngress.exp_max", IDX(0, 0)): 140,
                        ("MyIngress.value00", IDX(0, 0)): A_SUM[0] & 0xFFFFFFFF,
                        ("MyIngress.value02", IDX(0, 0)): A_SUM[2] & 0xFFFFFFFF,
                        ("MyIngress.value31", IDX(0, 0)): A_SUM[31] & 0xFFFFFFFF,
                    },
                ),
            ),
        ),
        Scenario(
            "exponent_max_and_none",
            "exp_max keeps the largest biased exponent; 0 (none) never wins over a real one.",
            (
                Send(1, contribution(JOB_A, 0, 1, A0, exp=0)),
                Send(2, contribution(JOB_A, 1, 1, A1, exp=137)),
                Send(3, contribution(JOB_A, 2, 1, A2, exp=0), multicast_results(JOB_A, 2, 1, A_SUM, exp=137)),
                Check(registers={("MyIngress.exp_max", IDX(1, 0)): 137}),
            ),
        ),
        Scenario(
            "early_duplicate",
            "A retransmission to an incomplete slot is dropped as EARLY_DUPLICATE and not added twice.",
            (
                Send(1, contribution(JOB_A, 0, 2, A0)),
                Send(1, contribution(JOB_A, 0, 2, A0), note="duplicate"),
                Check(
                    counters={
                        ("MyIngress.job_retransmissions", J): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (1, DATA_LEN),
                        **_drops(DropReason.EARLY_DUPLICATE, 1, DATA_LEN),
                    },
                    registers={("MyIngress.remaining", IDX(2, 0)): 2, ("MyIngress.bitmap", IDX(2, 0)): 0b001},
                ),
                Send(2, contribution(JOB_A, 1, 2, A1)),
                Send(3, contribution(JOB_A, 2, 2, A2), multicast_results(JOB_A, 2, 2, A_SUM)),
            ),
        ),
        Scenario(
            "retransmission_after_completion_replays",
            "A retransmission to a complete slot is answered by unicast to its sender only, out of its port, "
            "even after other workers have moved on to the other set.",
            (
                *_complete_slot(JOB_A, 3, (A0, A1, A2), chunk=9),
                Send(
                    2,
                    contribution(JOB_A, 1, 3, A1, chunk=9),
                    (Out(H2.port, result_packet(H2, J, 1, 3, A_SUM, chunk=9)),),
                    note="rank 1 lost the result",
                ),
                Send(1, contribution(JOB_A, 0, 3, A0, set_bit=1, chunk=10), note="rank 0 moves on"),
                Send(
                    2,
                    contribution(JOB_A, 1, 3, A1, chunk=9),
                    (Out(H2.port, result_packet(H2, J, 1, 3, A_SUM, chunk=9)),),
                    note="still replayed",
                ),
                Check(
                    counters={
                        ("MyIngress.job_retransmissions", J): (2, 2 * DATA_LEN),
                        ("MyIngress.job_replays", J): (2, 2 * DATA_LEN),
                        ("MyIngress.job_results_out", J): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (4, 4 * DATA_LEN),
                    },
                    registers={
                        ("MyIngress.bitmap", IDX(3, 0)): 0b110,
                        ("MyIngress.bitmap", IDX(3, 1)): 0b001,
                    },
                ),
                Send(2, contribution(JOB_A, 1, 3, A1, set_bit=1, chunk=10)),
                Send(
                    3,
                    contribution(JOB_A, 2, 3, A2, set_bit=1, chunk=10),
                    multicast_results(JOB_A, 2, 3, A_SUM, set_bit=1, chunk=10),
                ),
            ),
        ),
        Scenario(
            "slot_reuse_flips_set",
            "Reusing a slot on the other set clears the worker's bit in the old set and aggregates afresh; "
            "the third use, back on set 0, overwrites the first use's values.",
            (
                *_complete_slot(JOB_A, 4, s1),
                Send(1, contribution(JOB_A, 0, 4, s2[0], set_bit=1)),
                Check(
                    registers={("MyIngress.bitmap", IDX(4, 0)): 0b110, ("MyIngress.bitmap", IDX(4, 1)): 0b001}
                ),
                Send(2, contribution(JOB_A, 1, 4, s2[1], set_bit=1)),
                Check(
                    registers={("MyIngress.bitmap", IDX(4, 0)): 0b100, ("MyIngress.bitmap", IDX(4, 1)): 0b011}
                ),
                Send(
                    3,
                    contribution(JOB_A, 2, 4, s2[2], set_bit=1),
                    multicast_results(JOB_A, 2, 4, vector_sum(*s2), set_bit=1),
                ),
                Check(registers={("MyIngress.bitmap", IDX(4, 0)): 0, ("MyIngress.bitmap", IDX(4, 1)): 0b111}),
                *_complete_slot(JOB_A, 4, (A0, A1, A2)),
                Check(registers={("MyIngress.bitmap", IDX(4, 0)): 0b111, ("MyIngress.bitmap", IDX(4, 1)): 0}),
            ),
        ),
        Scenario(
            "wrong_sender",
            "Only the registered port, IPv4 source and UDP source port may speak for (job, rank).",
            (
                Send(2, wrong_port, note="rank 0's packet from rank 1's port"),
                Send(
                    1,
                    data_packet(Host(1, H1.mac, H2.ip, H1.udp_port), J, 0, 0, A0),
                    note="rank 1's IPv4 source",
                ),
                Send(1, data_packet(Host(1, H1.mac, H1.ip, 1234), J, 0, 0, A0), note="other UDP source port"),
                Send(4, data_packet(H4, J, 0, 0, A0), note="job B's host claims job A rank 0"),
                Check(
                    counters={
                        **_drops(DropReason.WRONG_SENDER, 4, 4 * DATA_LEN),
                        ("MyIngress.job_data_in", J): (0, 0),
                    },
                    registers={
                        ("MyIngress.bitmap", IDX(0, 0)): 0,
                        ("MyIngress.owner", JOB_A.global_slot(0)): 0,
                    },
                ),
            ),
        ),
        Scenario(
            "unknown_job",
            "A (job_id, rank) without a job_table entry is dropped as UNKNOWN_JOB.",
            (
                Send(1, data_packet(H1, 99, 0, 0, A0), note="no such job"),
                Send(1, data_packet(H1, J, 5, 0, A0), note="no such rank"),
                Check(counters=_drops(DropReason.UNKNOWN_JOB, 2, 2 * DATA_LEN)),
            ),
        ),
        Scenario(
            "slot_out_of_range",
            "slot >= pool_size, and a job entry whose range overruns the switch's pool, drop as "
            "SLOT_OUT_OF_RANGE.",
            (
                Send(1, contribution(JOB_A, 0, JOB_A.pool_size, A0)),
                Send(1, contribution(JOB_A, 0, 0x7FFF, A0, set_bit=1)),
                job_install(job_e),
                Send(6, contribution(job_e, 0, 2, A0), note="base + slot = SLOT_COUNT"),
                Check(counters=_drops(DropReason.SLOT_OUT_OF_RANGE, 3, 3 * DATA_LEN)),
            ),
        ),
        Scenario(
            "truncated",
            "A frame that ends inside a header the parser needs is dropped as TRUNCATED, counting its "
            "own length.",
            (
                Send(1, truncated, note="ends inside the values"),
                Send(1, truncated_udp, note="ends inside the UDP header"),
                Check(counters=_drops(DropReason.TRUNCATED, 2, len(truncated) + len(truncated_udp))),
            ),
        ),
        Scenario(
            "bad_length",
            "IPv4 total length or UDP length other than the p4reduce packet size drops as BAD_LENGTH.",
            (
                Send(1, bad_len_ip, note="4 bytes too long"),
                Send(1, bad_len_udp, note="UDP length disagrees"),
                Check(counters=_drops(DropReason.BAD_LENGTH, 2, len(bad_len_ip) + len(bad_len_udp))),
            ),
        ),
        Scenario(
            "bad_msg_type",
            "Only DATA is accepted from workers.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, msg_type=MsgType.RESULT)),
                Send(1, contribution(JOB_A, 0, 0, A0, msg_type=0)),
                Check(
                    counters=_drops(DropReason.BAD_TYPE, 2, 2 * DATA_LEN),
                    registers={("MyIngress.bitmap", IDX(0, 0)): 0},
                ),
            ),
        ),
        Scenario(
            "bad_ipv4_checksum",
            "Aggregation traffic with a wrong IPv4 header checksum drops as BAD_CHECKSUM.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, ip_chksum=0x1234)),
                Check(counters=_drops(DropReason.BAD_CHECKSUM, 1, DATA_LEN)),
            ),
        ),
        Scenario(
            "arp_for_switch_answered",
            "An ARP request for the aggregation address is answered out of the ingress port.",
            (Send(1, arp_request, (Out(1, arp_reply),)),),
        ),
        Scenario(
            "arp_for_other_host_flooded",
            "An ARP request for another address is broadcast: flooded to every port but the ingress port.",
            (Send(1, arp_other, flooded(arp_other, 1)),),
        ),
        Scenario(
            "l2_known_mac_forwarded",
            "Ordinary traffic to a known MAC leaves unchanged by one port, even with a bad IPv4 checksum, "
            "and even to UDP port 20562 of a host that is not an aggregation address.",
            (
                Send(1, l2_frame, (Out(2, l2_frame),)),
                Send(1, l2_p4r_port, (Out(2, l2_p4r_port),)),
                Check(registers={("MyIngress.bitmap", IDX(0, 0)): 0}),
            ),
        ),
        Scenario(
            "l2_unknown_mac_flooded",
            "An unknown destination MAC is flooded, never back out of the ingress port.",
            (Send(3, unknown_mac, flooded(unknown_mac, 3)),),
        ),
        Scenario(
            "jobs_isolated",
            "Two jobs aggregate interleaved on their own slots; each result holds only its own job's values.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0)),
                Send(4, contribution(JOB_B, 0, 0, b0)),
                Send(2, contribution(JOB_A, 1, 0, A1)),
                Send(5, contribution(JOB_B, 1, 0, b1), multicast_results(JOB_B, 1, 0, vector_sum(b0, b1))),
                Send(3, contribution(JOB_A, 2, 0, A2), multicast_results(JOB_A, 2, 0, A_SUM)),
                Check(
                    counters={
                        ("MyIngress.job_data_in", JOB_B.job_id): (2, 2 * DATA_LEN),
                        ("MyIngress.job_results_out", JOB_B.job_id): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (3, 3 * DATA_LEN),
                    },
                    registers={
                        ("MyIngress.owner", JOB_A.global_slot(0)): J,
                        ("MyIngress.owner", JOB_B.global_slot(0)): JOB_B.job_id,
                    },
                ),
            ),
        ),
        Scenario(
            "deleted_jobs_slot_starts_clean",
            "A new job on slots a deleted job left half-filled starts clean: its rank 0 is not mistaken for "
            "the old rank 0 (no EARLY_DUPLICATE) and the old partial sum is not added.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0)),
                Send(2, contribution(JOB_A, 1, 0, A1)),
                job_install(job_c),
                Send(4, contribution(job_c, 0, 0, c0)),
                Check(
                    registers={
                        ("MyIngress.owner", job_c.global_slot(0)): job_c.job_id,
                        ("MyIngress.bitmap", job_c.index(0, 0)): 0b01,
                        ("MyIngress.remaining", job_c.index(0, 0)): 1,
                    }
                ),
                Send(5, contribution(job_c, 1, 0, c1), multicast_results(job_c, 1, 0, vector_sum(c0, c1))),
            ),
        ),
        Scenario(
            "missing_result_dest",
            "A result replica whose rank has no result_dest entry is dropped in egress as NO_RESULT_DEST; "
            "the other ranks still receive theirs.",
            (
                job_install(job_d, ranks_with_dest=(0,)),
                Send(1, contribution(job_d, 0, 0, A0)),
                Send(
                    6,
                    contribution(job_d, 1, 0, A1),
                    (Out(H1.port, result_packet(H1, 13, 1, 0, vector_sum(A0, A1))),),
                ),
                Check(counters={("MyEgress.egress_drops", DropReason.NO_RESULT_DEST.value): (1, DATA_LEN)}),
            ),
        ),
        Scenario(
            "single_worker_job",
            "With one worker the first contribution completes the slot at once; its retransmission replays.",
            (
                job_install(job_solo),
                Send(
                    6,
                    contribution(job_solo, 0, 0, A0, exp=131),
                    multicast_results(job_solo, 0, 0, A0, exp=131),
                ),
                Send(
                    6,
                    contribution(job_solo, 0, 0, A0, exp=131),
                    (Out(H6.port, result_packet(H6, job_solo.job_id, 0, 0, A0, exp=131)),),
                ),
                Check(
                    counters={
                        ("MyIngress.job_results_out", job_solo.job_id): (1, DATA_LEN),
                        ("MyIngress.job_replays", job_solo.job_id): (1, DATA_LEN),
                    },
                    registers={("MyIngress.remaining", job_solo.index(0, 0)): 0},
                ),
            ),
        ),
        Scenario(
            "not_aggregation_without_plain_ipv4",
            "IPv4 with options, or a fragment, is not aggregation traffic even to the aggregation address "
            "and port: it is forwarded at layer 2 (flooded, as the switch's MAC is not in l2_forward).",
            (
                Send(1, with_options, flooded(with_options, 1)),
                Send(1, fragment, flooded(fragment, 1)),
                Check(
                    counters={("MyIngress.job_data_in", J): (0, 0)},
                    registers={("MyIngress.bitmap", IDX(0, 0)): 0},
                ),
            ),
        ),
    )


SCENARIOS: tuple[Scenario, ...] = _scenarios()

# --------------------------------------------------------------------------------------------------------
# Running and comparing
# --------------------------------------------------------------------------------------------------------


def ipv4_checksum_ok(header: bytes) -> bool:
    """One's-complement sum over the header, checksum included, is all ones."""
    total = sum(int.from_bytes(header[i : i + 2], "big") for i in range(0, len(header), 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def frame_fields(frame: bytes) -> dict[str, object]:
    """The fields a scenario compares, by layer, decoded with scapy and contracts.protocol's record layout."""
    pkt: Packet = Ether(frame)
    out: dict[str, object] = {"eth.dst": pkt.dst, "eth.src": pkt.src, "eth.type": hex(pkt.type)}
    if ARP in pkt:
        arp = pkt[ARP]
        out.update(
            {f"arp.{name}": arp.getfieldval(name) for name in ("op", "hwsrc", "psrc", "hwdst", "pdst")}
        )
    if IP in pkt:
        ip = pkt[IP]
        for name in ("ihl", "tos", "len", "id", "flags", "frag", "ttl", "proto", "src", "dst"):
            out[f"ip.{name}"] = ip.getfieldval(name)
        out["ip.checksum_valid"] = ipv4_checksum_ok(frame[14 : 14 + 4 * ip.ihl])
    if UDP in pkt:
        udp = pkt[UDP]
        out.update({f"udp.{name}": udp.getfieldval(name) for name in ("sport", "dport", "len", "chksum")})
        payload = bytes(udp.payload)
        if len(payload) == PAYLOAD_BYTES:
            record = np.frombuffer(payload, dtype=PACKET_DTYPE)[0]
            for name in ("msg_type", "rank", "job_id", "exp", "flags", "chunk"):
                out[f"p4r.{name}"] = int(record[name])
            out["p4r.set"] = int(record["set_slot"]) >> 15
            out["p4r.slot"] = int(record["set_slot"]) & 0x7FFF
            out["p4r.values"] = [int(v) for v in record["values"]]
    out["length"] = len(frame)
    return out


def assert_frame(expected: bytes, actual: bytes, where: str) -> None:
    want, got = frame_fields(expected), frame_fields(actual)
    diffs = [
        f"  {k}: expected {want.get(k)!r}, got {got.get(k)!r}"
        for k in sorted(set(want) | set(got))
        if want.get(k) != got.get(k)
    ]
    assert not diffs, f"{where}: frame differs:\n" + "\n".join(diffs)
    assert expected == actual, (
        f"{where}: frames agree field by field but differ in bytes:\n{expected.hex()}\n{actual.hex()}"
    )


def install(driver: Driver, step: Install) -> None:
    """Apply one control-plane step: groups first, so entries can refer to them."""
    for group, replicas in step.groups:
        driver.multicast_group(group, list(replicas))
    for entry in step.entries:
        driver.table_add(entry.table, dict(entry.match), entry.action, dict(entry.params))


def run_scenario(driver: Driver, scenario: Scenario, *, check_registers: bool = True) -> None:
    """Execute a scenario on a freshly loaded switch; AssertionError says which step and field disagreed.

    check_registers=False skips register expectations for targets that cannot read registers (bmv2's
    P4Runtime server). Drop counters never mentioned by the scenario must stay zero at the end.
    """
    steps: tuple[Step, ...] = (standard_setup() if scenario.standard_setup else ()) + scenario.steps
    mentioned: set[tuple[str, int]] = set()
    for number, step in enumerate(steps):
        where = f"{scenario.name} step {number}"
        if isinstance(step, Install):
            install(driver, step)
        elif isinstance(step, Send):
            where += f" ({step.note})" if step.note else ""
            outputs = driver.send(step.port, step.frame)
            want_ports = sorted(out.port for out in step.expect)
            got_ports = sorted(port for port, _ in outputs)
            assert got_ports == want_ports, (
                f"{where}: frames left on ports {got_ports}, expected {want_ports}"
            )
            for port in sorted(set(want_ports)):
                wanted = sorted(out.frame for out in step.expect if out.port == port)
                got = sorted(frame for p, frame in outputs if p == port)
                for w, g in zip(wanted, got, strict=True):
                    assert_frame(w, g, f"{where} port {port}")
        else:
            for (name, index), value in step.counters.items():
                mentioned.add((name, index))
                actual = driver.counter(name, index)
                assert actual == value, f"{where}: counter {name}[{index}] is {actual}, expected {value}"
            if check_registers:
                for (name, index), value in step.registers.items():
                    actual_reg = driver.register(name, index)
                    assert actual_reg == value, (
                        f"{where}: register {name}[{index}] is {actual_reg}, expected {value}"
                    )
    for name in DROP_COUNTERS:
        for reason in DropReason:
            if (name, reason.value) not in mentioned:
                actual = driver.counter(name, reason.value)
                assert actual == (0, 0), f"{scenario.name}: unexpected drops {name}[{reason.name}] = {actual}"
