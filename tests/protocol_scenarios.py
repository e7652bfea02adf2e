"""Packet-level scenarios of the p4reduce wire protocol (docs/protocol.md, version 2), for any switch.

Each scenario starts from a freshly loaded program (all registers and counters
zero, no table entries) compiled at K = 64 (tests/packet_program.py), installs the standard
setup below unless it says otherwise, then sends frames and states exactly
which frames must come out, and which counters and registers must hold what.
A switch is reached only through the small `Driver` protocol, so the same table
runs against the embedded switch, bmv2 or a reference model.

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
    DEFAULT_SLOT_COUNT,
    ECN_CE,
    ECN_ECT0,
    ECN_NOT_ECT,
    EXP_NONFINITE,
    FLOOD_GROUP,
    HEADER_BYTES,
    HEADER_DTYPE,
    RESULT_TTL,
    SET_BIT,
    UDP_PORT,
    DropReason,
    MsgType,
    packet_dtype,
    payload_bytes,
    seq_of,
)
from tests.packet_program import PACKET_K

K = PACKET_K
SLOT_COUNT = DEFAULT_SLOT_COUNT
PAYLOAD_BYTES = payload_bytes(K)


class Driver(Protocol):
    """What a scenario needs from a switch, by P4Info names ("MyIngress.job_table", "hdr.p4r.job_id")."""

    def table_add(self, table: str, match: dict[str, int], action: str, params: dict[str, int]) -> None: ...
    def table_delete(self, table: str, match: dict[str, int]) -> None: ...
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
    """A job as the controller would install it; workers[r] has rank r and key keys[r]."""

    job_id: int
    base: int
    pool_size: int
    mcast_grp: int
    workers: tuple[Host, ...]
    epoch: int
    keys: tuple[int, ...]

    def global_slot(self, slot: int) -> int:
        return self.base + slot

    def index(self, slot: int, set_bit: int) -> int:
        """Register index of (slot, set) in the per-copy registers."""
        return set_bit * SLOT_COUNT + self.base + slot


JOB_A = Job(
    job_id=7,
    base=100,
    pool_size=8,
    mcast_grp=2,
    workers=(H1, H2, H3),
    epoch=0x5EED0007,
    keys=(0x0A0A0A0A, 0x0B0B0B0B, 0x0C0C0C0C),
)
JOB_B = Job(
    job_id=9,
    base=200,
    pool_size=4,
    mcast_grp=3,
    workers=(H4, H5),
    epoch=0x5EED0009,
    keys=(0x44444444, 0x55555555),
)

# The call descriptor scenarios use unless they test it: sum of 96 float32 (docs/protocol.md).
DESC = 0x20000060
SEQ = seq_of(3, 5)  # call 3, use 5

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
    """Control-plane changes made between packets: deletions first, then groups, then entries."""

    entries: tuple[TableEntry, ...] = ()
    groups: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()  # (group, ((port, rid), ...))
    deletes: tuple[tuple[str, Mapping[str, int]], ...] = ()  # (table, match)


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


def vector(*head: int, seed: int = 0, k: int = K) -> tuple[int, ...]:
    """k signed values: `head` first, then a deterministic filler that differs per seed and mixes signs."""
    tail = [wrap32((i * 7919 + seed * 104729) * (-1) ** (i + seed)) for i in range(len(head), k)]
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
    seq: int,
    key: int,
    call: int,
    aux: int,
    values: Sequence[int] | None,
) -> bytes:
    """The UDP payload: the 24-byte header, then the values (none for a notice)."""
    dtype = HEADER_DTYPE if values is None else packet_dtype(len(values))
    record = np.zeros(1, dtype=dtype)
    for name, value in (
        ("msg_type", msg_type),
        ("rank", rank),
        ("job_id", job_id),
        ("set_slot", (SET_BIT if set_bit else 0) | slot),
        ("exp", exp),
        ("flags", flags),
        ("seq", seq),
        ("key", key),
        ("call", call),
        ("aux", aux),
    ):
        record[name] = value
    if values is not None:
        record["values"][0] = np.asarray(values, dtype=np.int64).astype(np.int32)
    return record.tobytes()


def data_packet(
    sender: Host,
    job_id: int,
    rank: int,
    slot: int,
    values: Sequence[int] | None,
    *,
    set_bit: int = 0,
    exp: int = 0,
    seq: int = SEQ,
    key: int = 0,
    call: int = DESC,
    aux: int = 0,
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
    tos: int = 0,
) -> bytes:
    """A DATA frame as a worker sends it; keyword overrides build the malformed variants.

    The TTL differs from RESULT_TTL so that a switch that forgets to reset it is caught; the IPv4
    identification is the low half of seq, so that answers show which DATA made them.
    """
    payload = p4reduce_payload(
        msg_type=msg_type,
        rank=rank,
        job_id=job_id,
        slot=slot,
        set_bit=set_bit,
        exp=exp,
        flags=flags,
        seq=seq,
        key=key,
        call=call,
        aux=aux,
        values=values,
    )
    frame = (
        Ether(src=sender.mac, dst=dst_mac)
        / IP(
            src=sender.ip,
            dst=dst_ip,
            id=seq & 0xFFFF,
            flags="DF",
            ttl=ttl,
            tos=tos,
            chksum=ip_chksum,
            len=ip_len,
        )
        / UDP(sport=sender.udp_port, dport=UDP_PORT, chksum=udp_chksum, len=udp_len)
        / Raw(payload + extra)
    )
    return bytes(frame)


def answer_packet(
    dest: Host,
    job_id: int,
    rank: int,
    slot: int,
    values: Sequence[int] | None,
    *,
    msg_type: int = MsgType.RESULT,
    set_bit: int = 0,
    exp: int = 0,
    seq: int = SEQ,
    key: int = 0,
    call: int = DESC,
    aux: int = 0,
    flags: int = 0,
    tos: int = 0,
) -> bytes:
    """A packet from the switch to `dest`: a RESULT (with values) or a notice (header only)."""
    payload = p4reduce_payload(
        msg_type=msg_type,
        rank=rank,
        job_id=job_id,
        slot=slot,
        set_bit=set_bit,
        exp=exp,
        flags=flags,
        seq=seq,
        key=key,
        call=call,
        aux=aux,
        values=values,
    )
    frame = (
        Ether(src=SWITCH_MAC, dst=dest.mac)
        / IP(src=SWITCH_IP, dst=dest.ip, id=seq & 0xFFFF, flags="DF", ttl=RESULT_TTL, tos=tos)
        / UDP(sport=UDP_PORT, dport=dest.udp_port, chksum=0)
        / Raw(payload)
    )
    return bytes(frame)


def to_job(job: Job, rank: int, slot: int, values: Sequence[int] | None, **fields: int) -> tuple[Out, ...]:
    """One packet per worker of `job`, out of its port with its key; `rank` is the causing sender's."""
    return tuple(
        Out(w.port, answer_packet(w, job.job_id, rank, slot, values, key=job.keys[r], **fields))
        for r, w in enumerate(job.workers)
    )


