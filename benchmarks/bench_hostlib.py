"""The native packet engine against a plain Python UDP loop and a native sendmmsg/recvmmsg loop, in one run.

    python benchmarks/bench_hostlib.py [--packets N] [--window W] [--repeat R]
    python benchmarks/bench_hostlib.py --sweep 16,32,64,128,256,512,1024 [--packets N] [--repeat R]

All three talk to the native reflector (hostlib/csrc/reflector.c, `python -m hostlib.reflector
--native`), which runs in its own process and answers every DATA at once, as a one-worker
switch does, so the switch is not the bottleneck. Each keeps W datagrams of a DATA's size
(K = 64: 280 bytes) in flight on a fresh UDP socket connected to it:

- the plain Python loop: `send` and `recv_into`, one datagram each;
- the native loop: `sendmmsg`/`recvmmsg` batches and nothing else (hostlib._reflector.blast);
- the same native loop with UDP GSO runs and UDP GRO, which the engine uses too (for reference:
  the fastest this kernel moves these datagrams, with no protocol at all);
- the engine: an int32 all-reduce of N*K elements through a Communicator (pool 2W: W slots in
  flight) into an existing array, i.e. the whole protocol: slot pacing, timers, loss detection,
  building and checking every header, copying every result into the output array (and
  allreduce's copy of its input).

Each repeat measures the four in turn, each on a socket of its own; the figures printed are packets/s per
repeat, then for each ratio its median and spread (min..max) over the repeats. Targets: the engine
>= 5x the plain Python loop and >= 0.7x the native loop.
"""

from __future__ import annotations

import argparse
import os

# numpy's OpenBLAS keeps worker threads spinning for a while after it starts; on two cores they take
# CPU from what is measured here (which uses no BLAS). Before numpy is imported (spawned processes
# inherit the environment):
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import DEFAULT_VALUES_PER_PACKET as K  # noqa: E402
from contracts.protocol import MsgType, payload_bytes  # noqa: E402
from hostlib import Communicator, JobSpec, _reflector  # noqa: E402

BUFFER_BYTES = 8 << 20  # every window fits: no loss on loopback


def connected(address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    sock.bind(("127.0.0.1", 0))
    sock.connect(address)
    return sock


def python_loop(address: tuple[str, int], packets: int, window: int) -> float:
    with connected(address) as sock:
        payload, buffer = bytes([MsgType.DATA]) + bytes(payload_bytes(K) - 1), bytearray(2048)
        started = time.perf_counter()
        for _ in range(window):
            sock.send(payload)
        for sent in range(window, packets + window):
            sock.recv_into(buffer)
            if sent < packets:
                sock.send(payload)
        return packets / (time.perf_counter() - started)


def native_loop(address: tuple[str, int], packets: int, window: int, gso: bool = False) -> float:
    with connected(address) as sock:
        return packets / _reflector.blast(sock.fileno(), packets, window, payload_bytes(K), gso)


def engine(address: tuple[str, int], packets: int, window: int) -> float:
    data = np.arange(packets * K, dtype=np.int32)
    result = np.zeros_like(data)  # written before, so that the call does not pay its first page faults
    job = JobSpec(
        job_id=1, world_size=1, pool_size=2 * window, switch_address=address, values_per_packet=K, key=1
    )
    with Communicator(job, 0, sock=connected(address)) as comm:
        comm.allreduce(data[: 4 * window * K])  # warm up
        sent = comm.stats().packets_sent
        started = time.perf_counter()
        comm.allreduce(data, out=result)
        elapsed = time.perf_counter() - started
        assert np.array_equal(result, data), "the engine's result is wrong"
        assert comm.stats().packets_sent - sent >= packets
    return packets / elapsed


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}x (spread {min(values):.2f}..{max(values):.2f}x)"


def sweep(address: tuple[str, int], packets: int, windows: list[int], repeat: int) -> None:
    """The engine alone, by window (pool = 2W), the windows alternating within each repeat."""
    rates: dict[int, list[float]] = {w: [] for w in windows}
    for _ in range(repeat):
        for window in windows:
            rates[window].append(engine(address, packets, window))
    print(f"{'window':>6} {'pool':>6} {'median':>12} {'spread':>25}  engine packets/s")
    for window, values in rates.items():
        print(
            f"{window:>6} {2 * window:>6} {statistics.median(values):>12,.0f} "
            f"{min(values):>12,.0f}..{max(values):<12,.0f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=200_000)
    parser.add_argument("--window", type=int, default=128, help="datagrams in flight (the engine's pool: 2W)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sweep", metavar="W,W,...", help="instead: the engine alone at each window")
    args = parser.parse_args()
    reflector = subprocess.Popen(
        [sys.executable, "-m", "hostlib.reflector", "--native"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    rows = []
    try:
        host, port = reflector.stdout.readline().strip().rsplit(":", 1)  # type: ignore[union-attr]
        address = (host, int(port))
        if args.sweep:
            print(f"load average {os.getloadavg()[0]:.2f}; {args.packets} packets per call, K = {K}")
            sweep(address, args.packets, [int(w) for w in args.sweep.split(",")], args.repeat)
            print(f"load average after: {os.getloadavg()[0]:.2f}")
            return 0
        print(
            f"load average {os.getloadavg()[0]:.2f}; {args.packets} packets, {args.window} in flight, K = {K}"
        )
        print(
            f"{'repeat':>6} {'python loop':>12} {'native loop':>12} {'GSO/GRO loop':>13} {'engine':>12}"
            "  packets/s"
        )
        for repeat in range(args.repeat):
            row = (
                python_loop(address, args.packets, args.window),
                native_loop(address, args.packets, args.window),
                native_loop(address, args.packets, args.window, gso=True),
                engine(address, args.packets, args.window),
            )
            rows.append(row)
            print(f"{repeat + 1:>6} {row[0]:>12,.0f} {row[1]:>12,.0f} {row[2]:>13,.0f} {row[3]:>12,.0f}")
    finally:
        reflector.terminate()
        reflector.wait()
    print(f"engine / plain Python loop: {spread([e / p for p, _, _, e in rows])}  (target >= 5x)")
    print(f"engine / native loop:       {spread([e / n for _, n, _, e in rows])}  (target >= 0.7x)")
    print(f"engine / GSO/GRO loop:      {spread([e / g for _, _, g, e in rows])}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
