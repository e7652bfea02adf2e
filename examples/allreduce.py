"""One rank of four all-reducing numpy arrays through the switch: python examples/allreduce.py RANK.

Run four, one per rank, while the README's switch and daemon run (`make switch`, `p4reduce-ctl serve`):
    for rank in 0 1 2 3; do .venv/bin/python examples/allreduce.py $rank & done; wait
The first join creates the job; every rank presents the same credential ($P4REDUCE_JOB_CREDENTIAL here,
or Communicator.join(credential=...) from a launcher that hands one secret to every rank).
"""

import sys

import numpy as np

from hostlib import Communicator, JoinError

rank = int(sys.argv[1])  # 0..3: this process's rank
try:
    comm = Communicator.join(
        controller="127.0.0.1:50051", job="numpy-demo", rank=rank, world_size=4,
        address=(f"127.0.0.{2 + rank}", 0),  # this rank's own address: the switch tells ranks apart by it
    )  # fmt: skip
except JoinError as error:  # the controller refused the join, or could not be reached: one line says why
    sys.exit(f"rank {rank}: {error}")
with comm:
    grad = np.random.default_rng(rank).standard_normal(1 << 20).astype(np.float32)
    total = comm.allreduce(grad)  # element-wise sum over the 4 ranks, the same on every rank
    mean = comm.allreduce(grad, op="avg")
    handle = comm.allreduce_async(grad)  # or in the background, while this rank computes
    total = handle.wait()
    ints = comm.allreduce(np.full(1000, rank + 1, dtype=np.int32))  # int32 is exact: 1 + 2 + 3 + 4
    assert (ints == 10).all()
    s = comm.stats()  # what this rank's calls cost
    print(f"rank {rank}: {s.calls} calls, {s.retransmissions} DATA resent, {s.queries} questions, "
          f"{s.goodput_bytes_per_second / 1e6:.0f} MB/s")  # fmt: skip
