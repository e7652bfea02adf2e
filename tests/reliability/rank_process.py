"""One rank as its own process, for the kill tests: join, then all-reduce until told to stop or failing.

    python tests/reliability/rank_process.py CONTROLLER JOB RANK WORLD IP SIZE

Prints one JSON line per call: {"call": n, "exact": true, "t": unix time}, or, when a call
fails, {"error": message, "kind": exception class, "t": ...} and exits 0. The credential
comes from $P4REDUCE_JOB_CREDENTIAL, as a launcher would hand it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from hostlib import AllreduceError, Communicator  # noqa: E402


def inputs(rank: int, size: int, call: int) -> np.ndarray:
    return ((np.arange(size, dtype=np.int64) * (rank + 3) + call) % 100_003).astype(np.int32)


def main() -> int:
    controller, job, rank, world, ip, size = sys.argv[1:7]
    r, n, elements = int(rank), int(world), int(size)
    with Communicator.join(controller, job, r, n, address=(ip, 0), join_timeout=30) as comm:
        call = 0
        while True:
            try:
                result = comm.allreduce(inputs(r, elements, call))
            except AllreduceError as error:
                print(
                    json.dumps({"error": str(error), "kind": type(error).__name__, "t": time.time()}),
                    flush=True,
                )
                return 0
            expected = sum(inputs(k, elements, call).astype(np.int64) for k in range(n)).astype(np.int32)
            exact = bool(np.array_equal(result, expected))
            print(json.dumps({"call": call, "exact": exact, "t": time.time()}), flush=True)
            call += 1


if __name__ == "__main__":
    sys.exit(main())
