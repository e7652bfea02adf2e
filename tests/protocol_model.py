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
    DROP_REASON_COUNT,
    FLOOD_GROUP,
    MAX_JOBS,
    PAYLOAD_BYTES,
    RESULT_TTL,
    SLOT_COUNT,
    UDP_PORT,
    VALUES_PER_PACKET,
    DropReason,
    MsgType,
)

KEYS = {
    "MyIngress.arp_responder": ("hdr.arp.target_proto_addr",),
    "MyIngress.agg_addresses": ("hdr.ipv4.dst_addr",),
    "MyIngress.l2_forward": ("hdr.ethernet.dst_addr",),
    "MyIngress.job_table": ("hdr.p4r.job_id", "hdr.p4r.rank"),
    "MyEgress.result_dest": ("hdr.p4r.job_id", "standard_metadata.egress_rid"),
}
REGISTER_SIZES = {
    "MyIngress.bitmap": 2 * SLOT_COUNT,
    "MyIngress.remaining": 2 * SLOT_COUNT,
    "MyIngress.exp_max": 2 * SLOT_COUNT,
    "MyIngress.owner": SLOT_COUNT,
}
REGISTER_SIZES.update({f"MyIngress.value{k:02d}": 2 * SLOT_COUNT for k in range(VALUES_PER_PACKET)})
COUNTER_SIZES = {
    "MyIngress.job_data_in": MAX_JOBS,
    "MyIngress.job_results_out": MAX_JOBS,
    "MyIngress.job_retransmissions": MAX_JOBS,
    "MyIngress.job_replays": MAX_JOBS,
    "MyIngress.ingress_drops": DROP_REASON_COUNT,
    "MyEgress.egress_drops": DROP_REASON_COUNT,
}

ETH, IP4, UDP_LEN, P4R = 14, 20, 8, 12


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
        self.tables[table][tuple(match[k] for k in KEYS[table])] = (action, dict(params))

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
        need(ETH + IP4 + UDP_LEN)
        u = ETH + IP4
        sport, dport, udp_len = struct.unpack_from("!HHH", f, u)
        if dport != UDP_PORT:
            return self._l2(port, f)
        need(u + UDP_LEN + PAYLOAD_BYTES)
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
        ip_hdr = bytes(f[ETH : ETH + IP4])
        p = ETH + IP4 + UDP_LEN
        if _csum(ip_hdr) != 0xFFFF:
            return self._drop(DropReason.BAD_CHECKSUM)
        total_len = struct.unpack_from("!H", f, ETH + 2)[0]
        if total_len != IP4 + UDP_LEN + PAYLOAD_BYTES or udp_len != UDP_LEN + PAYLOAD_BYTES:
            return self._drop(DropReason.BAD_LENGTH)
        msg_type, rank, job_id, set_slot, exp = struct.unpack_from("!BBHHB", f, p)
        if msg_type != MsgType.DATA:
            return self._drop(DropReason.BAD_TYPE)
        hit = self.tables["MyIngress.job_table"].get((job_id, rank))
        if hit is None:
            return self._drop(DropReason.UNKNOWN_JOB)
        job = hit[1]
        src_ip = struct.unpack_from("!I", f, ETH + 12)[0]
        if (port, src_ip, sport) != (job["sender_port"], job["sender_ip"], job["sender_udp_port"]):
            return self._drop(DropReason.WRONG_SENDER)
        set_bit, slot = set_slot >> 15, set_slot & 0x7FFF
        g = job["base"] + slot
        if slot >= job["pool_size"] or g >= SLOT_COUNT:
            return self._drop(DropReason.SLOT_OUT_OF_RANGE)
        reg = self.registers
        if reg[("MyIngress.owner", g)] != job_id:
            for s in (0, 1):
                reg[("MyIngress.bitmap", s * SLOT_COUNT + g)] = 0
                reg[("MyIngress.remaining", s * SLOT_COUNT + g)] = 0
            reg[("MyIngress.owner", g)] = job_id
        i, o = set_bit * SLOT_COUNT + g, (1 - set_bit) * SLOT_COUNT + g
        bit = job["worker_bit"]
        reg[("MyIngress.bitmap", o)] &= ~bit & 0xFFFFFFFF
        seen = reg[("MyIngress.bitmap", i)]
        values = list(struct.unpack_from(f"!{VALUES_PER_PACKET}I", f, p + P4R))
        names = [f"MyIngress.value{k:02d}" for k in range(VALUES_PER_PACKET)]
        if seen & bit:
            self._count("MyIngress.job_retransmissions", job_id)
            if reg[("MyIngress.remaining", i)] != 0:
                return self._drop(DropReason.EARLY_DUPLICATE)
            values = [reg[(n, i)] for n in names]
            exp = reg[("MyIngress.exp_max", i)]
            replay = True
        else:
            self._count("MyIngress.job_data_in", job_id)
            reg[("MyIngress.bitmap", i)] = seen | bit
            if seen == 0:
                left = job["num_workers"] - 1
            else:
                values = [(v + reg[(n, i)]) & 0xFFFFFFFF for n, v in zip(names, values, strict=True)]
                exp = max(exp, reg[("MyIngress.exp_max", i)])
                left = reg[("MyIngress.remaining", i)] - 1
            for n, v in zip(names, values, strict=True):
                reg[(n, i)] = v
            reg[("MyIngress.exp_max", i)] = exp
            reg[("MyIngress.remaining", i)] = left
            if left != 0:
                return []
            replay = False
        # RESULT: the same header with new type, exponent and values, turned around.
        f[p] = MsgType.RESULT
        f[p + 6] = exp
        struct.pack_into(f"!{VALUES_PER_PACKET}I", f, p + P4R, *values)
        f[ETH + 8] = RESULT_TTL
        struct.pack_into("!H", f, ETH + IP4 + 6, 0)
        struct.pack_into("!H", f, ETH + IP4, UDP_PORT)
        if replay:
            self._count("MyIngress.job_replays", job_id)
            f[0:6], f[6:12] = f[6:12], f[0:6]
            f[ETH + 12 : ETH + 16], f[ETH + 16 : ETH + 20] = f[ETH + 16 : ETH + 20], f[ETH + 12 : ETH + 16]
            struct.pack_into("!H", f, ETH + IP4 + 2, sport)
            return [(port, self._with_checksum(f))]
        self._count("MyIngress.job_results_out", job_id)
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
            out.append((out_port, self._with_checksum(replica)))
        return out

    @staticmethod
    def _with_checksum(f: bytearray) -> bytes:
        struct.pack_into("!H", f, ETH + 10, 0)
        struct.pack_into("!H", f, ETH + 10, 0xFFFF - _csum(bytes(f[ETH : ETH + IP4])))
        return bytes(f)
