"""4 workers all-reduce 1M float32 through the native reflector, and through Gloo, in one run: time and CPU.

    python benchmarks/bench_allreduce.py [--workers 4] [--elements 1048576] [--iters 10] [--pool 512]

The native reflector (`python -m hostlib.reflector --native --workers N`, its own process) is the
switch: it sums the N ranks' DATA of each use and sends every rank the RESULT, at once, so what
is measured is the hosts. Each of N worker processes joins one job (its own Communicator, its own
socket), all-reduces the same tensor `iters` times after a warm-up, checks the first result against
numpy's sum (within the quantization bound), then does the same `iters` all-reduces with Gloo
(torch.distributed over loopback TCP, one intra-op thread) in the same processes. Printed, per
library: the time per call (the slowest rank per iteration; median and spread over iterations),
the goodput per worker (input bytes / time), and the CPU time (user+sys of the worker process, all
its threads) per GB reduced; then the ratios from this one run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os

# numpy's OpenBLAS keeps worker threads spinning for a while after it starts; on two cores they take
# CPU from what is measured here (which uses no BLAS). Before numpy is imported (spawned processes
# inherit the environment):
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import DEFAULT_VALUES_PER_PACKET as K  # noqa: E402


def worker(
    rank: int, args: argparse.Namespace, address: tuple[str, int], store: str, barrier, results
) -> None:  # type: ignore[no-untyped-def]
    """One rank: p4reduce iterations, then Gloo iterations; puts (rank, ok, p4 times, p4 cpu, gloo times,
    gloo cpu, (DATA resent, queries, timer expiries)) on `results`."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from hostlib import Communicator, JobSpec
    from hostlib.verify import check, make_input

    torch.set_num_threads(1)
    data = make_input(rank, args.elements, "float32")
    job = JobSpec(1, args.workers, args.pool, address, K, key=0x1000 + rank)
    with Communicator(job, rank, ("127.0.0.1", 0)) as comm:
        out = np.empty_like(data)
        comm.allreduce(data, out=out)
        ok = check(out, args.workers, args.elements, "float32", k=K)[0]
        before = comm.stats()
        p4_times, p4_cpu = timed(args.iters, barrier, lambda: comm.allreduce(data, out=out))
        after = comm.stats()
        recovery = tuple(
            getattr(after, name) - getattr(before, name)
            for name in ("retransmissions", "queries", "timeouts")
        )
    # a file store, as p4reduce-bench's: a TCP port picked free may be taken before Gloo listens on it
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=args.workers)
    tensor, source = torch.empty(args.elements), torch.from_numpy(data)
    tensor.copy_(source)
    dist.all_reduce(tensor)  # warm up

    def gloo() -> None:
        tensor.copy_(source)
        dist.all_reduce(tensor)

    gloo_times, gloo_cpu = timed(args.iters, barrier, gloo)
    dist.destroy_process_group()
    results.put((rank, ok, p4_times, p4_cpu, gloo_times, gloo_cpu, recovery))


def timed(iters: int, barrier, call) -> tuple[list[float], float]:  # type: ignore[no-untyped-def]
    """Wall seconds of each call (all ranks start together) and the process's CPU seconds over all."""
    times, cpu = [], 0.0
    for _ in range(iters):
        barrier.wait()
        cpu_start, start = time.process_time(), time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - cpu_start
    return times, cpu


def describe(name: str, per_rank: list[list[float]], cpu: list[float], nbytes: int, iters: int) -> float:
    calls = [max(rank[i] for rank in per_rank) for i in range(iters)]  # a call ends with its slowest rank
    median = statistics.median(calls)
    cpu_per_gb = statistics.mean(c / (nbytes * iters / 1e9) for c in cpu)
    print(
        f"{name:>9}: {median * 1e3:8.2f} ms per call "
        f"(spread {min(calls) * 1e3:.2f}..{max(calls) * 1e3:.2f}), "
        f"goodput {nbytes / median / 1e6:8.1f} MB/s per worker, CPU {cpu_per_gb:6.2f} s per GB reduced"
    )
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--pool", type=int, default=512, help="the job's pool size (a call uses half)")
    args = parser.parse_args()
    reflector = subprocess.Popen(
        [sys.executable, "-m", "hostlib.reflector", "--native", "--workers", str(args.workers)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    try:
        host, port = reflector.stdout.readline().strip().rsplit(":", 1)  # type: ignore[union-attr]
        address = (host, int(port))
        print(
            f"load average {os.getloadavg()[0]:.2f}; {args.workers} workers, {args.elements} float32, "
            f"{args.iters} calls each, pool {args.pool}, K = {K}"
        )
        barrier, results = ctx.Barrier(args.workers), ctx.Queue()
        with tempfile.TemporaryDirectory(prefix="bench-allreduce-") as scratch:
            store = f"{scratch}/gloo-store"
            processes = [
                ctx.Process(target=worker, args=(r, args, address, store, barrier, results))
                for r in range(args.workers)
            ]
            for process in processes:
                process.start()
            reports = sorted(results.get(timeout=600) for _ in processes)
            for process in processes:
                process.join()
    finally:
        reflector.terminate()
        reflector.wait()
    nbytes = args.elements * 4
    ours = describe("p4reduce", [r[2] for r in reports], [r[3] for r in reports], nbytes, args.iters)
    theirs = describe("Gloo", [r[4] for r in reports], [r[5] for r in reports], nbytes, args.iters)
    p4_cpu, gloo_cpu = statistics.mean(r[3] for r in reports), statistics.mean(r[5] for r in reports)
    print(
        f"p4reduce time per call / Gloo's: {ours / theirs:.2f}x; "
        f"CPU per GB / Gloo's: {p4_cpu / gloo_cpu:.2f}x"
    )
    resent, queries, timeouts = (sum(r[6][i] for r in reports) for i in range(3))
    print(
        f"p4reduce recovery over all calls: {resent} DATA resent, {queries} queries, "
        f"{timeouts} timer expiries"
    )
    print(f"every p4reduce result within the quantization bound: {all(r[1] for r in reports)}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if all(r[1] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
