"""Hostile frames against a live job: the job's sums stay exact, nothing crashes, no cell is touched.

While two ranks all-reduce through the embedded switch, a fuzzer sends it
frames: random bytes, truncated and mutated DATA/QUERY packets naming the
live job or none, and packets from foreign and departed senders (a rank that
left keeps sending with its old key). Over the rootless UDP port always; as
root also as raw Ethernet into a veth pair the switch reads with `-i`.
Afterwards every register cell outside the live job's slots must still be
zero (the embedded switch reads registers over P4Runtime, an extension bmv2
lacks), every sum exact, and the switch alive.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import finsy as fy
import grpc
import numpy as np
from ctl_support import (
    HEADER,
    Artifacts,
    Daemon,
    Switch,
    Worker,
    channel_to,
    daemons,
    join_all,
    start_switch,
    stop,
)
from finsy.proto import p4r, p4r_grpc
from rel_support import record, scale

from contracts import jobapi_pb2 as pb
from contracts.protocol import DEFAULT_SLOT_COUNT, UDP_PORT, MsgType
from hostlib import Communicator

VETH = (f"fz{os.getpid() % 10000}a", f"fz{os.getpid() % 10000}b")


@contextmanager
def veth_pair() -> Iterator[tuple[str, str] | None]:
    """A veth pair in the root namespace: the switch reads one end, the fuzzer writes the other."""
    if os.geteuid() != 0:
        yield None
        return
    made = subprocess.run(
        ["ip", "link", "add", VETH[0], "type", "veth", "peer", "name", VETH[1]], capture_output=True
    )
    if made.returncode != 0:
        yield None
        return
    try:
        for name in VETH:
            subprocess.run(["ip", "link", "set", name, "up"], check=True, capture_output=True)
        yield VETH
    finally:
        subprocess.run(["ip", "link", "del", VETH[0]], capture_output=True)


def mutations(rng: random.Random, job_id: int, template: bytes) -> Iterator[bytes]:
    """Payloads for the switch's UDP port: each kind in turn."""
    while True:
        kind = rng.randrange(6)
        if kind == 0:  # random bytes of any length
            yield rng.randbytes(rng.randrange(0, 600))
        elif kind == 1:  # a DATA header with random fields, the live job's id half the time
            job = job_id if rng.random() < 0.5 else rng.randrange(1 << 16)
            fields = [MsgType.DATA, rng.randrange(256), job, rng.randrange(1 << 16), rng.randrange(256),
                      rng.randrange(256), *(rng.getrandbits(32) for _ in range(4))]  # fmt: skip
            yield HEADER.pack(*fields) + template[HEADER.size :]
        elif kind == 2:  # a real packet cut short
            yield template[: rng.randrange(len(template))]
        elif kind == 3:  # a real packet with bytes flipped
            data = bytearray(template)
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            yield bytes(data)
        elif kind == 4:  # QUERY and notices of every type
            yield struct.pack("!B", rng.randrange(8)) + template[1 : HEADER.size]
        else:  # too long
            yield template + rng.randbytes(rng.randrange(1, 200))


def raw_frames(rng: random.Random, udp_payloads: Iterator[bytes]) -> Iterator[bytes]:
    """Ethernet frames: random ones, broken IPv4, and the UDP payloads inside valid-looking headers."""
    while True:
        kind = rng.randrange(4)
        if kind == 0:
            yield rng.randbytes(rng.randrange(14, 400))
        elif kind == 1:
            yield (
                b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x77" + b"\x08\x06" + rng.randbytes(rng.randrange(0, 40))
            )
        else:
            payload = next(udp_payloads)
            total = 28 + len(payload) + (rng.randrange(-5, 5) if kind == 3 else 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45 if kind == 2 else rng.randrange(256), 0, total & 0xFFFF,
                             rng.randrange(1 << 16), 0, 64, 17, rng.randrange(1 << 16),
                             bytes([10, 0, 0, rng.randrange(256)]), bytes([10, 0, 0, 254]))  # fmt: skip
            udp = struct.pack("!HHHH", rng.randrange(1 << 16), UDP_PORT, (8 + len(payload)) & 0xFFFF, 0)
            yield b"\x02\x50\x52\x00\x00\xfe\x02\x00\x00\x00\x00\x66\x08\x00" + ip + udp + payload


def registers_outside(switch: Switch, base: int, size: int) -> int:
    """Register cells outside the job's slots that are not zero (copies, bitmaps, owners)."""
    schema = fy.P4Schema(switch.artifacts.p4info)
    ours = {s * DEFAULT_SLOT_COUNT + g for s in (0, 1) for g in range(base, base + size)} | set(
        range(base, base + size)
    )
    touched = 0
    with grpc.insecure_channel(switch.address) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        for register in schema.registers:
            name = register.alias.rsplit(".", 1)[-1]
            if name == "aborted" or (name.startswith("value") and name != "value00"):
                continue  # indexed by job id; values change only where a bitmap bit is set
            entity = p4r.Entity(register_entry=p4r.RegisterEntry(register_id=register.id))
            for reply in stub.Read(p4r.ReadRequest(device_id=1, entities=[entity]), timeout=60):
                for e in reply.entities:
                    entry = e.register_entry
                    if entry.index.index not in ours and entry.data.bitstring.strip(b"\x00"):
                        touched += 1
    return touched