def to_sender(job: Job, rank: int, slot: int, values: Sequence[int] | None, **fields: int) -> tuple[Out, ...]:
    """The one answer to `rank` alone (replay, ABORT of an aborted call, STALE), with its own key."""
    w = job.workers[rank]
    return (Out(w.port, answer_packet(w, job.job_id, rank, slot, values, key=job.keys[rank], **fields)),)


def contribution(job: Job, rank: int, slot: int, values: Sequence[int], **fields: int) -> bytes:
    worker = job.workers[rank]
    fields.setdefault("key", job.keys[rank])
    return data_packet(worker, job.job_id, rank, slot, values, **fields)


def query(job: Job, rank: int, slot: int, **fields: int) -> bytes:
    """A worker's header-only QUERY for one of its uses (or another header-only type: msg_type=)."""
    fields.setdefault("key", job.keys[rank])
    fields.setdefault("msg_type", MsgType.QUERY)
    return data_packet(job.workers[rank], job.job_id, rank, slot, None, **fields)


def flooded(frame: bytes, ingress_port: int) -> tuple[Out, ...]:
    return tuple(Out(h.port, frame) for h in HOSTS if h.port != ingress_port)


def rank_entries(
    job: Job, rank: int, host: Host | None = None, key: int | None = None
) -> tuple[TableEntry, ...]:
    """job_table and result_dest entries of one rank, as the controller writes them when it joins."""
    w = host or job.workers[rank]
    secret = job.keys[rank] if key is None else key
    return (
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
                "key": secret,
                "epoch": job.epoch,
            },
        ),
        TableEntry(
            "MyEgress.result_dest",
            {"hdr.p4r.job_id": job.job_id, "standard_metadata.egress_rid": rank},
            "MyEgress.set_result_dest",
            {"dst_mac": mac_int(w.mac), "dst_ip": ip_int(w.ip), "dst_udp_port": w.udp_port, "key": secret},
        ),
    )


def rank_deletes(job: Job, rank: int) -> tuple[tuple[str, Mapping[str, int]], ...]:
    """What the controller deletes when a rank leaves its job."""
    return (
        ("MyIngress.job_table", {"hdr.p4r.job_id": job.job_id, "hdr.p4r.rank": rank}),
        ("MyEgress.result_dest", {"hdr.p4r.job_id": job.job_id, "standard_metadata.egress_rid": rank}),
    )


def job_install(job: Job, ranks_with_dest: Iterable[int] | None = None) -> Install:
    """job_table and result_dest entries and the multicast group, as the controller writes them."""
    dest_ranks = set(range(len(job.workers)) if ranks_with_dest is None else ranks_with_dest)
    entries: list[TableEntry] = []
    for rank in range(len(job.workers)):
        table_entry, dest_entry = rank_entries(job, rank)
        entries.append(table_entry)
        if rank in dest_ranks:
            entries.append(dest_entry)
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
NOTICE_LEN = 14 + 20 + 8 + HEADER_BYTES
QUERY_LEN = 14 + 20 + 8 + HEADER_BYTES
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
        expect = to_job(job, last, slot, vector_sum(*vectors), **fields) if rank == last else ()
        steps.append(Send(job.workers[rank].port, contribution(job, rank, slot, values, **fields), expect))
    return tuple(steps)


def _with_ip(frame: bytes, **changes: object) -> bytes:
    """`frame` with IPv4 fields changed (lengths and checksum recomputed)."""
    pkt = Ether(frame)
    for name, value in changes.items():
        pkt[IP].setfieldval(name, value)
    pkt[IP].len = pkt[IP].ihl = pkt[IP].chksum = None
    return bytes(pkt)


