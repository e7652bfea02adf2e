"""Which backend does a group's CUDA collectives that the switch does not (broadcast, all_gather, MAX, ...).

NCCL when every rank has a GPU of its own: it is what a CUDA job would use
without p4reduce. NCCL refuses two ranks on one GPU ("Duplicate GPU
detected"), and the ranks of a one-GPU machine share it, so there Gloo's
CUDA support does them (Gloo stages CUDA tensors through host memory
itself). The ranks agree through torch's store: each writes its GPU's UUID
(or nothing, without CUDA), all read all, so every rank makes the same
choice, and rank 0 logs it with the reason.

A rank's GPU is torch.cuda.current_device() when the group is made: set it
(torch.cuda.set_device(local_rank)) before init_process_group, as NCCL wants.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Literal

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

__all__ = ["choose", "this_gpu", "cuda_backend"]

log = logging.getLogger("hostlib.torch")

Choice = Literal["nccl", "gloo", "none"]


def choose(gpus: Sequence[str], nccl_available: bool) -> tuple[Choice, str]:
    """(the backend for CUDA collectives, why) from each rank's GPU UUID ('' for a rank without CUDA)."""
    if not any(gpus):
        return "none", "no rank has a CUDA device"
    if without := [rank for rank, gpu in enumerate(gpus) if not gpu]:
        return "gloo", f"rank(s) {', '.join(map(str, without))} have no CUDA device, so NCCL cannot run"
    if not nccl_available:
        return "gloo", "this torch is built without NCCL"
    first: dict[str, int] = {}
    for rank, gpu in enumerate(gpus):
        if gpu in first:
            return "gloo", f"ranks {first[gpu]} and {rank} share GPU {gpu}, and NCCL needs one GPU per rank"
        first[gpu] = rank
    return "nccl", f"each of the {len(gpus)} ranks has a GPU of its own"


def this_gpu() -> str:
    """The UUID of this process's current CUDA device, '' without one."""
    if not torch.cuda.is_available():
        return ""
    return str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)


def cuda_backend(
    store: dist.Store, rank: int, size: int, timeout: timedelta, group_id: str, gloo: ProcessGroupGloo
) -> tuple[Choice, dist.Backend | None]:
    """The group's backend for CUDA tensors (the Gloo group itself, a new NCCL group, or None)."""
    prefix = f"p4reduce/gpu/{group_id}/"
    store.set(f"{prefix}{rank}", this_gpu() or "-")
    keys = [f"{prefix}{r}" for r in range(size)]
    store.wait(keys, timeout)
    gpus = [value if value != "-" else "" for value in (store.get(key).decode() for key in keys)]
    choice, why = choose(gpus, dist.is_nccl_available())
    if choice != "none" and rank == 0:
        log.warning("p4reduce: CUDA collectives that are not sums go through %s: %s", choice.upper(), why)
    if choice == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return choice, dist.ProcessGroupNCCL(PrefixStore("p4reduce-nccl", store), rank, size, options)
    return choice, gloo if choice == "gloo" else None
