"""Loss from 0.1 % to 20 % each way at the switch: every sum exact (int32) or within its bound (float32).

The embedded switch drops each frame in and each frame out with probability
p (seeded); two ranks all-reduce through it and report time, DATA resent
and queries. Fast variant: 1 % and 10 % on small tensors; long variant
(`make reliability`): 0.1, 1, 5, 10 and 20 % on bigger ones.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ctl_support import Artifacts, daemons, start_switch, stop
from rel_support import LONG, record, scale

from hostlib import Communicator
from hostlib.verify import check, make_input

RATES = [0.001, 0.01, 0.05, 0.10, 0.20] if LONG else [0.01, 0.10]


@pytest.mark.parametrize("rate", RATES, ids=lambda r: f"{r:.1%}")
def test_every_result_is_right_under_loss(rate: float, artifacts: Artifacts, tmp_path: Path) -> None:
    size, world = scale(20_000, 200_000), 2
    switch = start_switch("soft", artifacts, tmp_path, drop_rate=rate)
    try:
        with daemons(switch, tmp_path) as start:
            d = start()

            def rank(r: int) -> list[tuple[str, bool, float, int, int]]:
                rows = []
                address = (f"127.0.0.{190 + r}", 0)
                with Communicator.join(
                    d.listen, "lossy", r, world, address=address, progress_timeout=30
                ) as comm:
                    for dtype in ("int32", "float32"):
                        before = comm.stats()
                        started = time.perf_counter()
                        result = comm.allreduce(make_input(r, size, dtype))
                        seconds = time.perf_counter() - started
                        after = comm.stats()
                        ok = check(result, world, size, dtype, k=comm.job.values_per_packet)[0]
                        resent = after.retransmissions - before.retransmissions
                        rows.append((dtype, ok, seconds, resent, after.queries - before.queries))
                return rows

            with ThreadPoolExecutor(world) as pool:
                reports = list(pool.map(rank, range(world)))
    finally:
        stop(switch.process)
    for dtype_index, dtype in enumerate(("int32", "float32")):
        rows = [report[dtype_index] for report in reports]
        assert all(ok for _, ok, *_ in rows), f"{dtype} at {rate:.1%} loss"
        record(
            "loss",
            rate=rate,
            dtype=dtype,
            elements=size,
            seconds=round(max(r[2] for r in rows), 3),
            resent=sum(r[3] for r in rows),
            queries=sum(r[4] for r in rows),
            packets_per_rank=-(-size // 64),
        )
