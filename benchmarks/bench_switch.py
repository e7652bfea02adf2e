"""Packets per second of aggregation traffic through p4reduce-switch, against a Python UDP echo loop.

    python benchmarks/bench_switch.py [--seconds 3] [--window 16] [--workers 2]

Both targets are driven by the same closed-loop client in this process:
`--workers` UDP sockets on 127.0.0.x, each sending one DATA packet per
slot, `--window` slots in flight; a slot is reused (set bit flipped) as
soon as every worker received its answer. Target 1 is a running
`p4reduce-switch` with p4reduce.p4 and a job set up over P4Runtime (a
`--udp-port` port, the rootless path workers use); target 2 is a plain
Python loop (recvfrom + sendto of the same datagram) on the same kind of
socket, in its own process like the switch. The figure is DATA packets
per second handled by the target; the ratio switch/echo is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import finsy as fy
import grpc
from finsy.proto import p4r, p4r_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "switch"))  # the end-to-end tests' job helper

from switch_aggregation import (  # noqa: E402
    K,
    Worker,
    compile_program,
    data_packet,
    free_aggregation_address,
    job_entities,
    query_packet,
)

from contracts.protocol import UDP_PORT  # noqa: E402
from softswitch.dataplane.ports import host_mac  # noqa: E402

JOB, GROUP = 1, 2
ECHO_LOOP = """
import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind((sys.argv[1], 0))
print(sock.getsockname()[1], flush=True)
while True:
    data, peer = sock.recvfrom(65536)
    sock.sendto(data, peer)
"""


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(
    target: tuple[str, int], sockets: list[socket.socket], window: int, seconds: float, first_seq: int = 0
) -> float:
    """Closed-loop traffic for `seconds`; DATA packets per second the target answered.

    Uses are numbered from `first_seq` on: a later run must start ahead of every use an earlier run
    left in the switch's slots (docs/protocol.md), or its packets are stale.
    """
    rng = random.Random(1)
    values = [rng.randrange(-(1 << 20), 1 << 20) for _ in range(K)]
    selector = selectors.DefaultSelector()
    for rank, sock in enumerate(sockets):
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, rank)
    set_bits = [0] * window
    waiting = [set(range(len(sockets))) for _ in range(window)]
    chunk = first_seq

    def send(slot: int) -> None:
        for rank, sock in enumerate(sockets):
            sock.sendto(data_packet(JOB, rank, slot, set_bits[slot], values, seq=chunk), target)

    for slot in range(window):
        send(slot)
    completed = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        events = selector.select(0.2)
        if not events:  # a loss: ask for what is outstanding (the switch replays or names the missing)
            for slot in range(window):
                for rank in waiting[slot]:
                    sockets[rank].sendto(query_packet(JOB, rank, slot, set_bits[slot], seq=chunk), target)
            continue
        for key, _ in events:
            sock, rank = key.fileobj, key.data
            while True:
                try:
                    payload = sock.recv(2048)  # type: ignore[union-attr]
                except BlockingIOError:
                    break
                word = int.from_bytes(payload[4:6], "big")
                slot, set_bit = word & 0x7FFF, word >> 15
                if slot >= window or set_bit != set_bits[slot] or rank not in waiting[slot]:
                    continue  # a late duplicate
                waiting[slot].discard(rank)
                if not waiting[slot]:
                    completed += 1
                    chunk += 1
                    set_bits[slot] ^= 1
                    waiting[slot] = set(range(len(sockets)))
                    send(slot)
    selector.close()
    return completed * len(sockets) / elapsed


def worker_sockets(count: int) -> list[socket.socket]:
    sockets = []
    for rank in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((f"127.0.0.{21 + rank}", 0))
        sockets.append(sock)
    return sockets


async def set_up_job(
    address: str, agg: str, p4info: Path, program: Path, sockets: list[socket.socket], window: int
) -> None:
    workers = []
    for rank, sock in enumerate(sockets):
        ip, port = sock.getsockname()
        workers.append(Worker(rank, 1, ip, port, int.from_bytes(host_mac(socket.inet_aton(ip)), "big")))
    options = fy.SwitchOptions(p4info=p4info, p4blob=program, device_id=1)
    async with fy.Switch("bench", address, options) as switch:
        await switch.write([+e for e in job_entities(JOB, workers, agg, GROUP, pool_size=window)])  # type: ignore[operator]


def wait_for_switch(address: str, process: subprocess.Popen[bytes]) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        for _ in range(200):
            if process.poll() is not None:
                raise SystemExit("p4reduce-switch exited during start-up")
            try:
                stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1)
                return
            except grpc.RpcError:
                time.sleep(0.1)
    raise SystemExit("p4reduce-switch did not start")


def bench_switch(args: argparse.Namespace, build: Path) -> float:
    program, p4info = compile_program(build)
    address, agg = f"127.0.0.1:{free_port(socket.SOCK_STREAM)}", free_aggregation_address()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [
        sys.executable,
        "-m",
        "softswitch.daemon",
        "--no-p4",
        "--device-id",
        "1",
        "--grpc-server-addr",
        address,
        "--udp-port",
        f"1@{agg}:{UDP_PORT}",
        "--log-level",
        "warn",
    ]
    process = subprocess.Popen(command, env=env)
    sockets = worker_sockets(args.workers)
    try:
        wait_for_switch(address, process)
        asyncio.run(set_up_job(address, agg, p4info, program, sockets, args.window))
        drive((agg, UDP_PORT), sockets, args.window, 0.5)  # warm-up
        return drive((agg, UDP_PORT), sockets, args.window, args.seconds, first_seq=1 << 24)
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.wait(timeout=10)


def bench_echo(args: argparse.Namespace) -> float:
    process = subprocess.Popen(
        [sys.executable, "-c", ECHO_LOOP, "127.0.0.1"], stdout=subprocess.PIPE, text=True
    )
    sockets = worker_sockets(args.workers)
    try:
        assert process.stdout is not None
        target = ("127.0.0.1", int(process.stdout.readline()))
        drive(target, sockets, args.window, 0.5)
        return drive(target, sockets, args.window, args.seconds)
    finally:
        for sock in sockets:
            sock.close()
        process.kill()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measurement time per target (default 3)")
    parser.add_argument("--window", type=int, default=16, help="slots in flight (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="workers in the job (default 2)")
    args = parser.parse_args()
    logging.getLogger("finsy").setLevel(logging.ERROR)  # its "gNMI is not implemented" is expected here
    with tempfile.TemporaryDirectory() as build:
        switch_pps = bench_switch(args, Path(build))
    echo_pps = bench_echo(args)
    print(
        f"p4reduce-switch, p4reduce.p4 over --udp-port ({args.workers} workers, window {args.window}): "
        f"{switch_pps:,.0f} DATA packets/s"
    )
    print(f"plain Python UDP echo loop, same client:  {echo_pps:,.0f} packets/s")
    print(f"ratio switch/echo: {switch_pps / echo_pps:.3f}")


if __name__ == "__main__":
    main()
