"""What the end-to-end switch tests need of the p4reduce protocol: packets and a job's entries.

The job is written with finsy entities named as in p4src/v1model/p4reduce.p4
(the controller room has the real job registry; these tests only need one
fixed job to prove the switch computes what docs/protocol.md says).
"""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import finsy as fy

from contracts.protocol import HEADER_BYTES, MsgType, payload_bytes
from tests.packet_program import PACKET_K, p4c_command

ROOT = Path(__file__).resolve().parents[2]
K = PACKET_K  # compiled with -DVALUES_PER_PACKET=64: hand-built frames of 64 values
HEADER = struct.Struct("!BBHHBBIIII")  # msg_type, rank, job, set|slot, exp, flags, seq, key, call, aux
VALUES = struct.Struct(f"!{K}i")
assert HEADER.size == HEADER_BYTES and HEADER.size + VALUES.size == payload_bytes(K)
EPOCH = 0x5EED0001
CALL = 0x10000000 | K  # the descriptor of a sum of K int32 (docs/protocol.md, *Call agreement*)


@dataclass(frozen=True)
class Worker:
    rank: int
    switch_port: int
    ip: str
    udp_port: int
    mac: int

    @property
    def key(self) -> int:
        """A fixed key per rank: these tests are about the switch, not about secrecy."""
        return 0x7E570000 + self.rank


def data_packet(
    job: int, rank: int, slot: int, set_: int, values: list[int], exp: int = 0, seq: int = 0
) -> bytes:
    """A DATA packet of rank `rank` (with its test key) for a sum of K int32."""
    header = HEADER.pack(
        MsgType.DATA, rank, job, (set_ << 15) | slot, exp, 0, seq, 0x7E570000 + rank, CALL, 0
    )
    return header + VALUES.pack(*values)


def query_packet(job: int, rank: int, slot: int, set_: int, seq: int = 0) -> bytes:
    """A QUERY (the header alone) for one use of rank `rank`."""
    return HEADER.pack(MsgType.QUERY, rank, job, (set_ << 15) | slot, 0, 0, seq, 0x7E570000 + rank, CALL, 0)


def parse(payload: bytes) -> dict[str, object]:
    msg, rank, job, set_slot, exp, flags, seq, key, call, aux = HEADER.unpack_from(payload)
    values = (
        list(VALUES.unpack_from(payload, HEADER.size)) if len(payload) == HEADER.size + VALUES.size else []
    )
    return {
        "msg_type": msg,
        "rank": rank,
        "job": job,
        "set": set_slot >> 15,
        "slot": set_slot & 0x7FFF,
        "exp": exp,
        "flags": flags,
        "seq": seq,
        "key": key,
        "call": call,
        "aux": aux,
        "values": values,
    }


def job_entities(
    job: int, workers: list[Worker], agg_ip: str, group: int, pool_size: int = 4
) -> list[object]:
    """Every entry a job of these workers needs (aggregation address included)."""
    entities: list[object] = [
        fy.P4TableEntry(
            "agg_addresses",
            match=fy.P4TableMatch({"hdr.ipv4.dst_addr": agg_ip}),
            action=fy.P4TableAction("accept_aggregation"),
        ),
        fy.P4MulticastGroupEntry(group, replicas=[(w.switch_port, w.rank) for w in workers]),
    ]
    for w in workers:
        entities.append(
            fy.P4TableEntry(
                "job_table",
                match=fy.P4TableMatch({"hdr.p4r.job_id": job, "hdr.p4r.rank": w.rank}),
                action=fy.P4TableAction(
                    "set_job",
                    base=0,
                    pool_size=pool_size,
                    num_workers=len(workers),
                    worker_bit=1 << w.rank,
                    mcast_grp=group,
                    sender_port=w.switch_port,
                    sender_ip=w.ip,
                    sender_udp_port=w.udp_port,
                    key=w.key,
                    epoch=EPOCH,
                ),
            )
        )
        entities.append(
            fy.P4TableEntry(
                "result_dest",
                match=fy.P4TableMatch({"hdr.p4r.job_id": job, "standard_metadata.egress_rid": w.rank}),
                action=fy.P4TableAction(
                    "set_result_dest", dst_mac=w.mac, dst_ip=w.ip, dst_udp_port=w.udp_port, key=w.key
                ),
            )
        )
    return entities


def compile_program(out: Path) -> tuple[Path, Path]:
    """p4reduce.p4 compiled by p4reduce-p4c at K (tests/packet_program.py): (program JSON, P4Info)."""
    program, p4info = out / "p4reduce.json", out / "p4reduce.p4info.txtpb"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = p4c_command(program, p4info)
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return program, p4info