def _framing_scenarios() -> tuple[Scenario, ...]:
    """What is aggregation traffic, and what a malformed or foreign DATA costs."""
    bad_len_ip = data_packet(H1, J, 0, 0, A0, key=JOB_A.keys[0], extra=b"\0\0\0\0")
    bad_len_udp = data_packet(H1, J, 0, 0, A0, key=JOB_A.keys[0], udp_len=8 + PAYLOAD_BYTES + 2)
    version_1 = bytes(  # a version 1 DATA: 12-byte header, 32 values
        Ether(src=H1.mac, dst=SWITCH_MAC)
        / IP(src=H1.ip, dst=SWITCH_IP, flags="DF")
        / UDP(sport=H1.udp_port, dport=UDP_PORT, chksum=0)
        / Raw(bytes([1, 0, 0, J]) + bytes(8 + 128))
    )
    truncated = data_packet(H1, J, 0, 0, A0)[:100]
    truncated_udp = data_packet(H1, J, 0, 0, A0)[:38]
    with_options = _with_ip(contribution(JOB_A, 0, 0, A0), options=[IPOption_NOP()] * 4)
    fragment = _with_ip(contribution(JOB_A, 0, 0, A0), frag=1)
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
    job_e = Job(11, base=SLOT_COUNT - 2, pool_size=4, mcast_grp=6, workers=(H6,), epoch=0xE, keys=(0xEEEE,))
    return (
        Scenario(
            "truncated",
            "A frame that ends inside a header the parser needs is dropped as TRUNCATED, counting its "
            "own length; a version 1 DATA (182 bytes) is such a frame.",
            (
                Send(1, truncated, note="ends inside the values"),
                Send(1, truncated_udp, note="ends inside the UDP header"),
                Send(1, version_1, note="a version 1 packet"),
                Check(
                    counters=_drops(
                        DropReason.TRUNCATED, 3, len(truncated) + len(truncated_udp) + len(version_1)
                    )
                ),
            ),
        ),
        Scenario(
            "bad_length",
            "IPv4 total length or UDP length other than the DATA size drops as BAD_LENGTH.",
            (
                Send(1, bad_len_ip, note="4 bytes too long"),
                Send(1, bad_len_udp, note="UDP length disagrees"),
                Check(counters=_drops(DropReason.BAD_LENGTH, 2, len(bad_len_ip) + DATA_LEN)),
            ),
        ),
        Scenario(
            "bad_msg_type",
            "Only DATA and QUERY are accepted from workers: a RESULT or notice that no parent switch sent "
            "(table from_parent) is BAD_TYPE, and so is a type the protocol does not define.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, msg_type=MsgType.RESULT)),
                Send(1, query(JOB_A, 0, 0, msg_type=MsgType.MISSING)),
                Send(1, contribution(JOB_A, 0, 0, A0, msg_type=0)),
                Send(1, contribution(JOB_A, 0, 0, A0, msg_type=7)),
                Check(
                    counters=_drops(DropReason.BAD_TYPE, 4, 3 * DATA_LEN + NOTICE_LEN),
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
            "unknown_job",
            "A (job_id, rank) without a job_table entry is dropped as UNKNOWN_JOB.",
            (
                Send(1, data_packet(H1, 99, 0, 0, A0), note="no such job"),
                Send(1, data_packet(H1, J, 5, 0, A0), note="no such rank"),
                Check(counters=_drops(DropReason.UNKNOWN_JOB, 2, 2 * DATA_LEN)),
            ),
        ),
        Scenario(
            "wrong_sender",
            "Only the registered port, IPv4 source and UDP source port may speak for (job, rank), even "
            "with the rank's key.",
            (
                Send(2, contribution(JOB_A, 0, 0, A0), note="rank 0's packet from rank 1's port"),
                Send(
                    1,
                    data_packet(Host(1, H1.mac, H2.ip, H1.udp_port), J, 0, 0, A0, key=JOB_A.keys[0]),
                    note="rank 1's IPv4 source",
                ),
                Send(
                    1,
                    data_packet(Host(1, H1.mac, H1.ip, 1234), J, 0, 0, A0, key=JOB_A.keys[0]),
                    note="other UDP source port",
                ),
                Send(
                    4,
                    data_packet(H4, J, 0, 0, A0, key=JOB_A.keys[0]),
                    note="job B's host claims job A rank 0",
                ),
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
            "bad_key",
            "The registered host without the rank's current key is refused as BAD_KEY: another rank's "
            "key, none, or a guess.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, key=JOB_A.keys[1]), note="rank 1's key"),
                Send(1, contribution(JOB_A, 0, 0, A0, key=0), note="no key"),
                Send(1, contribution(JOB_A, 0, 0, A0, key=JOB_A.keys[0] ^ 1), note="one bit off"),
                Check(
                    counters={
                        **_drops(DropReason.BAD_KEY, 3, 3 * DATA_LEN),
                        ("MyIngress.job_data_in", J): (0, 0),
                    },
                    registers={("MyIngress.bitmap", IDX(0, 0)): 0},
                ),
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
    )


def _aggregation_scenarios() -> tuple[Scenario, ...]:
    """A use collected, completed, replayed; the copy's life across uses."""
    s1 = (vector(5, seed=8), vector(6, seed=9), vector(7, seed=10))
    s2 = (vector(-5, seed=11), vector(60, seed=12), vector(-70, seed=13))
    b0, b1 = vector(10, -20, seed=4), vector(-10, 25, seed=5)
    job_d = Job(13, base=300, pool_size=2, mcast_grp=5, workers=(H1, H6), epoch=0xD, keys=(0xD0, 0xD1))
    job_solo = Job(14, base=400, pool_size=2, mcast_grp=7, workers=(H6,), epoch=0x5010, keys=(0x6,))
    use0, use1, use2 = seq_of(2, 0), seq_of(2, 8), seq_of(2, 16)  # slot 0's three rounds with W = 8
    return (
        Scenario(
            "first_middle_last",
            "The first contribution stores, the middle adds, the last completes and is multicast to every "
            "worker with signed, wrapping sums, the maximum exponent and each worker's own key; a "
            "nonzero UDP checksum on input is ignored.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, exp=140, flags=3), note="first"),
                Check(
                    registers={
                        ("MyIngress.bitmap", IDX(0, 0)): 0b001,
                        ("MyIngress.remaining", IDX(0, 0)): 2,
                        ("MyIngress.copy_seq", IDX(0, 0)): SEQ,
                        ("MyIngress.copy_call", IDX(0, 0)): DESC,
                        ("MyIngress.owner", JOB_A.global_slot(0)): JOB_A.epoch,
                    }
                ),
                Send(2, contribution(JOB_A, 1, 0, A1, exp=130, flags=3, udp_chksum=None), note="middle"),
                Check(
                    registers={("MyIngress.bitmap", IDX(0, 0)): 0b011, ("MyIngress.remaining", IDX(0, 0)): 1}
                ),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, exp=135, flags=3),
                    to_job(JOB_A, 2, 0, A_SUM, exp=140, flags=3),
                    note="last",
                ),
                Check(
                    counters={
                        ("MyIngress.job_data_in", J): (3, 3 * DATA_LEN),
                        ("MyIngress.job_results_out", J): (1, DATA_LEN),
                        ("MyIngress.job_duplicates", J): (0, 0),
                    },
                    registers={
                        ("MyIngress.bitmap", IDX(0, 0)): 0b111,
                        ("MyIngress.remaining", IDX(0, 0)): 0,
                        ("MyIngress.exp_max", IDX(0, 0)): 140,
                        ("MyIngress.value00", IDX(0, 0)): A_SUM[0] & 0xFFFFFFFF,
                        ("MyIngress.value02", IDX(0, 0)): A_SUM[2] & 0xFFFFFFFF,
                        (f"MyIngress.value{K - 1:02x}", IDX(0, 0)): A_SUM[K - 1] & 0xFFFFFFFF,
                    },
                ),
            ),
        ),
        Scenario(
            "exponent_max_none_and_nonfinite",
            "exp_max keeps the largest biased exponent; 0 (none) never wins over a real one, and 255 "
            "(a non-finite block on some rank) wins over every other.",
            (
                Send(1, contribution(JOB_A, 0, 1, A0, exp=0)),
                Send(2, contribution(JOB_A, 1, 1, A1, exp=137)),
                Send(3, contribution(JOB_A, 2, 1, A2, exp=0), to_job(JOB_A, 2, 1, A_SUM, exp=137)),
                Send(1, contribution(JOB_A, 0, 2, A0, exp=130)),
                Send(2, contribution(JOB_A, 1, 2, A1, exp=EXP_NONFINITE)),
                Send(
                    3,
                    contribution(JOB_A, 2, 2, A2, exp=254),
                    to_job(JOB_A, 2, 2, A_SUM, exp=EXP_NONFINITE),
                ),
                Check(
                    registers={
                        ("MyIngress.exp_max", IDX(1, 0)): 137,
                        ("MyIngress.exp_max", IDX(2, 0)): EXP_NONFINITE,
                    }
                ),
            ),
        ),
        Scenario(
            "duplicate_data_is_dropped_not_added",
            "A DATA whose rank's contribution is already in the use, collecting or complete (a duplicate "
            "in the network, or a resend that crossed its original), is dropped as DUPLICATE without an "
            "answer: the sum stays exact and nothing is amplified.",
            (
                Send(1, contribution(JOB_A, 0, 2, A0)),
                Send(1, contribution(JOB_A, 0, 2, A0), note="the same DATA again"),
                Check(
                    counters={
                        **_drops(DropReason.DUPLICATE, 1, DATA_LEN),
                        ("MyIngress.job_duplicates", J): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (1, DATA_LEN),
                    },
                    registers={("MyIngress.remaining", IDX(2, 0)): 2, ("MyIngress.bitmap", IDX(2, 0)): 0b001},
                ),
                Send(2, contribution(JOB_A, 1, 2, A1)),
                Send(3, contribution(JOB_A, 2, 2, A2), to_job(JOB_A, 2, 2, A_SUM)),
                Send(2, contribution(JOB_A, 1, 2, A1), note="after completion"),
                Check(counters=_drops(DropReason.DUPLICATE, 2, 2 * DATA_LEN)),
            ),
        ),
        Scenario(
            "query_answers_where_the_use_is",
            "A QUERY (the header alone) asks for a use without resending it, and only the asker is "
            "answered: a collecting use without the asker's contribution answers MISSING with its "
            "contributors, one with it is not answered (CONTRIBUTED: the asker can only wait), a use no "
            "contribution has reached answers MISSING with none, a complete use replays its RESULT, a use "
            "behind the copy is STALE (counted as a drop, not as a query). Every answer echoes the "
            "QUERY's `flags`, the asker's number for the question.",
            (
                Send(1, contribution(JOB_A, 0, 2, A0)),
                Send(2, contribution(JOB_A, 1, 2, A1)),
                Send(
                    3,
                    query(JOB_A, 2, 2, flags=1),
                    to_sender(JOB_A, 2, 2, None, msg_type=MsgType.MISSING, aux=0b011, flags=1),
                    note="rank 2's DATA was lost",
                ),
                Send(1, query(JOB_A, 0, 2), note="rank 0 waits for rank 2: nothing to tell it"),
                Send(
                    2,
                    query(JOB_A, 1, 3, flags=2),
                    to_sender(JOB_A, 1, 3, None, msg_type=MsgType.MISSING, aux=0, flags=2),
                    note="every DATA of that use was lost",
                ),
                Send(3, contribution(JOB_A, 2, 2, A2), to_job(JOB_A, 2, 2, A_SUM)),
                Send(
                    2,
                    query(JOB_A, 1, 2, flags=255),
                    to_sender(JOB_A, 1, 2, A_SUM, flags=255),
                    note="rank 1's RESULT was lost",
                ),
                Send(
                    2,
                    query(JOB_A, 1, 2, seq=seq_of(2, 0), flags=7),
                    to_sender(JOB_A, 1, 2, None, msg_type=MsgType.STALE, seq=seq_of(2, 0), aux=SEQ, flags=7),
                    note="a use long gone",
                ),
                Send(
                    2, query(JOB_A, 1, 2, udp_len=8 + PAYLOAD_BYTES), note="a QUERY must be the header alone"
                ),
                Check(
                    counters={
                        ("MyIngress.job_queries", J): (4, 4 * QUERY_LEN),
                        ("MyIngress.job_missing", J): (2, 2 * QUERY_LEN),
                        ("MyIngress.job_replays", J): (1, QUERY_LEN),
                        ("MyIngress.job_duplicates", J): (0, 0),
                        **_drops(DropReason.CONTRIBUTED, 1, QUERY_LEN),
                        **_drops(DropReason.STALE, 1, QUERY_LEN),
                        **_drops(DropReason.BAD_LENGTH, 1, QUERY_LEN),
                    },
                    registers={("MyIngress.bitmap", IDX(3, 0)): 0},
                ),
            ),
        ),
        Scenario(
            "query_after_completion_replays",
            "A QUERY for a complete use is answered by unicast to its sender only, out of its port, with "
            "its own key, even after other workers have moved on to the slot's next use.",
            (
                *_complete_slot(JOB_A, 3, (A0, A1, A2), seq=use0),
                Send(
                    2,
                    query(JOB_A, 1, 3, seq=use0),
                    to_sender(JOB_A, 1, 3, A_SUM, seq=use0),
                    note="rank 1 lost it",
                ),
                Send(1, contribution(JOB_A, 0, 3, A0, set_bit=1, seq=use1), note="rank 0 moves on"),
                Send(
                    2,
                    query(JOB_A, 1, 3, seq=use0),
                    to_sender(JOB_A, 1, 3, A_SUM, seq=use0),
                    note="still replayed",
                ),
                Check(
                    counters={
                        ("MyIngress.job_queries", J): (2, 2 * QUERY_LEN),
                        ("MyIngress.job_replays", J): (2, 2 * QUERY_LEN),
                        ("MyIngress.job_results_out", J): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (4, 4 * DATA_LEN),
                    },
                    registers={
                        ("MyIngress.bitmap", IDX(3, 0)): 0b111,
                        ("MyIngress.bitmap", IDX(3, 1)): 0b001,
                    },
                ),
                Send(2, contribution(JOB_A, 1, 3, A1, set_bit=1, seq=use1)),
                Send(
                    3,
                    contribution(JOB_A, 2, 3, A2, set_bit=1, seq=use1),
                    to_job(JOB_A, 2, 3, A_SUM, set_bit=1, seq=use1),
                ),
            ),
        ),
        Scenario(
            "next_use_overwrites_the_copy",
            "A slot's uses alternate sets; the third use, back on set 0, is ahead of the first and starts "
            "the copy afresh: the first use's sums are overwritten, not added to.",
            (
                *_complete_slot(JOB_A, 4, s1, seq=use0),
                *_complete_slot(JOB_A, 4, s2, set_bit=1, seq=use1),
                Send(1, contribution(JOB_A, 0, 4, A0, seq=use2)),
                Check(
                    registers={
                        ("MyIngress.bitmap", IDX(4, 0)): 0b001,
                        ("MyIngress.copy_seq", IDX(4, 0)): use2,
                        ("MyIngress.value00", IDX(4, 0)): A0[0] & 0xFFFFFFFF,
                        ("MyIngress.bitmap", IDX(4, 1)): 0b111,
                    }
                ),
                Send(2, contribution(JOB_A, 1, 4, A1, seq=use2)),
                Send(3, contribution(JOB_A, 2, 4, A2, seq=use2), to_job(JOB_A, 2, 4, A_SUM, seq=use2)),
            ),
        ),
        Scenario(
            "jobs_isolated",
            "Two jobs aggregate interleaved on their own slots; each result holds only its own job's values.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0)),
                Send(4, contribution(JOB_B, 0, 0, b0)),
                Send(2, contribution(JOB_A, 1, 0, A1)),
                Send(5, contribution(JOB_B, 1, 0, b1), to_job(JOB_B, 1, 0, vector_sum(b0, b1))),
                Send(3, contribution(JOB_A, 2, 0, A2), to_job(JOB_A, 2, 0, A_SUM)),
                Check(
                    counters={
                        ("MyIngress.job_data_in", JOB_B.job_id): (2, 2 * DATA_LEN),
                        ("MyIngress.job_results_out", JOB_B.job_id): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (3, 3 * DATA_LEN),
                    },
                    registers={
                        ("MyIngress.owner", JOB_A.global_slot(0)): JOB_A.epoch,
                        ("MyIngress.owner", JOB_B.global_slot(0)): JOB_B.epoch,
                    },
                ),
            ),
        ),
        Scenario(
            "missing_result_dest",
            "A replica to the job whose rank has no result_dest entry is dropped in egress as "
            "NO_RESULT_DEST; the other ranks still receive theirs.",
            (
                job_install(job_d, ranks_with_dest=(0,)),
                Send(1, contribution(job_d, 0, 0, A0)),
                Send(
                    6,
                    contribution(job_d, 1, 0, A1),
                    (Out(H1.port, answer_packet(H1, 13, 1, 0, vector_sum(A0, A1), key=job_d.keys[0])),),
                ),
                Check(counters={("MyEgress.egress_drops", DropReason.NO_RESULT_DEST.value): (1, DATA_LEN)}),
            ),
        ),
        Scenario(
            "single_worker_job",
            "With one worker the first contribution completes the use at once; a duplicate is dropped and "
            "a QUERY replays.",
            (
                job_install(job_solo),
                Send(6, contribution(job_solo, 0, 0, A0, exp=131), to_job(job_solo, 0, 0, A0, exp=131)),
                Send(6, contribution(job_solo, 0, 0, A0, exp=131)),
                Send(6, query(job_solo, 0, 0, exp=131), to_sender(job_solo, 0, 0, A0, exp=131)),
                Check(
                    counters={
                        ("MyIngress.job_results_out", job_solo.job_id): (1, DATA_LEN),
                        ("MyIngress.job_replays", job_solo.job_id): (1, QUERY_LEN),
                        **_drops(DropReason.DUPLICATE, 1, DATA_LEN),
                    },
                    registers={("MyIngress.remaining", job_solo.index(0, 0)): 0},
                ),
            ),
        ),
    )


