"""`make demo`: four workers all-reduce through the embedded switch, rootless, verified.

Starts p4reduce-switch (one UDP port on 127.0.0.1) and the controller
daemon, then four worker processes on 127.0.0.2-5 that join a job through
the controller and all-reduce a 1M-element float32 tensor and a 1M-element
int32 tensor. Every worker checks its result against numpy's sum of all
workers' inputs: exact for int32, within the documented quantization bound
for float32. Logs go to logs/demo/.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

from hostlib.communicator import JoinError
from hostlib.launch import ROOT, LaunchError, services, share_job_credential
from hostlib.verify import WorkerReport, run_worker

JOB = "demo"


def _report(reports: list[WorkerReport], world: int) -> bool:
    print(f"\n{'rank':>4} {'dtype':>8} {'elements':>9} {'seconds':>8} {'goodput':>12} {'retx':>5}  check")
    ok = True
    for r in sorted(reports, key=lambda r: (r.dtype, r.rank)):
        verdict = "exact" if r.exact else f"max err {r.max_error:.3g} <= bound {r.bound:.3g}"
        if not r.ok:
            verdict = f"FAILED: {r.error or verdict}"
            ok = False
        goodput = f"{r.goodput / 1e6:.2f} MB/s"
        print(
            f"{r.rank:>4} {r.dtype:>8} {r.elements:>9} {r.seconds:>8.2f} {goodput:>12} "
            f"{r.retransmissions:>5}  {verdict}"
        )
    return ok and len(reports) == 2 * world


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hostlib.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="worker processes (1..32, default 4)")
    parser.add_argument("--elements", type=int, default=1 << 20, help="tensor size (default 1048576)")
    parser.add_argument(
        "--pool-size", type=int, default=256, help="slots of the demo job (default 256, the controller's)"
    )
    parser.add_argument("--logs", type=Path, default=ROOT / "logs" / "demo", help="log directory")
    args = parser.parse_args(argv)
    if not 1 <= args.workers <= 32 or args.elements < 1:
        parser.error("--workers must be 1..32 and --elements positive")
    started = time.perf_counter()
    share_job_credential()
    print(f"p4reduce demo: {args.workers} workers, {args.elements} float32 + {args.elements} int32 elements")
    try:
        with services(args.logs, ROOT / "build", pool_size=args.pool_size) as svc:
            print(
                f"  switch   p4reduce-switch  P4Runtime {svc.switch_grpc}, data {svc.switch_address[0]}:"
                f"{svc.switch_address[1]}  (log {svc.logs / 'switch.log'})"
            )
            print(
                f"  control  p4reduce-ctl serve  job API {svc.controller}  "
                f"(log {svc.logs / 'controller.log'})"
            )
            ctx = multiprocessing.get_context("spawn")
            jobs = [
                (svc.controller, JOB, rank, args.workers, args.elements, ("float32", "int32"))
                for rank in range(args.workers)
            ]
            with ctx.Pool(args.workers) as pool:
                results = pool.starmap(run_worker, jobs)
    except (LaunchError, JoinError) as error:  # one line: the services' log tail, or why the join failed
        print(f"demo: {error}", file=sys.stderr)
        return 1
    reports = [report for per_worker in results for report in per_worker]
    ok = _report(reports, args.workers)
    total = time.perf_counter() - started
    print(
        f"\n{'PASS' if ok else 'FAIL'}: {args.workers} workers, float32 within bound and int32 exact "
        f"through the embedded switch ({total:.1f} s in all)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
