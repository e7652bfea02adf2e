"""`p4reduce-bench`: time verified all-reduces through the switch, optionally under loss and against Gloo.

    p4reduce-bench [--workers 4] [--sizes 1K,64K,1M] [--dtypes float32,int32] [--iters 3]
                   [--drop-rate P] [--baseline gloo] [--controller HOST:PORT]

Starts a rootless p4reduce-switch and the controller daemon (or attaches to
a running controller), runs N worker processes on 127.0.0.2.., all-reduces
each size and dtype `iters` times, checks every result against numpy's sum
(exact for int32, within the documented bound for floats), and prints one
row per size and dtype: the slowest worker's median time, goodput per
worker (input bytes per second), DATA resent and QUERY packets. `--drop-rate
P` runs the lossless case and the lossy one (P dropped at the switch in
each direction) in the same invocation and prints, from that one run, the
goodput ratio and how many DATA packets were resent per packet the switch
actually dropped (its own count); `--baseline gloo` times
torch.distributed's Gloo all-reduce of the same tensors in the same worker
processes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import statistics
import sys
import time
from dataclasses import dataclass

from hostlib.launch import ROOT, LaunchError, free_port, services, share_job_credential
from hostlib.verify import check, make_input

DTYPES = ("float32", "float16", "int32")


@dataclass(frozen=True)
class Sample:
    rank: int
    size: int
    dtype: str
    iteration: int
    seconds: float
    retransmissions: int
    queries: int
    ok: bool
    gloo_seconds: float | None = None


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    text = text.strip().upper()
    try:
        value = int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (like 1024, 64K or 1M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return value


def bench_worker(
    controller: str,
    job: str,
    rank: int,
    world: int,
    sizes: list[int],
    dtypes: list[str],
    iters: int,
    gloo_port: int | None,
) -> list[Sample]:
    """One worker process: every size x dtype x iteration through the switch (and Gloo), verified."""
    from hostlib.communicator import Communicator

    samples = []
    with Communicator.join(controller, job, rank, world, address=(f"127.0.0.{2 + rank}", 0)) as comm:
        for size in sizes:
            for dtype in dtypes:
                for iteration in range(iters):
                    data = make_input(rank, size, dtype, iteration)
                    before = comm.stats()
                    started = time.perf_counter()
                    result = comm.allreduce(data)
                    seconds = time.perf_counter() - started
                    ok = check(result, world, size, dtype, iteration, k=comm.job.values_per_packet)[0]
                    after = comm.stats()
                    retx, queries = (
                        after.retransmissions - before.retransmissions,
                        after.queries - before.queries,
                    )
                    samples.append(Sample(rank, size, dtype, iteration, seconds, retx, queries, ok))
    if gloo_port is not None:
        samples = _with_gloo(samples, rank, world, gloo_port)
    return samples


def _with_gloo(samples: list[Sample], rank: int, world: int, port: int) -> list[Sample]:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        timed = []
        for s in samples:
            tensor = torch.from_numpy(make_input(rank, s.size, s.dtype, s.iteration).copy())
            dist.barrier()
            started = time.perf_counter()
            dist.all_reduce(tensor)
            timed.append(dataclasses.replace(s, gloo_seconds=time.perf_counter() - started))
        return timed
    finally:
        dist.destroy_process_group()


def run_suite(args: argparse.Namespace, drop_rate: float, tag: str) -> tuple[list[Sample], dict[str, int]]:
    """Every sample of one run, and the switch's own packet counters (empty with --controller)."""
    gloo_port = free_port() if args.baseline == "gloo" else None
    ctx = multiprocessing.get_context("spawn")

    def launch(controller: str) -> list[Sample]:
        jobs = [
            (controller, f"bench-{tag}", rank, args.workers, args.sizes, args.dtypes, args.iters, gloo_port)
            for rank in range(args.workers)
        ]
        with ctx.Pool(args.workers) as pool:
            return [s for per_worker in pool.starmap(bench_worker, jobs) for s in per_worker]

    if args.controller:
        return launch(args.controller), {}
    logs = ROOT / "logs" / f"bench-{tag}"
    stats = logs / "switch-stats.json"
    with services(
        logs,
        ROOT / "build",
        drop_rate=drop_rate,
        drop_rate_out=drop_rate,
        pool_size=args.pool_size,
        stats_file=stats,
    ) as svc:
        print(
            f"  {tag}: switch {svc.switch_address[0]}:{svc.switch_address[1]}"
            f"{f', {drop_rate:.1%} loss each way' if drop_rate else ''}; logs in {logs}",
            flush=True,
        )
        samples = launch(svc.controller)
    return samples, json.loads(stats.read_text()) if stats.exists() else {}


