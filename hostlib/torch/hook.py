"""PyTorch DDP communication hook: gradient buckets are summed by the switch, then averaged.

    from hostlib import Communicator
    from hostlib.torch import P4ReduceState, p4reduce_hook

    comm = Communicator.join(controller="127.0.0.1:50051", job="train", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(net)     # a gloo process group for DDP itself
    model.register_comm_hook(P4ReduceState(comm), p4reduce_hook)

DDP hands the hook flat float32 buckets; the hook averages them through
the switch (block floating point, docs/protocol.md), as DDP's default hook
does, in the background: the future completes when the switch's answer is
in, so DDP overlaps it with the rest of backward. A NaN or Inf in one
rank's gradients comes back in its block on every rank, so a GradScaler
skips the step everywhere. torch is an optional dependency:
this module imports it, hostlib does not. (No `from __future__ import annotations`
here: DDP checks that the hook's `bucket` annotation *is* dist.GradBucket.)
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist

from hostlib.communicator import Communicator, Handle
from hostlib.torch.outcome import Outcome


@dataclass
class P4ReduceState:
    comm: Communicator


def p4reduce_hook(state: P4ReduceState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average the bucket over all ranks through the switch, in the background."""
    tensor = bucket.buffer()
    outcome: Outcome[torch.Tensor] = Outcome()  # DDP re-raises its error in backward()
    if tensor.dtype not in (torch.float32, torch.float16):
        outcome.fail(TypeError(f"p4reduce_hook handles float32 and float16, not {tensor.dtype}"))
        return outcome.future
    in_place = tensor.device.type == "cpu"  # the average straight into the bucket, as Gloo writes it
    try:
        values = tensor.detach().cpu().numpy()
        # read in place: DDP leaves the bucket alone until the future completes
        handle = state.comm.allreduce_async(values, values if in_place else None, op="avg", copy=False)
    except Exception as error:
        outcome.fail(error)
        return outcome.future

    def done(finished: Handle) -> None:
        try:
            result = finished.wait()
            if not in_place:
                tensor.copy_(torch.from_numpy(result))
        except Exception as error:
            outcome.fail(error)
        else:
            outcome.succeed(tensor)

    handle.add_done_callback(done)
    return outcome.future
