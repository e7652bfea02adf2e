"""An executable reading of docs/protocol.md: a switch model in plain Python behind the scenario Driver.

It exists to check the scenario table itself (tests/test_protocol_scenarios_selfcheck.py): the
expectations in tests/protocol_scenarios.py were written from the document, and this model was
written from the document separately, by byte offsets rather than scapy. Where the two disagree,
one of them misreads the protocol. It is not a switch and has no speed ambitions.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from contracts.protocol import (
    DEFAULT_SLOT_COUNT,
    DROP_REASON_COUNT,
    ECN_CE,
    ECN_MASK,
    FLOOD_GROUP,
    HEADER_BYTES,
    MAX_JOBS,
    RESULT_TTL,
    UDP_PORT,
    USE_BITS,
    DropReason,
    MsgType,
)
from tests.packet_program import PACKET_K

SLOT_COUNT = DEFAULT_SLOT_COUNT
K = PACKET_K  # the scenarios' K (tests/packet_program.py)
KEYS = {
    "MyIngress.arp_responder": ("hdr.arp.target_proto_addr",),
    "MyIngress.agg_addresses": ("hdr.ipv4.dst_addr",),
    "MyIngress.l2_forward": ("hdr.ethernet.dst_addr",),
    "MyIngress.job_table": ("hdr.p4r.job_id", "hdr.p4r.rank"),
    "MyEgress.result_dest": ("hdr.p4r.job_id", "standard_metadata.egress_rid"),
    "MyIngress.upstream": ("hdr.p4r.job_id",),
    "MyIngress.from_parent": ("hdr.p4r.job_id", "hdr.ipv4.src_addr"),
    "MyEgress.ecn_threshold": ("standard_metadata.egress_port",),
}
QUEUE_DEPTH = 0  # a model has no queues: what the embedded switch reports as enq_qdepth
VALUE_REGISTERS = [f"MyIngress.value{k:02x}" for k in range(K)]
COPY_REGISTERS = ["copy_seq", "copy_call", "bitmap", "remaining", "exp_max", "awaiting", "congested"]
REGISTER_SIZES = {f"MyIngress.{name}": 2 * SLOT_COUNT for name in COPY_REGISTERS}
REGISTER_SIZES.update({name: 2 * SLOT_COUNT for name in VALUE_REGISTERS})
REGISTER_SIZES.update({"MyIngress.owner": SLOT_COUNT, "MyIngress.aborted": MAX_JOBS})
JOB_COUNTERS = ("data_in", "results_out", "duplicates", "replays", "missing", "aborts", "queries")
COUNTER_SIZES = {f"MyIngress.job_{name}": MAX_JOBS for name in JOB_COUNTERS}
COUNTER_SIZES.update(
    {"MyIngress.ingress_drops": DROP_REASON_COUNT, "MyEgress.egress_drops": DROP_REASON_COUNT}
)

ETH, IP4, UDP_LEN = 14, 20, 8
P4R = ETH + IP4 + UDP_LEN  # offset of the p4reduce header
DATA_PAYLOAD = HEADER_BYTES + 4 * K
# Offsets inside the p4reduce header (docs/protocol.md, "The p4reduce header").
MSG, RANK, JOB, SET_SLOT, EXP, SEQ, KEY, CALL, AUX = 0, 1, 2, 4, 6, 8, 12, 16, 20
TOS = ETH + 1  # the IPv4 DSCP/ECN byte


class Truncated(Exception):
    """The frame ends inside a header the parser extracts."""


def _csum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


class ProtocolModel:
    """The protocol's switch behaviour, one frame at a time."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[tuple[int, ...], tuple[str, dict[str, int]]]] = defaultdict(dict)
        self.defaults: dict[str, tuple[str, dict[str, int]]] = {}
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self.counters: dict[tuple[str, int], tuple[int, int]] = defaultdict(lambda: (0, 0))
        self.registers: dict[tuple[str, int], int] = defaultdict(int)

    # -- Driver ----------------------------------------------------------------------------------------
    def table_add(self, table: str, match: dict[str, int], action: str, params: dict[str, int]) -> None:
        if set(match) != set(KEYS[table]):
            raise KeyError(f"{table}: match fields {sorted(match)} != {sorted(KEYS[table])}")
        key = tuple(match[k] for k in KEYS[table])
        if key in self.tables[table]:
            raise KeyError(f"{table}: an entry for {key} exists already (a switch says ALREADY_EXISTS)")
        self.tables[table][key] = (action, dict(params))

    def table_delete(self, table: str, match: dict[str, int]) -> None:
        del self.tables[table][tuple(match[k] for k in KEYS[table])]

    def set_default(self, table: str, action: str, params: dict[str, int]) -> None:
        self.defaults[table] = (action, dict(params))

    def multicast_group(self, group: int, replicas: list[tuple[int, int]]) -> None:
        self.groups[group] = list(replicas)

    def counter(self, name: str, index: int) -> tuple[int, int]:
        if not 0 <= index < COUNTER_SIZES[name]:
            raise IndexError(f"{name}[{index}]")
        return self.counters[(name, index)]

    def register(self, name: str, index: int) -> int:
        if not 0 <= index < REGISTER_SIZES[name]:
            raise IndexError(f"{name}[{index}]")
        return self.registers[(name, index)]

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self._length = len(frame)
        try:
            return self._ingress(port, bytearray(frame))
        except Truncated:
            self._count("MyIngress.ingress_drops", DropReason.TRUNCATED)
            return []

    # -- pipeline --------------------------------------------------------------------------------------
    def _count(self, name: str, index: int) -> None:
        packets, byte_count = self.counters[(name, index)]
        self.counters[(name, index)] = (packets + 1, byte_count + self._length)

    def _lookup(self, table: str, *key: int) -> tuple[str, dict[str, int]] | None:
        return self.tables[table].get(key) or self.defaults.get(table)

    def _ingress(self, port: int, f: bytearray) -> list[tuple[int, bytes]]:
        def need(n: int) -> None:
            if len(f) < n:
                raise Truncated

        need(ETH)
        ether_type = struct.unpack_from("!H", f, 12)[0]
        if ether_type == 0x0806:
            need(ETH + 28)
            htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", f, ETH)
            target = struct.unpack_from("!I", f, ETH + 24)[0]
            hit = self._lookup("MyIngress.arp_responder", target)
            if (
                (htype, ptype, hlen, plen, op) == (1, 0x0800, 6, 4, 1)
                and hit
                and hit[0] == "MyIngress.arp_reply"
            ):
                mac = hit[1]["mac"].to_bytes(6, "big")
                sender_hw, sender_ip = f[ETH + 8 : ETH + 14], f[ETH + 14 : ETH + 18]
                f[0:6], f[6:12] = f[6:12], mac
                struct.pack_into("!H", f, ETH + 6, 2)
                f[ETH + 18 : ETH + 24], f[ETH + 24 : ETH + 28] = sender_hw, sender_ip
                f[ETH + 8 : ETH + 14], f[ETH + 14 : ETH + 18] = mac, target.to_bytes(4, "big")
                return [(port, bytes(f))]
            return self._l2(port, f)
        if ether_type != 0x0800:
            return self._l2(port, f)
        need(ETH + IP4)
        ihl = f[ETH] & 0x0F
        frag = struct.unpack_from("!H", f, ETH + 6)[0] & 0x1FFF
        if (ihl, frag, f[ETH + 9]) != (5, 0, 17):
            return self._l2(port, f)
        need(P4R)
        sport, dport, udp_len = struct.unpack_from("!HHH", f, ETH + IP4)
        if dport != UDP_PORT:
            return self._l2(port, f)
        need(P4R + HEADER_BYTES)
        if f[P4R + MSG] in (MsgType.DATA, MsgType.RESULT):  # the types that carry the K values
            need(P4R + DATA_PAYLOAD)
        dst_ip = struct.unpack_from("!I", f, ETH + 16)[0]
        if self._lookup("MyIngress.agg_addresses", dst_ip) is None:
            return self._l2(port, f)
        return self._aggregate(port, f, sport, udp_len)

    def _l2(self, port: int, f: bytearray) -> list[tuple[int, bytes]]:
        hit = self._lookup("MyIngress.l2_forward", int.from_bytes(f[0:6], "big"))
        if hit and hit[0] == "MyIngress.forward":
            return [(hit[1]["port"], bytes(f))]
        return [(p, bytes(f)) for p, _ in self.groups.get(FLOOD_GROUP, []) if p != port]

    def _drop(self, reason: DropReason) -> list[tuple[int, bytes]]:
        self._count("MyIngress.ingress_drops", reason)
        return []

    def _aggregate(self, port: int, f: bytearray, sport: int, udp_len: int) -> list[tuple[int, bytes]]:
        # 1. framing
        if _csum(bytes(f[ETH : ETH + IP4])) != 0xFFFF:
            return self._drop(DropReason.BAD_CHECKSUM)
        msg_type, rank, job_id, set_slot, exp = struct.unpack_from("!BBHHB", f, P4R)
        seq, key, call = struct.unpack_from("!III", f, P4R + SEQ)
        if not MsgType.DATA <= msg_type <= MsgType.QUERY:
            return self._drop(DropReason.BAD_TYPE)
        query = msg_type == MsgType.QUERY
        payload = DATA_PAYLOAD if msg_type in (MsgType.DATA, MsgType.RESULT) else HEADER_BYTES
        total_len = struct.unpack_from("!H", f, ETH + 2)[0]
        if total_len != IP4 + UDP_LEN + payload or udp_len != UDP_LEN + payload:
            return self._drop(DropReason.BAD_LENGTH)
        src_ip = struct.unpack_from("!I", f, ETH + 12)[0]
        if msg_type not in (MsgType.DATA, MsgType.QUERY):
            parent = self.tables["MyIngress.from_parent"].get((job_id, src_ip))
            if parent is not None:
                return self._from_parent(port, f, sport, parent[1])
            if msg_type != MsgType.ABORT:
                return self._drop(DropReason.BAD_TYPE)
        # 2. job; 3. membership
        hit = self.tables["MyIngress.job_table"].get((job_id, rank))
        if hit is None:
            return self._drop(DropReason.UNKNOWN_JOB)
        job = hit[1]
        if (port, src_ip, sport) != (job["sender_port"], job["sender_ip"], job["sender_udp_port"]):
            return self._drop(DropReason.WRONG_SENDER)
        if key != job["key"]:
            return self._drop(DropReason.BAD_KEY)
        up = self.tables["MyIngress.upstream"].get((job_id,))
        up_params = up[1] if up is not None else None
        # 4. bounds
        set_bit, slot = set_slot >> 15, set_slot & 0x7FFF
        g = job["base"] + slot
        if slot >= job["pool_size"] or g >= SLOT_COUNT:
            return self._drop(DropReason.SLOT_OUT_OF_RANGE)
        i = set_bit * SLOT_COUNT + g
        reg = self.registers
        # 5. ownership
        if reg[("MyIngress.owner", g)] != job["epoch"]:
            reg[("MyIngress.owner", g)] = job["epoch"]
            reg[("MyIngress.bitmap", g)] = reg[("MyIngress.bitmap", SLOT_COUNT + g)] = 0
        # 6. aborted calls
        mark = (job["epoch"] << 16) | (seq >> USE_BITS)
        if reg[("MyIngress.aborted", job_id)] == mark:
            self._count("MyIngress.ingress_drops", DropReason.CALL_ABORTED)
            self._count("MyIngress.job_aborts", job_id)
            if up_params is not None:  # below a parent the ABORT goes up again; its answer comes down
                return self._up(self._header_only(f, MsgType.ABORT, 0), up_params)
            return self._notice(f, MsgType.ABORT, 0, port, sport, job, job_id)
        if msg_type == MsgType.ABORT:  # a child switch's members disagree on the call
            reg[("MyIngress.aborted", job_id)] = mark
            self._count("MyIngress.job_aborts", job_id)
            if up_params is not None:
                return self._up(f, up_params)
            aux = struct.unpack_from("!I", f, P4R + AUX)[0]
            return self._notice(f, MsgType.ABORT, aux, port, sport, job, job_id, to_job=True)
        # 7. the copy
        seen = reg[("MyIngress.bitmap", i)]
        held = reg[("MyIngress.copy_seq", i)]
        age = (seq - held) % 2**32
        behind, ahead = age >= 2**31, 0 < age < 2**31
        complete = reg[("MyIngress.remaining", i)] == 0
        bit = job["worker_bit"]
        if seen and behind:
            self._count("MyIngress.ingress_drops", DropReason.STALE)
            if not query:
                return []  # a late DATA: dropped; only a QUERY is told
            return self._notice(f, MsgType.STALE, held, port, sport, job, job_id)
        if query:
            self._count("MyIngress.job_queries", job_id)
            if seen and not ahead and complete and reg[("MyIngress.awaiting", i)]:
                return self._up(f, up_params)  # complete here, the result not down yet: ask the parent
            if seen and not ahead and complete:
                self._count("MyIngress.job_replays", job_id)
                self._mark_if(f, reg[("MyIngress.congested", i)])
                values = [reg[(name, i)] for name in VALUE_REGISTERS]
                f.extend(bytes(4 * K))
                return self._answer(
                    f, MsgType.RESULT, reg[("MyIngress.exp_max", i)], values, port, sport, job, job_id
                )
            if seen and not ahead and seen & bit:
                self._count("MyIngress.ingress_drops", DropReason.CONTRIBUTED)
                return []  # collecting, with the asker's contribution: nothing to tell it
            self._count("MyIngress.job_missing", job_id)
            contributors = seen if seen and not ahead else 0
            return self._notice(f, MsgType.MISSING, contributors, port, sport, job, job_id)
        values = list(struct.unpack_from(f"!{K}I", f, P4R + HEADER_BYTES))
        if seen == 0 or ahead:
            self._count("MyIngress.job_data_in", job_id)
            reg[("MyIngress.copy_seq", i)] = seq
            reg[("MyIngress.copy_call", i)] = call
            reg[("MyIngress.bitmap", i)] = bit
            reg[("MyIngress.awaiting", i)] = 0
            reg[("MyIngress.congested", i)] = self._ce(f)
            left = job["num_workers"] - 1
        elif complete or seen & bit:
            self._count("MyIngress.ingress_drops", DropReason.DUPLICATE)
            self._count("MyIngress.job_duplicates", job_id)
            return []
        elif call != reg[("MyIngress.copy_call", i)]:
            self._count("MyIngress.ingress_drops", DropReason.CALL_MISMATCH)
            self._count("MyIngress.job_aborts", job_id)
            reg[("MyIngress.aborted", job_id)] = mark
            held_call = reg[("MyIngress.copy_call", i)]
            if up_params is not None:
                return self._up(self._header_only(f, MsgType.ABORT, held_call), up_params)
            return self._notice(f, MsgType.ABORT, held_call, port, sport, job, job_id, to_job=True)
        else:
            self._count("MyIngress.job_data_in", job_id)
            reg[("MyIngress.bitmap", i)] = seen | bit
            values = [(v + reg[(n, i)]) & 0xFFFFFFFF for n, v in zip(VALUE_REGISTERS, values, strict=True)]
            exp = max(exp, reg[("MyIngress.exp_max", i)])
            left = reg[("MyIngress.remaining", i)] - 1
            reg[("MyIngress.congested", i)] |= self._ce(f)
        for name, value in zip(VALUE_REGISTERS, values, strict=True):
            reg[(name, i)] = value
        reg[("MyIngress.exp_max", i)] = exp
        reg[("MyIngress.remaining", i)] = left
        if left != 0:
            return []
        self._mark_if(f, reg[("MyIngress.congested", i)])
        if up_params is not None:  # complete here: the partial sum goes up, the copy awaits the result
            reg[("MyIngress.awaiting", i)] = 1
            f[P4R + EXP] = exp
            struct.pack_into(f"!{K}I", f, P4R + HEADER_BYTES, *values)
            return self._up(f, up_params)
        self._count("MyIngress.job_results_out", job_id)
        return self._answer(f, MsgType.RESULT, exp, values, port, sport, job, job_id, to_job=True)

    # -- trees (docs/protocol.md, *Aggregation trees*) -------------------------------------------------
    def _from_parent(
        self, port: int, f: bytearray, sport: int, child: dict[str, int]
    ) -> list[tuple[int, bytes]]:
        """A parent's RESULT, MISSING, ABORT or STALE about the local job `child["job_id"]`."""
        msg_type = f[P4R + MSG]
        set_slot, _ = struct.unpack_from("!HB", f, P4R + SET_SLOT)
        seq, key = struct.unpack_from("!II", f, P4R + SEQ)
        if port != child["parent_port"] or sport != UDP_PORT:
            return self._drop(DropReason.WRONG_SENDER)
        if key != child["key"]:
            return self._drop(DropReason.BAD_KEY)
        set_bit, slot = set_slot >> 15, set_slot & 0x7FFF
        g = child["base"] + slot
        if slot >= child["pool_size"] or g >= SLOT_COUNT:
            return self._drop(DropReason.SLOT_OUT_OF_RANGE)
        i = set_bit * SLOT_COUNT + g
        job_id = child["job_id"]
        struct.pack_into("!H", f, P4R + JOB, job_id)
        reg = self.registers
        if reg[("MyIngress.owner", g)] != child["epoch"]:
            return self._drop(DropReason.STALE)
        group = {"mcast_grp": child["mcast_grp"]}
        awaited = (
            reg[("MyIngress.bitmap", i)] != 0
            and reg[("MyIngress.copy_seq", i)] == seq
            and reg[("MyIngress.awaiting", i)] != 0
        )
        if msg_type == MsgType.STALE and not awaited:  # a late answer to a late question
            return self._drop(DropReason.STALE)
        if msg_type in (MsgType.ABORT, MsgType.STALE):
            reg[("MyIngress.aborted", job_id)] = (child["epoch"] << 16) | (seq >> USE_BITS)
            self._count("MyIngress.job_aborts", job_id)
            aux = struct.unpack_from("!I", f, P4R + AUX)[0]
            return self._notice(f, MsgType.ABORT, aux, port, sport, group, job_id, to_job=True)
        if not reg[("MyIngress.bitmap", i)] or reg[("MyIngress.copy_seq", i)] != seq:
            return self._drop(DropReason.STALE)
        if not reg[("MyIngress.awaiting", i)]:
            return self._drop(DropReason.DUPLICATE)
        reg[("MyIngress.congested", i)] |= self._ce(f) if msg_type == MsgType.RESULT else 0
        self._mark_if(f, reg[("MyIngress.congested", i)])
        if msg_type == MsgType.RESULT:
            values = list(struct.unpack_from(f"!{K}I", f, P4R + HEADER_BYTES))
            for name, value in zip(VALUE_REGISTERS, values, strict=True):
                reg[(name, i)] = value
            reg[("MyIngress.exp_max", i)] = f[P4R + EXP]
            reg[("MyIngress.awaiting", i)] = 0
            self._count("MyIngress.job_results_out", job_id)
            return self._answer(
                f, MsgType.RESULT, f[P4R + EXP], values, port, sport, group, job_id, to_job=True
            )
        up = self.tables["MyIngress.upstream"].get((job_id,))
        if up is None:
            return self._drop(DropReason.UNKNOWN_JOB)
        # MISSING: the parent lacks this switch's partial sum; it goes again, from the copy.
        f[P4R + MSG] = MsgType.DATA
        f[P4R + EXP] = reg[("MyIngress.exp_max", i)]
        struct.pack_into("!II", f, P4R + CALL, reg[("MyIngress.copy_call", i)], 0)
        f.extend(struct.pack(f"!{K}I", *(reg[(name, i)] for name in VALUE_REGISTERS)))
        struct.pack_into("!H", f, ETH + 2, IP4 + UDP_LEN + DATA_PAYLOAD)
        struct.pack_into("!H", f, ETH + IP4 + 4, UDP_LEN + DATA_PAYLOAD)
        return self._up(f, up[1])

    @staticmethod
    def _ce(f: bytearray) -> int:
        return int(f[TOS] & ECN_MASK == ECN_CE)

    @staticmethod
    def _mark_if(f: bytearray, congested: int) -> None:
        """A sum of a use that saw CE carries CE, if the packet is ECN-capable."""
        if congested and f[TOS] & ECN_MASK:
            f[TOS] |= ECN_CE

    def _egress(self, port: int, f: bytearray) -> bytes:
        """An answer leaving `port`: CE at the port's queue threshold (if ECN-capable), new checksum."""
        hit = self.tables["MyEgress.ecn_threshold"].get((port,))
        if hit is not None and f[TOS] & ECN_MASK and QUEUE_DEPTH >= hit[1]["depth"]:
            f[TOS] |= ECN_CE
        return self._with_checksum(f)

    @staticmethod
    def _header_only(f: bytearray, msg_type: MsgType, aux: int) -> bytearray:
        f[P4R + MSG] = msg_type
        struct.pack_into("!I", f, P4R + AUX, aux)
        return f

    def _up(self, f: bytearray, up: dict[str, int] | None) -> list[tuple[int, bytes]]:
        """To the parent: from this switch's address in the parent's instance of the job."""
        assert up is not None, "only a job with an upstream entry awaits a parent"
        if f[P4R + MSG] != MsgType.DATA:
            del f[P4R + HEADER_BYTES :]
            struct.pack_into("!H", f, ETH + 2, IP4 + UDP_LEN + HEADER_BYTES)
            struct.pack_into("!H", f, ETH + IP4 + 4, UDP_LEN + HEADER_BYTES)
        f[6:12] = f[0:6]
        f[0:6] = up["parent_mac"].to_bytes(6, "big")
        f[ETH + 12 : ETH + 16] = up["own_ip"].to_bytes(4, "big")
        f[ETH + 16 : ETH + 20] = up["parent_ip"].to_bytes(4, "big")
        f[ETH + 8] = RESULT_TTL
        struct.pack_into(
            "!HHHH", f, ETH + IP4, UDP_PORT, UDP_PORT, struct.unpack_from("!H", f, ETH + IP4 + 4)[0], 0
        )
        f[P4R + RANK] = up["parent_rank"]
        struct.pack_into("!H", f, P4R + JOB, up["parent_job"])
        struct.pack_into("!I", f, P4R + KEY, up["parent_key"])
        return [(up["port"], self._egress(up["port"], f))]

    # -- answers ---------------------------------------------------------------------------------------
    def _notice(
        self,
        f: bytearray,
        msg_type: MsgType,
        aux: int,
        port: int,
        sport: int,
        job: dict[str, int],
        job_id: int,
        *,
        to_job: bool = False,
    ) -> list[tuple[int, bytes]]:
        """MISSING, ABORT, STALE: the header alone, lengths shrunk, `aux` set."""
        del f[P4R + HEADER_BYTES :]
        struct.pack_into("!I", f, P4R + AUX, aux)
        struct.pack_into("!H", f, ETH + 2, IP4 + UDP_LEN + HEADER_BYTES)
        struct.pack_into("!H", f, ETH + IP4 + 4, UDP_LEN + HEADER_BYTES)
        return self._answer(f, msg_type, f[P4R + EXP], None, port, sport, job, job_id, to_job=to_job)

    def _answer(
        self,
        f: bytearray,
        msg_type: MsgType,
        exp: int,
        values: list[int] | None,
        port: int,
        sport: int,
        job: dict[str, int],
        job_id: int,
        *,
        to_job: bool = False,
    ) -> list[tuple[int, bytes]]:
        """Turn the DATA around: to its sender (replay, notices) or to every rank of the job."""
        f[P4R + MSG] = msg_type
        if msg_type == MsgType.RESULT:  # a QUERY's replay grows to the full size
            struct.pack_into("!H", f, ETH + 2, IP4 + UDP_LEN + DATA_PAYLOAD)
            struct.pack_into("!H", f, ETH + IP4 + 4, UDP_LEN + DATA_PAYLOAD)
        f[P4R + EXP] = exp
        if values is not None:
            struct.pack_into(f"!{K}I", f, P4R + HEADER_BYTES, *values)
        f[ETH + 8] = RESULT_TTL
        struct.pack_into("!H", f, ETH + IP4 + 6, 0)  # UDP checksum
        struct.pack_into("!H", f, ETH + IP4, UDP_PORT)
        if not to_job:
            f[0:6], f[6:12] = f[6:12], f[0:6]
            f[ETH + 12 : ETH + 16], f[ETH + 16 : ETH + 20] = f[ETH + 16 : ETH + 20], f[ETH + 12 : ETH + 16]
            struct.pack_into("!H", f, ETH + IP4 + 2, sport)
            return [(port, self._egress(port, f))]
        f[6:12] = f[0:6]
        f[ETH + 12 : ETH + 16] = f[ETH + 16 : ETH + 20]
        out = []
        for out_port, rid in self.groups.get(job["mcast_grp"], []):
            dest = self.tables["MyEgress.result_dest"].get((job_id, rid))
            if dest is None:
                self._count("MyEgress.egress_drops", DropReason.NO_RESULT_DEST)
                continue
            replica = bytearray(f)
            replica[0:6] = dest[1]["dst_mac"].to_bytes(6, "big")
            replica[ETH + 16 : ETH + 20] = dest[1]["dst_ip"].to_bytes(4, "big")
            struct.pack_into("!H", replica, ETH + IP4 + 2, dest[1]["dst_udp_port"])
            struct.pack_into("!I", replica, P4R + KEY, dest[1]["key"])
            out.append((out_port, self._egress(out_port, replica)))
        return out

    @staticmethod
    def _with_checksum(f: bytearray) -> bytes:
        struct.pack_into("!H", f, ETH + 10, 0)
        struct.pack_into("!H", f, ETH + 10, 0xFFFF - _csum(bytes(f[ETH : ETH + IP4])))
        return bytes(f)