def summarize(
    samples: list[Sample], sizes: list[int], dtypes: list[str], gloo: bool
) -> dict[tuple[int, str], float]:
    """Print the table; return goodput per worker (bytes/s) per (size, dtype)."""
    header = f"{'size':>9} {'dtype':>8} {'seconds':>8} {'goodput/worker':>15} {'resent':>6} {'asked':>6}"
    print(header + (f" {'gloo s':>8} {'vs gloo':>8}" if gloo else ""))
    goodputs = {}
    for size in sizes:
        for dtype in dtypes:
            rows = [s for s in samples if s.size == size and s.dtype == dtype]
            # an all-reduce is done when its slowest worker is: the max per iteration, then the median
            iterations = sorted({s.iteration for s in rows})
            seconds = statistics.median(max(s.seconds for s in rows if s.iteration == i) for i in iterations)
            goodput = size * (2 if dtype == "float16" else 4) / seconds
            goodputs[(size, dtype)] = goodput
            line = (
                f"{size:>9} {dtype:>8} {seconds:>8.3f} {goodput / 1e6:>10.2f} MB/s "
                f"{sum(s.retransmissions for s in rows):>6} {sum(s.queries for s in rows):>6}"
            )
            if gloo:
                gloo_s = statistics.median(s.gloo_seconds or 0.0 for s in rows)
                line += f" {gloo_s:>8.4f} {seconds / gloo_s if gloo_s else float('nan'):>7.1f}x"
            print(line)
    return goodputs


def recovery_cost(samples: list[Sample], switch: dict[str, int]) -> str:
    """DATA resent (and QUERY sent) per packet the switch's fault injection dropped, from the same run."""
    dropped = switch.get("dropped_fault_in", 0) + switch.get("dropped_fault_out", 0)
    resent, asked = sum(s.retransmissions for s in samples), sum(s.queries for s in samples)
    if not dropped:
        return f"  recovery: {resent} DATA resent, {asked} queries; the switch reported no drops"
    return (
        f"  recovery: {dropped} packets dropped by the switch ({switch.get('dropped_fault_in', 0)} in, "
        f"{switch.get('dropped_fault_out', 0)} out); {resent} DATA resent = {resent / dropped:.2f} per drop, "
        f"{asked} header-only queries = {asked / dropped:.2f} per drop"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="p4reduce-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="worker processes (1..32, default 4)")
    parser.add_argument("--sizes", default="1K,64K,1M", help="comma-separated element counts (K, M suffixes)")
    parser.add_argument("--dtypes", default="float32,int32", help=f"comma-separated, of {', '.join(DTYPES)}")
    parser.add_argument("--iters", type=int, default=3, help="repetitions per size and dtype (default 3)")
    parser.add_argument("--drop-rate", type=float, default=0.0, help="also run with this loss at the switch")
    parser.add_argument("--baseline", choices=("gloo",), help="also time torch.distributed's Gloo all-reduce")
    parser.add_argument(
        "--controller", help="attach to a running controller (HOST:PORT) instead of starting one"
    )
    parser.add_argument("--pool-size", type=int, default=32, help="slots of the benchmark job (default 32)")
    args = parser.parse_args(argv)
    try:
        args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    args.dtypes = [d.strip() for d in args.dtypes.split(",")]
    if unknown := [d for d in args.dtypes if d not in DTYPES]:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}; choose from {', '.join(DTYPES)}")
    if not 1 <= args.workers <= 32 or args.iters < 1 or not 0.0 <= args.drop_rate < 1.0:
        parser.error("--workers must be 1..32, --iters >= 1, --drop-rate in [0, 1)")
    if args.drop_rate and args.controller:
        parser.error("--drop-rate needs the benchmark's own switch (leave out --controller)")
    share_job_credential()
    if args.baseline == "gloo":
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            parser.error("--baseline gloo needs PyTorch: pip install 'p4reduce[torch]'")
    print(f"p4reduce-bench: {args.workers} workers, sizes {args.sizes}, dtypes {args.dtypes}, x{args.iters}")
    try:
        lossless, _ = run_suite(args, 0.0, "lossless")
        base = summarize(lossless, args.sizes, args.dtypes, args.baseline == "gloo")
        samples = list(lossless)
        ratio = None
        if args.drop_rate:
            lossy, counters = run_suite(args, args.drop_rate, "lossy")
            print(f"with {args.drop_rate:.1%} loss each way:")
            worse = summarize(lossy, args.sizes, args.dtypes, False)
            samples += lossy
            largest = max(args.sizes)
            ratio = min(worse[(largest, d)] / base[(largest, d)] for d in args.dtypes)
            for key in sorted(base):
                print(f"  goodput ratio lossy/lossless {key[0]:>9} {key[1]:>8}: {worse[key] / base[key]:.0%}")
            print(recovery_cost(lossy, counters))
    except LaunchError as error:
        print(f"p4reduce-bench: {error}", file=sys.stderr)
        return 1
    failed = sum(not s.ok for s in samples)
    summary = f"{len(samples)} verified all-reduces, {failed} wrong"
    if ratio is not None:
        summary += (
            f"; at {max(args.sizes)} elements, goodput under {args.drop_rate:.1%} loss is "
            f"{ratio:.0%} of lossless (worst dtype; small tensors are latency-bound)"
        )
    print(("PASS: " if not failed else "FAIL: ") + summary)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