def _identity_scenarios() -> tuple[Scenario, ...]:
    """Late, duplicated and reordered packets; new jobs on old slots (use identity, docs/protocol.md)."""
    late = seq_of(2, 0)
    next_round = seq_of(2, 16)
    old_epoch_job = Job(
        12, base=JOB_A.base, pool_size=2, mcast_grp=4, workers=(H4, H5), epoch=0xC, keys=(0x40, 0x50)
    )
    recycled = Job(
        J, base=JOB_A.base, pool_size=8, mcast_grp=JOB_A.mcast_grp, workers=JOB_A.workers, epoch=0x5EED1007,
        keys=(0x1A, 0x1B, 0x1C),
    )  # fmt: skip
    c0, c1 = vector(100, seed=6), vector(-1, seed=7)
    return (
        Scenario(
            "late_duplicate_after_reuse_is_stale",
            "A duplicate of a use's DATA that arrives after the copy was reused by a later use is never "
            "added: it is dropped as STALE. A QUERY for that use is answered STALE, with the copy's seq.",
            (
                *_complete_slot(JOB_A, 5, (A0, A1, A2), seq=late),
                *_complete_slot(JOB_A, 5, (A0, A1, A2), set_bit=1, seq=seq_of(2, 8)),
                Send(1, contribution(JOB_A, 0, 5, A0, seq=next_round), note="round 3 starts on set 0"),
                Send(
                    2,
                    contribution(JOB_A, 1, 5, A1, seq=late),
                    note="rank 1's first DATA, duplicated and delayed",
                ),
                Send(
                    2,
                    query(JOB_A, 1, 5, seq=late),
                    to_sender(JOB_A, 1, 5, None, msg_type=MsgType.STALE, seq=late, aux=next_round),
                ),
                Check(
                    counters=_drops(DropReason.STALE, 2, DATA_LEN + QUERY_LEN),
                    registers={("MyIngress.bitmap", IDX(5, 0)): 0b001, ("MyIngress.remaining", IDX(5, 0)): 2},
                ),
                Send(2, contribution(JOB_A, 1, 5, A1, seq=next_round)),
                Send(
                    3,
                    contribution(JOB_A, 2, 5, A2, seq=next_round),
                    to_job(JOB_A, 2, 5, A_SUM, seq=next_round),
                    note="exact: the late packet was not added",
                ),
            ),
        ),
        Scenario(
            "reorder_across_calls",
            "A packet of an earlier call that overtakes nothing but arrives after a later call started on "
            "the same copy is stale, whatever its set; a packet of a later call arriving before the earlier "
            "call's last contribution starts the copy afresh only because that call is ahead.",
            (
                Send(1, contribution(JOB_A, 0, 6, A0, seq=seq_of(4, 0))),
                Send(2, contribution(JOB_A, 1, 6, A1, seq=seq_of(4, 0))),
                Send(
                    3,
                    contribution(JOB_A, 2, 6, A2, seq=seq_of(4, 0)),
                    to_job(JOB_A, 2, 6, A_SUM, seq=seq_of(4, 0)),
                ),
                Send(1, contribution(JOB_A, 0, 6, c0, seq=seq_of(6, 0)), note="call 6 on the same copy"),
                Send(
                    3,
                    contribution(JOB_A, 2, 6, A2, seq=seq_of(4, 0)),
                    note="call 4's DATA reordered behind call 6's",
                ),
                Send(2, contribution(JOB_A, 1, 6, c1, seq=seq_of(6, 0))),
                Send(
                    3,
                    contribution(JOB_A, 2, 6, c1, seq=seq_of(6, 0)),
                    to_job(JOB_A, 2, 6, vector_sum(c0, c1, c1), seq=seq_of(6, 0)),
                ),
                Check(counters=_drops(DropReason.STALE, 1, DATA_LEN)),
            ),
        ),
        Scenario(
            "seq_wraps_around",
            "Uses are ordered by serial-number arithmetic: after call 65535 comes call 0, which is ahead.",
            (
                *_complete_slot(JOB_A, 7, (A0, A1, A2), seq=seq_of(65535, 7)),
                Send(1, contribution(JOB_A, 0, 7, c0, seq=seq_of(0, 7))),
                Check(
                    registers={
                        ("MyIngress.copy_seq", IDX(7, 0)): seq_of(0, 7),
                        ("MyIngress.bitmap", IDX(7, 0)): 1,
                    }
                ),
                Send(2, contribution(JOB_A, 1, 7, A1, seq=seq_of(65535, 7))),
                Send(
                    2,
                    query(JOB_A, 1, 7, seq=seq_of(65535, 7)),
                    to_sender(
                        JOB_A, 1, 7, None, msg_type=MsgType.STALE, seq=seq_of(65535, 7), aux=seq_of(0, 7)
                    ),
                ),
                Check(counters=_drops(DropReason.STALE, 2, DATA_LEN + QUERY_LEN)),
            ),
        ),
        Scenario(
            "deleted_jobs_slot_starts_clean",
            "A new job on slots a deleted job left half-filled starts clean (its epoch differs): the old "
            "partial sum is not added, however the two jobs' seqs compare.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, seq=seq_of(900, 0))),
                Send(2, contribution(JOB_A, 1, 0, A1, seq=seq_of(900, 0))),
                job_install(old_epoch_job),
                Send(4, contribution(old_epoch_job, 0, 0, c0, seq=seq_of(0, 0))),
                Check(
                    registers={
                        ("MyIngress.owner", old_epoch_job.global_slot(0)): old_epoch_job.epoch,
                        ("MyIngress.bitmap", old_epoch_job.index(0, 0)): 0b01,
                        ("MyIngress.remaining", old_epoch_job.index(0, 0)): 1,
                    }
                ),
                Send(
                    5,
                    contribution(old_epoch_job, 1, 0, c1, seq=seq_of(0, 0)),
                    to_job(old_epoch_job, 1, 0, vector_sum(c0, c1), seq=seq_of(0, 0)),
                ),
            ),
        ),
        Scenario(
            "recycled_job_id_starts_clean",
            "A job id used again by a new job (new epoch, new keys) starts clean on the old job's slots, and "
            "the old job's late packets are refused by key.",
            (
                Send(1, contribution(JOB_A, 0, 1, A0, seq=seq_of(40, 1))),
                Install(
                    deletes=tuple(d for r in range(3) for d in rank_deletes(JOB_A, r)),
                    entries=tuple(e for r in range(3) for e in rank_entries(recycled, r)),
                ),
                Send(1, contribution(JOB_A, 0, 1, A0, seq=seq_of(40, 1)), note="the old rank 0, late"),
                Send(1, contribution(recycled, 0, 1, c0, seq=seq_of(0, 1))),
                Send(2, contribution(recycled, 1, 1, c1, seq=seq_of(0, 1))),
                Send(
                    3,
                    contribution(recycled, 2, 1, c1, seq=seq_of(0, 1)),
                    to_job(recycled, 2, 1, vector_sum(c0, c1, c1), seq=seq_of(0, 1)),
                ),
                Check(counters=_drops(DropReason.BAD_KEY, 1, DATA_LEN)),
            ),
        ),
    )


