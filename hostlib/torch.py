"""PyTorch DDP communication hook: gradient buckets are summed by the switch, then averaged.

    from hostlib import Communicator
    from hostlib.torch import P4ReduceState, p4reduce_hook

    comm = Communicator.join(controller="127.0.0.1:50051", job="train", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(net)     # a gloo process group for DDP itself
    model.register_comm_hook(P4ReduceState(comm), p4reduce_hook)

DDP hands the hook flat float32 buckets; the hook all-reduces them through
the switch (block floating point, docs/protocol.md) and divides by the
world size, as DDP's default hook does. torch is an optional dependency:
this module imports it, hostlib does not. (No `from __future__ import annotations`
here: DDP checks that the hook's `bucket` annotation *is* dist.GradBucket.)
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist

from hostlib.communicator import Communicator


@dataclass
class P4ReduceState:
    comm: Communicator


def p4reduce_hook(state: P4ReduceState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Sum the bucket over all ranks through the switch and average it."""
    tensor = bucket.buffer()
    if tensor.dtype not in (torch.float32, torch.float16):
        raise TypeError(f"p4reduce_hook handles float32/float16 gradients, got {tensor.dtype}")
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    try:
        summed = state.comm.allreduce(tensor.detach().cpu().numpy())
        tensor.copy_(torch.from_numpy(summed)).div_(state.comm.job.world_size)
        future.set_result(tensor)
    except Exception as error:  # DDP re-raises it in backward()
        future.set_exception(error)
    return future
