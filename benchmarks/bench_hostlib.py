"""The host packet engine against a plain Python UDP loop, both talking to a reflector, in one run.

    python benchmarks/bench_hostlib.py [--packets N] [--window W]

The reflector (hostlib.reflector) runs in its own process and answers every
DATA at once, so the switch is not the bottleneck. The floor keeps W
datagrams in flight on the same kind of connected socket with nothing but
send/recv_into; the engine does the same work plus slot pacing, set bits,
chunk checks, timers and copying results into the output array (an int32
all-reduce of N*32 elements). Prints packets/s of both and the ratio last
(target >= 50%).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import DEFAULT_VALUES_PER_PACKET as K  # noqa: E402
from contracts.protocol import MsgType, payload_bytes  # noqa: E402
from hostlib import Communicator, JobSpec  # noqa: E402


def floor(address: tuple[str, int], packets: int, window: int) -> float:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.connect(address)
    payload, buffer = bytes([MsgType.DATA]) + bytes(payload_bytes(K) - 1), bytearray(2048)
    started = time.perf_counter()
    for _ in range(window):
        sock.send(payload)
    for sent in range(window, packets + window):
        sock.recv_into(buffer)
        if sent < packets:
            sock.send(payload)
    elapsed = time.perf_counter() - started
    sock.close()
    return packets / elapsed


def engine(address: tuple[str, int], packets: int, window: int) -> float:
    data = np.arange(packets * K, dtype=np.int32)
    with Communicator(JobSpec(1, 1, 2 * window, address, K, 1), 0) as comm:
        comm.allreduce(data[: window * K])  # warm up
        sent = comm.stats().packets_sent
        started = time.perf_counter()
        result = comm.allreduce(data)
        elapsed = time.perf_counter() - started
        assert np.array_equal(result, data) and comm.stats().packets_sent - sent >= packets
    return packets / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=50_000)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    reflector = subprocess.Popen(
        [sys.executable, "-m", "hostlib.reflector"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        host, port = reflector.stdout.readline().strip().rsplit(":", 1)  # type: ignore[union-attr]
        address = (host, int(port))
        floor_pps = floor(address, args.packets, args.window)
        engine_pps = engine(address, args.packets, args.window)
    finally:
        reflector.terminate()
        reflector.wait()
    print(f"plain UDP loop: {floor_pps:>9,.0f} packets/s  (send/recv_into, {args.window} in flight)")
    print(f"packet engine:  {engine_pps:>9,.0f} packets/s  (int32 all-reduce of {args.packets * K} elements)")
    print(f"ratio: the engine reaches {engine_pps / floor_pps:.0%} of the plain loop (target >= 50%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
