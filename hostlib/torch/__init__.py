"""p4reduce for PyTorch: the `p4reduce` torch.distributed backend, and the older DDP communication hook.

    import hostlib.torch  # registers the backend (torch also does it itself at import: docs/torch.md)
    dist.init_process_group("p4reduce")  # with P4REDUCE_CONTROLLER=host:port in the environment

all_reduce and reduce_scatter (SUM, AVG; float32, float16, bfloat16, int32)
go through the switch; every other collective through an internal Gloo
group (docs/torch.md). torch is an optional dependency: this package
imports it, hostlib does not. Its names load on first use, so that torch's
own import, which registers the backend through this package, stays light.
"""

from importlib import import_module
from typing import Any

from hostlib.torch.registration import BACKEND, register

__all__ = ["BACKEND", "P4ReduceOptions", "P4ReduceProcessGroup", "P4ReduceState", "p4reduce_hook", "register"]

_HOMES = {
    "P4ReduceOptions": "hostlib.torch.options",
    "P4ReduceProcessGroup": "hostlib.torch.backend",
    "P4ReduceState": "hostlib.torch.hook",
    "p4reduce_hook": "hostlib.torch.hook",
}

register()


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'hostlib.torch' has no attribute {name!r}")