def test_a_live_job_stays_exact_under_fuzz(artifacts: Artifacts, tmp_path: Path) -> None:
    frames = scale(3000, 18_000)
    rng = random.Random(15)
    with veth_pair() as veth:
        interfaces = ((2, veth[0]),) if veth else ()
        switch = start_switch("soft", artifacts, tmp_path, interfaces=interfaces)
        try:
            with daemons(switch, tmp_path) as start:
                d = start()
                outcome = fuzz_during_calls(d, switch, rng, frames, veth)
                alive = switch.process.poll() is None
        finally:
            stop(switch.process)
    assert alive, "the switch survived"
    assert outcome["exact"] == outcome["calls"] > 0
    assert outcome["touched"] == 0, "no register cell outside the live job's slots changed"
    assert outcome["departed_refused"] and outcome["foreign_refused"]
    assert outcome["frames_raw"] > 0 or os.geteuid() != 0, "as root the raw port is fuzzed too"
    record("fuzz", **outcome)


def fuzz_during_calls(
    d: Daemon, switch: Switch, rng: random.Random, frames: int, veth: tuple[str, str] | None
) -> dict:
    assert switch.udp_address is not None
    target = (switch.udp_address, UDP_PORT)
    # A third rank joins and leaves: its key and address are never trusted again.
    leaver = Worker.open(0, "127.0.0.172")
    with channel_to(d) as stub:
        sizes = {"size": 6000}
        done = threading.Event()
        results: list[bool] = []
        # Both ranks decide together whether to make another call: a rank that left while its peer
        # had begun one more would leave that call to time out.
        decision = {"stop": False}
        agree = threading.Barrier(2, action=lambda: decision.update(stop=done.is_set()))

        def rank(r: int) -> None:
            with Communicator.join(d.listen, "live", r, 2, address=(f"127.0.0.{170 + r}", 0)) as comm:
                data = (np.arange(sizes["size"], dtype=np.int64) * (r + 5) % 99_991).astype(np.int32)
                expected = sum(
                    (np.arange(sizes["size"], dtype=np.int64) * (k + 5) % 99_991) for k in range(2)
                )
                while True:
                    agree.wait(timeout=60)  # a peer that failed breaks it: this rank stops too
                    if decision["stop"]:
                        break
                    results.append(bool(np.array_equal(comm.allreduce(data), expected.astype(np.int32))))

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        job = None
        for _ in range(100):
            try:
                job = stub.GetJob(pb.JobRef(name="live"), timeout=5)
                if job.state == "active":
                    break
            except grpc.RpcError:
                pass
            threading.Event().wait(0.1)
        assert job is not None and job.state == "active"
        side, _ = join_all(stub, "side", [leaver, Worker.open(1, "127.0.0.173")])
        stub.LeaveJob(pb.LeaveJobRequest(name="side", rank=0), timeout=5)
        template = HEADER.pack(MsgType.DATA, 0, job.job_id, 0, 0, 0, 0, 0, 0x10000040, 0) + bytes(256)
        payloads = mutations(rng, job.job_id, template)
        counters_before = drops(d)
        senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
        for i, s in enumerate(senders):
            s.bind((f"127.0.0.{180 + i}", 0))
        raw = None
        if veth is not None:
            raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            raw.bind((veth[1], 0))
        frames_raw = raw_frames(rng, mutations(rng, job.job_id, template))
        for i in range(frames):
            senders[i % len(senders)].sendto(next(payloads), target)
            if raw is not None and i % 2:
                raw.send(next(frames_raw))
            if i % 200 == 0:
                leaver.send(target, side.job_id, 0, [1] * 64)  # departed: UNKNOWN_JOB
                forged = HEADER.pack(
                    MsgType.DATA, 0, job.job_id, 0, 0, 0, 0, rng.getrandbits(32), 0x10000040, 0
                )
                senders[0].sendto(forged + bytes(256), target)  # foreign: WRONG_SENDER
        done.set()
        for t in threads:
            t.join(timeout=60)
        for s in senders:
            s.close()
        if raw is not None:
            raw.close()
        leaver.sock.close()
        after = drops(d)
        base, size = job.base_slot, job.pool_size
    return {
        "frames_udp": frames,
        "frames_raw": frames // 2 if veth else 0,
        "calls": len(results),
        "exact": sum(results),
        "touched": registers_outside(switch, base, size),
        "departed_refused": after.get("UNKNOWN_JOB", 0) - counters_before.get("UNKNOWN_JOB", 0),
        "foreign_refused": after.get("WRONG_SENDER", 0) - counters_before.get("WRONG_SENDER", 0),
        "drops": {
            k: v - counters_before.get(k, 0) for k, v in after.items() if v - counters_before.get(k, 0)
        },
    }


def drops(d: Daemon) -> dict[str, int]:
    with channel_to(d) as stub:
        reply = stub.GetCounters(pb.GetCountersRequest(), timeout=10)
    return {c.label: c.packets for c in reply.counters if c.counter == "ingress_drops"}
