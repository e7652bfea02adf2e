"""What the CUDA path's staging costs beyond its copies: the pipeline on host memory against a direct call.

    python benchmarks/bench_staging.py --elements 2102248 --runs 5 --pieces 525312,1050624,0

hostlib.torch.staging cuts a collective into pieces, hands each to the
host library from a staging thread, and copies results back; with
`HostLanes` (tensors in host memory) it runs without a GPU, its device
copies being plain memory copies. This times it, for each piece size
(0: the whole collective as one piece), against `Communicator.allreduce`
of the same float32 tensor, on `--ranks` worker threads against an
embedded switch and controller. Per run, rank 0's time of each; printed:
medians, spread (min-max), the ratio to the direct call, and the load
average before and after. On a GPU the two host copies of the lanes
become DMA, the rest (one more call per piece, the staging thread, the
host library's own copy of its input) stays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from contracts.jobapi_metadata import CREDENTIAL_ENV
from hostlib import Communicator
from hostlib.contention import load_average
from hostlib.launch import ROOT, services
from hostlib.torch.staging import PIECE_ELEMENTS, StagedSums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--elements", type=int, default=4 * PIECE_ELEMENTS + 1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--pieces", default=f"{PIECE_ELEMENTS},0", help="piece sizes, comma-separated; 0: whole"
    )
    args = parser.parse_args()
    sizes = [int(p) or args.elements for p in args.pieces.split(",")]
    if args.runs < 3 or args.ranks < 2 or args.elements < 1 or min(sizes) < 1:
        parser.error("--runs >= 3, --ranks >= 2, --elements >= 1 and piece sizes >= 0")
    os.environ.setdefault(CREDENTIAL_ENV, "bench-staging-job-credential")

    def rank(svc_controller: str, r: int) -> dict[str, list[float]]:
        address = (f"127.0.47.{10 + r}", 0)
        with Communicator.join(
            svc_controller, "staging", r, args.ranks, address=address, join_timeout=30
        ) as comm:
            staged = {size: StagedSums(comm, piece=size) for size in sizes}
            x = torch.randn(args.elements, generator=torch.Generator().manual_seed(r))
            times: dict[str, list[float]] = {"direct": [], **{str(size): [] for size in sizes}}
            for run in range(args.runs + 1):  # run 0 warms up
                began = time.perf_counter()
                comm.allreduce(x.numpy())
                if run:
                    times["direct"].append(time.perf_counter() - began)
                for size, pipeline in staged.items():
                    y = x.clone()
                    began = time.perf_counter()
                    pipeline.start("all_reduce", y, "sum", y).wait()
                    if run:
                        times[str(size)].append(time.perf_counter() - began)
            for pipeline in staged.values():
                pipeline.close()
            return times

    with tempfile.TemporaryDirectory() as scratch:
        with services(Path(scratch), ROOT / "build", switch_ip="127.0.47.1", pool_size=64) as svc:
            before = load_average()
            with ThreadPoolExecutor(args.ranks) as pool:
                times = list(pool.map(lambda r: rank(svc.controller, r), range(args.ranks)))[0]
            after = load_average()
    print(
        f"{args.elements} float32, {args.ranks} ranks, {args.runs} runs; "
        f"load average {before:.2f}/{after:.2f}"
    )
    direct = times.pop("direct")
    print(
        f"{'direct':>12}: median {statistics.median(direct) * 1e3:.1f} ms "
        f"({min(direct) * 1e3:.1f}-{max(direct) * 1e3:.1f})"
    )
    for size, values in times.items():
        ratios = [s / d for s, d in zip(values, direct, strict=True)]
        print(
            f"{'piece ' + size:>12}: median {statistics.median(values) * 1e3:.1f} ms "
            f"({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f}); staged/direct median "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)"
        )


if __name__ == "__main__":
    main()
