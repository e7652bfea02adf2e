"""The choice of backend for a group's CUDA collectives that the switch does not compute, and its log line."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import ProcessGroupGloo  # noqa: E402

from hostlib.launch import free_port  # noqa: E402
from hostlib.torch.cuda_backend import choose, cuda_backend  # noqa: E402

A, B, C = "GPU-0a", "GPU-1b", "GPU-2c"


def test_nccl_when_every_rank_has_a_gpu_of_its_own() -> None:
    assert choose([A, B, C], nccl_available=True) == ("nccl", "each of the 3 ranks has a GPU of its own")


def test_gloo_when_ranks_share_a_gpu_naming_the_first_pair() -> None:
    choice, why = choose([A, B, A, A], nccl_available=True)
    assert choice == "gloo" and "ranks 0 and 2 share GPU GPU-0a" in why


def test_gloo_without_nccl_and_when_some_rank_has_no_gpu() -> None:
    assert choose([A, B], nccl_available=False) == ("gloo", "this torch is built without NCCL")
    choice, why = choose([A, "", B, ""], nccl_available=True)
    assert choice == "gloo" and "rank(s) 1, 3 have no CUDA device" in why


def test_nothing_to_choose_when_no_rank_has_cuda() -> None:
    assert choose(["", ""], nccl_available=True)[0] == "none"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the group would choose for it")
def test_a_group_without_gpus_registers_no_cuda_backend_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True, timeout=timedelta(seconds=10))
    gloo = ProcessGroupGloo(store, 0, 1, timedelta(seconds=10))
    with caplog.at_level(logging.INFO, logger="hostlib.torch"):
        assert cuda_backend(store, 0, 1, timedelta(seconds=10), "g", gloo) == ("none", None)
    assert not caplog.records
    gloo.shutdown()


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device here: scripts/gpu_check.sh runs this"
)
def test_one_gpu_shared_by_two_ranks_goes_to_gloo_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    store = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True, timeout=timedelta(seconds=10))
    gpu = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    store.set("p4reduce/gpu/g/1", gpu)  # rank 1, on the same GPU
    gloo = object()  # the group's own Gloo backend: returned as it is
    with caplog.at_level(logging.INFO, logger="hostlib.torch"):
        choice, backend = cuda_backend(store, 0, 2, timedelta(seconds=10), "g", gloo)  # type: ignore[arg-type]
    assert (choice, backend) == ("gloo", gloo)
    assert [r.getMessage() for r in caplog.records] == [
        f"p4reduce: CUDA collectives that are not sums go through GLOO: ranks 0 and 1 share GPU {gpu}, "
        "and NCCL needs one GPU per rank"
    ]


def test_the_backend_is_registered_for_cuda_as_well_as_cpu() -> None:
    import hostlib.torch  # noqa: F401  # registers (torch's entry point may have already)

    assert dist.Backend.backend_capability["p4reduce"] == ["cpu", "cuda"]
