"""What the end-to-end switch tests need of the p4reduce protocol: packets and a job's entries.

The job is written with finsy entities named as in p4src/v1model/p4reduce.p4
(the controller room has the real job registry; these tests only need one
fixed job to prove the switch computes what docs/protocol.md says).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import finsy as fy

from contracts.protocol import PAYLOAD_BYTES, UDP_PORT, VALUES_PER_PACKET, MsgType

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4src" / "v1model" / "p4reduce.p4"
HEADER = struct.Struct(f"!BBHHBBI{VALUES_PER_PACKET}i")
assert HEADER.size == PAYLOAD_BYTES


def free_aggregation_address() -> str:
    """A loopback address where UDP port 20562 is free: the switch's --udp-port endpoint.

    DATA must be sent to UDP port 20562 (docs/protocol.md), and other tests
    may hold 127.0.0.1:20562, so each run takes its own 127.x.y.z.
    """
    rng = random.Random()
    for _ in range(100):
        address = f"127.{rng.randrange(100, 200)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind((address, UDP_PORT))
            except OSError:
                continue
        return address
    raise RuntimeError("no loopback address with a free UDP port 20562")


@dataclass(frozen=True)
class Worker:
    rank: int
    switch_port: int
    ip: str
    udp_port: int
    mac: int


def data_packet(
    job: int, rank: int, slot: int, set_: int, values: list[int], exp: int = 0, chunk: int = 0
) -> bytes:
    return HEADER.pack(MsgType.DATA, rank, job, (set_ << 15) | slot, exp, 0, chunk, *values)


def parse(payload: bytes) -> dict[str, object]:
    msg, rank, job, set_slot, exp, flags, chunk, *values = HEADER.unpack(payload)
    return {
        "msg_type": msg,
        "rank": rank,
        "job": job,
        "set": set_slot >> 15,
        "slot": set_slot & 0x7FFF,
        "exp": exp,
        "flags": flags,
        "chunk": chunk,
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
                ),
            )
        )
        entities.append(
            fy.P4TableEntry(
                "result_dest",
                match=fy.P4TableMatch({"hdr.p4r.job_id": job, "standard_metadata.egress_rid": w.rank}),
                action=fy.P4TableAction(
                    "set_result_dest", dst_mac=w.mac, dst_ip=w.ip, dst_udp_port=w.udp_port
                ),
            )
        )
    return entities


def compile_program(out: Path) -> tuple[Path, Path]:
    """p4reduce.p4 compiled by p4reduce-p4c: (program JSON, P4Info)."""
    program, p4info = out / "p4reduce.json", out / "p4reduce.p4info.txtpb"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "softswitch.p4c",
            str(PROGRAM),
            "-I",
            str(ROOT / "p4src"),
            "-o",
            str(program),
            "--p4runtime-files",
            str(p4info),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return program, p4info
