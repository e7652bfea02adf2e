"""p4reduce host library: all-reduce tensors through a P4 switch.

    from hostlib import Communicator
    with Communicator.join(controller="127.0.0.1:50051", job="train", rank=r, world_size=4,
                           address=("127.0.0.2", 0)) as comm:
        total = comm.allreduce(gradient)        # element-wise sum over the 4 workers

See docs/hostlib.md; PyTorch's DDP hook is in hostlib.torch.
"""

from hostlib.calls import (
    AllreduceAborted,
    AllreduceError,
    AllreduceMismatch,
    AllreduceTimeout,
    NonFiniteError,
)
from hostlib.communicator import Communicator, Handle, JobSpec, JoinError
from hostlib.engine import EngineStats

__all__ = [
    "AllreduceAborted",
    "AllreduceError",
    "AllreduceMismatch",
    "AllreduceTimeout",
    "Communicator",
    "EngineStats",
    "Handle",
    "JobSpec",
    "JoinError",
    "NonFiniteError",
]
