"""One lab worker, run inside a Mininet host: all-reduce a deterministic tensor, verify, print JSON.

The lab runner has already joined the job on this worker's behalf (hosts
have no route to the controller's loopback job API) and passes the job
description on the command line, so the worker uses hostlib's static path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from hostlib import Communicator
from hostlib.launch import add_worker_arguments, worker_job
from hostlib.verify import check, make_input


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_worker_arguments(parser)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--dtype", action="append", required=True)
    args = parser.parse_args()
    job, rank, bind = worker_job(args)
    results = []
    with Communicator(job, rank, bind, progress_timeout=20.0) as comm:
        for dtype in args.dtype:
            data = make_input(args.rank, args.size, dtype)
            started = time.perf_counter()
            try:
                result = comm.allreduce(data)
            except Exception as error:  # reported to the runner, which fails the lab
                results.append({"dtype": dtype, "ok": False, "error": f"{type(error).__name__}: {error}"})
                continue
            seconds = time.perf_counter() - started
            ok, max_error, bound = check(result, args.world, args.size, dtype, k=job.values_per_packet)
            results.append(
                {
                    "dtype": dtype,
                    "ok": ok,
                    "seconds": seconds,
                    "goodput": data.nbytes / seconds,
                    "max_error": max_error,
                    "bound": bound,
                    "first": [float(v) for v in result[:3]],
                }
            )
        stats = comm.stats()
    print(
        json.dumps(
            {
                "rank": args.rank,
                "results": results,
                "packets_sent": stats.packets_sent,
                "retransmissions": stats.retransmissions,
            }
        )
    )
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