def _agreement_scenarios() -> tuple[Scenario, ...]:
    """Ranks that disagree on a call; the abort and the job's resynchronisation; departed ranks."""
    call, other = seq_of(8, 0), seq_of(9, 0)
    more = 0x20000061  # 97 float32: the same number of packets, a different call
    ints = 0x10000060  # 96 int32
    mark = (JOB_A.epoch << 16) | 8
    rejoined_key = 0x0C0FFEE0
    return (
        Scenario(
            "call_mismatch_aborts_the_call",
            "A contribution whose descriptor differs from the one the use holds is not added: the switch "
            "multicasts ABORT with the offender's descriptor in call and the use's in aux, and refuses every "
            "later packet of that call, on any slot, with an ABORT to its sender (aux 0).",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, seq=call)),
                Send(2, contribution(JOB_A, 1, 0, A1, seq=call)),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, seq=call, call=more),
                    to_job(JOB_A, 2, 0, None, msg_type=MsgType.ABORT, seq=call, call=more, aux=DESC),
                    note="rank 2 sums 97 elements, the others 96",
                ),
                Check(
                    counters={
                        **_drops(DropReason.CALL_MISMATCH, 1, DATA_LEN),
                        ("MyIngress.job_aborts", J): (1, DATA_LEN),
                        ("MyIngress.job_data_in", J): (2, 2 * DATA_LEN),
                    },
                    registers={
                        ("MyIngress.remaining", IDX(0, 0)): 1,
                        ("MyIngress.bitmap", IDX(0, 0)): 0b011,
                        ("MyIngress.aborted", J): mark,
                    },
                ),
                Send(
                    1,
                    contribution(JOB_A, 0, 1, A0, seq=seq_of(8, 1)),
                    to_sender(JOB_A, 0, 1, None, msg_type=MsgType.ABORT, seq=seq_of(8, 1)),
                    note="the same call on another slot",
                ),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, seq=call, call=more),
                    to_sender(JOB_A, 2, 0, None, msg_type=MsgType.ABORT, seq=call, call=more),
                    note="the offender resends",
                ),
                Check(
                    counters={
                        **_drops(DropReason.CALL_MISMATCH, 1, DATA_LEN),
                        **_drops(DropReason.CALL_ABORTED, 2, 2 * DATA_LEN),
                        ("MyIngress.job_aborts", J): (3, 3 * DATA_LEN),
                    }
                ),
            ),
        ),
        Scenario(
            "abort_then_the_next_call_is_exact",
            "After an aborted call (here float32 against int32), the job's next call, on the same copy, is "
            "ahead of everything the aborted one left and sums exactly.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, seq=call)),
                Send(
                    2,
                    contribution(JOB_A, 1, 0, A1, seq=call, call=ints),
                    to_job(JOB_A, 1, 0, None, msg_type=MsgType.ABORT, seq=call, call=ints, aux=DESC),
                ),
                Send(1, contribution(JOB_A, 0, 0, A0, seq=other)),
                Send(2, contribution(JOB_A, 1, 0, A1, seq=other)),
                Send(3, contribution(JOB_A, 2, 0, A2, seq=other), to_job(JOB_A, 2, 0, A_SUM, seq=other)),
                Check(
                    counters={
                        **_drops(DropReason.CALL_MISMATCH, 1, DATA_LEN),
                        ("MyIngress.job_results_out", J): (1, DATA_LEN),
                    }
                ),
            ),
        ),
        Scenario(
            "departed_rank_is_never_trusted_again",
            "When a rank leaves, its entries go at once: its address is refused as UNKNOWN_JOB. When a new "
            "worker joins as that rank from the same address it gets a new key, so the old process there "
            "is refused as BAD_KEY and results go out with the new key.",
            (
                Install(deletes=rank_deletes(JOB_A, 2)),
                Send(3, contribution(JOB_A, 2, 0, A2), note="the departed rank 2"),
                Install(entries=rank_entries(JOB_A, 2, key=rejoined_key)),
                Send(3, contribution(JOB_A, 2, 0, A2), note="the old process, old key"),
                Send(1, contribution(JOB_A, 0, 0, A0)),
                Send(2, contribution(JOB_A, 1, 0, A1)),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, key=rejoined_key),
                    (
                        Out(H1.port, answer_packet(H1, J, 2, 0, A_SUM, key=JOB_A.keys[0])),
                        Out(H2.port, answer_packet(H2, J, 2, 0, A_SUM, key=JOB_A.keys[1])),
                        Out(H3.port, answer_packet(H3, J, 2, 0, A_SUM, key=rejoined_key)),
                    ),
                    note="the new rank 2",
                ),
                Check(
                    counters={
                        **_drops(DropReason.UNKNOWN_JOB, 1, DATA_LEN),
                        **_drops(DropReason.BAD_KEY, 1, DATA_LEN),
                    }
                ),
            ),
        ),
    )


