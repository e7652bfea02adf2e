"""Packets per second of aggregation traffic through p4reduce-switch, against a UDP echo loop.

    python benchmarks/bench_switch.py [--seconds 3] [--window 16] [--workers 2] [--runs 3]
                                      [--client native|python] [--backend c|python]

Both targets are driven by the same closed-loop client: `--workers` UDP
sockets on 127.0.0.x, each sending one DATA packet per slot, `--window`
slots in flight; a slot is reused (set bit flipped) as soon as every worker
received its answer. Target 1 is a running `p4reduce-switch` with
p4reduce.p4 and a job set up over P4Runtime (a `--udp-port` port, the
rootless path workers use); target 2 is an echo loop (each datagram back to
its sender) on the same kind of socket, in its own process like the switch.

`--client native` (the default) drives both with a client written in C
(benchmarks/native_udp.c, recvmmsg) and the echo loop is C too
(recvmmsg/sendmmsg), so the clients are not what is measured;
`--client python` is the earlier all-Python pair. The figure is DATA packets
per second handled by the target, the median of `--runs` runs of each
(interleaved) with their spread; the ratio switch/echo is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import os
import random
import selectors
import socket
import statistics
import struct
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
    job_entities,
    query_packet,
)

from contracts.protocol import UDP_PORT  # noqa: E402
from hostlib.launch import free_loopback_address  # noqa: E402
from softswitch.backends.c import build as c_build  # noqa: E402
from softswitch.dataplane.ports import host_mac  # noqa: E402

NATIVE_SOURCE = Path(__file__).with_name("native_udp.c")
NATIVE_ECHO = """
import ctypes, socket, sys
lib = ctypes.CDLL(sys.argv[1])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
sock.bind((sys.argv[2], 0))
print(sock.getsockname()[1], flush=True)
lib.udp_echo(sock.fileno())
"""

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


def native_library() -> ctypes.CDLL:
    lib = c_build.load(c_build.build(NATIVE_SOURCE.read_text(), name="bench-udp"))
    lib.udp_client.restype = ctypes.c_double
    return lib


def drive_native(
    target: tuple[str, int], sockets: list[socket.socket], window: int, seconds: float, first_seq: int = 0
) -> float:
    """`drive`, by the C client: DATA packets per second the target answered."""
    rng = random.Random(1)
    values = [rng.randrange(-(1 << 20), 1 << 20) for _ in range(K)]
    data = b"".join(data_packet(JOB, rank, 0, 0, values) for rank in range(len(sockets)))
    query = b"".join(query_packet(JOB, rank, 0, 0) for rank in range(len(sockets)))
    fds = (ctypes.c_int * len(sockets))(*(sock.fileno() for sock in sockets))
    address = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(target[1]), socket.inet_aton(target[0]))
    for sock in sockets:
        sock.setblocking(False)
    return native_library().udp_client(
        len(sockets),
        fds,
        ctypes.create_string_buffer(address, len(address)),
        data,
        len(data) // len(sockets),
        query,
        len(query) // len(sockets),
        window,
        ctypes.c_double(seconds),
        ctypes.c_uint32(first_seq),
    )


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


def bench_switch(args: argparse.Namespace, build: Path) -> list[float]:
    program, p4info = compile_program(build)
    address, agg = f"127.0.0.1:{free_port(socket.SOCK_STREAM)}", free_loopback_address()
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
        "--backend",
        args.backend,
    ]
    process = subprocess.Popen(command, env=env)
    sockets = worker_sockets(args.workers)
    try:
        wait_for_switch(address, process)
        asyncio.run(set_up_job(address, agg, p4info, program, sockets, args.window))
        drive_with = drive_native if args.client == "native" else drive
        drive_with((agg, UDP_PORT), sockets, args.window, 0.5)  # warm-up
        # Each run starts ahead of every use the previous one left in the slots (docs/protocol.md).
        return [
            drive_with((agg, UDP_PORT), sockets, args.window, args.seconds, first_seq=(run + 1) << 24)
            for run in range(args.runs)
        ]
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.wait(timeout=10)


def bench_echo(args: argparse.Namespace) -> list[float]:
    if args.client == "native":
        library = str(c_build.build(NATIVE_SOURCE.read_text(), name="bench-udp"))
        command = [sys.executable, "-c", NATIVE_ECHO, library, "127.0.0.1"]
    else:
        command = [sys.executable, "-c", ECHO_LOOP, "127.0.0.1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    sockets = worker_sockets(args.workers)
    drive_with = drive_native if args.client == "native" else drive
    try:
        assert process.stdout is not None
        target = ("127.0.0.1", int(process.stdout.readline()))
        drive_with(target, sockets, args.window, 0.5)
        return [drive_with(target, sockets, args.window, args.seconds) for _ in range(args.runs)]
    finally:
        for sock in sockets:
            sock.close()
        process.kill()
        process.wait(timeout=10)


def _figure(rates: list[float]) -> str:
    return f"{statistics.median(rates):>10,.0f} packets/s (runs {min(rates):,.0f} .. {max(rates):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measurement time per run (default 3)")
    parser.add_argument("--window", type=int, default=16, help="slots in flight (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="workers in the job (default 2)")
    parser.add_argument("--runs", type=int, default=3, help="runs per target; medians printed (default 3)")
    parser.add_argument(
        "--client", choices=("native", "python"), default="native", help="client and echo loop"
    )
    parser.add_argument("--backend", choices=("c", "python"), default="c", help="the switch's backend")
    args = parser.parse_args()
    logging.getLogger("finsy").setLevel(logging.ERROR)  # its "gNMI is not implemented" is expected here
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as build:
        switch = bench_switch(args, Path(build))
    echo = bench_echo(args)
    kind = "C" if args.client == "native" else "Python"
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; {kind} clients")
    print(
        f"p4reduce-switch --backend {args.backend}, p4reduce.p4 over --udp-port "
        f"({args.workers} workers, window {args.window}): {_figure(switch)}"
    )
    print(f"{kind} UDP echo loop, same client:            {_figure(echo)}")
    print(f"ratio switch/echo: {statistics.median(switch) / statistics.median(echo):.3f} (target >= 0.5)")


if __name__ == "__main__":
    main()
