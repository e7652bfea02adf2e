"""A switch short of a core, on the virtual fabric: does any first call stall? (docs/performance.md)

    python benchmarks/slowed_switch.py [--engine native] [--seeds 1-32] [--query-ms 2,3]

4 ranks, pool 64, 16 KB float32, 5 % loss each way (seeded), a switch that spends 0.1 ms per DATA
and, from 10 ms into the call, Q ms per QUERY and 2Q ms per DATA, as a switch process that lost its
core does. A call that makes no progress for 60 s fails (progress_timeout): the stall that
4f3ce96 cured, which a change to the engines' timers must not bring back. Prints one line per seed
and speed, and per speed the failures, the median and longest first call and the QUERYs sent.
Virtual time: the figures do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostlib.calls import AllreduceError  # noqa: E402
from tests.hostlib.fabric import Fabric, random_faults  # noqa: E402

SLOW_FROM = 0.010  # seconds into the call when the switch slows down
BASE_DATA_TIME = 0.0001  # seconds per DATA before that: a fast switch process, so the call lasts past 10 ms


class SlowedFabric(Fabric):
    """The fabric whose switch takes `slow_query` s per QUERY and twice that per DATA from SLOW_FROM on."""

    slow_query: float = 0.0

    def _deliver(self, kind: str, rank: int, payload: bytes, tos: int = 0) -> None:
        if self.now >= SLOW_FROM and not self.query_time:
            self.query_time, self.switch_time = self.slow_query, 2 * self.slow_query
        super()._deliver(kind, rank, payload, tos)


def first_call(engine: str, seed: int, query_time: float) -> tuple[float, int, bool]:
    """Seconds of the first call, QUERYs sent, and whether it failed (stalled or wrong)."""
    fabric = SlowedFabric(
        engine=engine, world=4, pool=64, fault=random_faults(seed, drop=0.05), progress_timeout=60.0
    )
    fabric.slow_query, fabric.switch_time = query_time, BASE_DATA_TIME
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(4096).astype(np.float32) for _ in range(4)]
    try:
        results = fabric.run(fabric.plans(data), limit=200.0)
    except AssertionError:  # ran past the limit: a hang
        return fabric.now, sum(e.stats.queries for e in fabric.engines), True
    expected = np.sum(np.stack(data).astype(np.float64), axis=0)
    failed = any(isinstance(r, AllreduceError) or not np.allclose(r, expected, atol=1e-3) for r in results)
    return fabric.now, sum(e.stats.queries for e in fabric.engines), failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("spec", "native", "twin"), default="native")
    parser.add_argument("--seeds", default="1-32", help="first-last (default 1-32)")
    parser.add_argument("--query-ms", default="2,3", help="ms per QUERY once slowed (default 2,3)")
    args = parser.parse_args()
    first, last = (int(x) for x in args.seeds.split("-"))
    failures = 0
    for query_ms in (float(q) for q in args.query_ms.split(",")):
        times, queries = [], []
        for seed in range(first, last + 1):
            seconds, asked, failed = first_call(args.engine, seed, query_ms / 1000)
            print(
                f"{query_ms:g} ms/QUERY seed {seed}: first call {seconds:.2f} s, {asked} QUERYs, "
                f"failed={failed}"
            )
            times.append(seconds)
            queries.append(asked)
            failures += failed
        print(
            f"{query_ms:g} ms/QUERY: median {statistics.median(times):.2f} s, longest {max(times):.2f} s, "
            f"QUERYs {min(queries)}-{max(queries)}"
        )
    print(f"failed: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