# The DSCP/ECN byte of congestion scenarios: DSCP AF11 (kept on every answer) with each ECN codepoint.
DSCP = 0x28
NOT_ECT, ECT0, CE = DSCP | ECN_NOT_ECT, DSCP | ECN_ECT0, DSCP | ECN_CE


def ecn_threshold(port: int, depth: int) -> TableEntry:
    """The controller's per-port marking threshold (docs/protocol.md, *Congestion*)."""
    return TableEntry(
        "MyEgress.ecn_threshold",
        {"standard_metadata.egress_port": port},
        "MyEgress.set_ecn_threshold",
        {"depth": depth},
    )


def _congestion_scenarios() -> tuple[Scenario, ...]:
    """CE on any contribution of a use reaches every rank on its result; queues mark at a threshold."""
    later, latest = SEQ + 16, SEQ + 32  # later uses of the same copy
    marked = IDX(0, 0)
    return (
        Scenario(
            "ce_on_a_contribution_marks_the_result",
            "One contribution arrives CE-marked: the RESULT to every rank carries CE (and the DATA's DSCP), "
            "and so does a replay. The flag is the use's: a later use's first contribution resets it, "
            "and counts itself when it is the marked one.",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, tos=ECT0)),
                Send(2, contribution(JOB_A, 1, 0, A1, tos=CE)),
                Send(3, contribution(JOB_A, 2, 0, A2, tos=ECT0), to_job(JOB_A, 2, 0, A_SUM, tos=CE)),
                Check(registers={("MyIngress.congested", marked): 1}),
                Send(
                    1,
                    query(JOB_A, 0, 0, tos=ECT0, flags=1),
                    to_sender(JOB_A, 0, 0, A_SUM, tos=CE, flags=1),
                    note="the replay carries CE too",
                ),
                Send(1, contribution(JOB_A, 0, 0, A0, seq=later, tos=CE), note="a first contribution, CE"),
                Send(2, contribution(JOB_A, 1, 0, A1, seq=later, tos=ECT0)),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, seq=later, tos=ECT0),
                    to_job(JOB_A, 2, 0, A_SUM, seq=later, tos=CE),
                ),
                Send(1, contribution(JOB_A, 0, 0, A0, seq=latest, tos=ECT0), note="nothing marked"),
                Send(2, contribution(JOB_A, 1, 0, A1, seq=latest, tos=ECT0)),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, seq=latest, tos=ECT0),
                    to_job(JOB_A, 2, 0, A_SUM, seq=latest, tos=ECT0),
                ),
                Check(registers={("MyIngress.congested", marked): 0}),
            ),
        ),
        Scenario(
            "ce_is_set_only_on_ecn_capable_results",
            "A RESULT whose completing DATA was not ECN-capable (Not-ECT) is never marked, whatever the use "
            "saw: a host that does not send ECT does not read CE either (RFC 3168).",
            (
                Send(1, contribution(JOB_A, 0, 0, A0, tos=CE)),
                Send(2, contribution(JOB_A, 1, 0, A1, tos=NOT_ECT)),
                Send(3, contribution(JOB_A, 2, 0, A2, tos=NOT_ECT), to_job(JOB_A, 2, 0, A_SUM, tos=NOT_ECT)),
                Check(registers={("MyIngress.congested", marked): 1}),
            ),
        ),
        Scenario(
            "egress_marks_ce_at_the_port_threshold",
            "ECN-capable answers leaving a port whose queue holds at least the port's threshold (table "
            "ecn_threshold) are marked CE; ports without an entry, or below their threshold, and Not-ECT "
            "packets are not. The embedded switch has no queues (depth 0): threshold 0 marks every packet.",
            (
                Install(entries=(ecn_threshold(H1.port, 0), ecn_threshold(H2.port, 5))),
                Send(1, contribution(JOB_A, 0, 0, A0, tos=ECT0)),
                Send(2, contribution(JOB_A, 1, 0, A1, tos=ECT0)),
                Send(
                    3,
                    contribution(JOB_A, 2, 0, A2, tos=ECT0),
                    (
                        Out(H1.port, answer_packet(H1, J, 2, 0, A_SUM, key=JOB_A.keys[0], tos=CE)),
                        Out(H2.port, answer_packet(H2, J, 2, 0, A_SUM, key=JOB_A.keys[1], tos=ECT0)),
                        Out(H3.port, answer_packet(H3, J, 2, 0, A_SUM, key=JOB_A.keys[2], tos=ECT0)),
                    ),
                ),
                Send(
                    1,
                    query(JOB_A, 0, 1, tos=ECT0, flags=1),
                    to_sender(JOB_A, 0, 1, None, msg_type=MsgType.MISSING, tos=CE, flags=1),
                    note="a notice to the marking port",
                ),
                Send(
                    1,
                    query(JOB_A, 0, 1, tos=NOT_ECT, flags=2),
                    to_sender(JOB_A, 0, 1, None, msg_type=MsgType.MISSING, tos=NOT_ECT, flags=2),
                    note="Not-ECT: never marked",
                ),
                Check(counters={("MyIngress.job_missing", J): (2, 2 * QUERY_LEN)}),
            ),
        ),
    )


def _scenarios() -> tuple[Scenario, ...]:
    return (
        _framing_scenarios()
        + _aggregation_scenarios()
        + _identity_scenarios()
        + _agreement_scenarios()
        + _congestion_scenarios()
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
        if len(payload) in (HEADER_BYTES, PAYLOAD_BYTES):
            record = np.frombuffer(payload[:HEADER_BYTES], dtype=HEADER_DTYPE)[0]
            for name in ("msg_type", "rank", "job_id", "exp", "flags", "seq", "key", "call", "aux"):
                out[f"p4r.{name}"] = int(record[name])
            out["p4r.set"] = int(record["set_slot"]) >> 15
            out["p4r.slot"] = int(record["set_slot"]) & 0x7FFF
            if len(payload) == PAYLOAD_BYTES:
                out["p4r.values"] = [int(v) for v in np.frombuffer(payload[HEADER_BYTES:], dtype=">i4")]
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
    """Apply one control-plane step: deletions, then groups (so entries can refer to them), then entries."""
    for table, match in step.deletes:
        driver.table_delete(table, dict(match))
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
