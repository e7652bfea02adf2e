"""DDP with the p4reduce hook trains like DDP with Gloo: same loss curve within quantization error."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.launch import ROOT, free_port, services  # noqa: E402
from tests import torch_overflow  # noqa: E402

T = TypeVar("T")

STEPS, WORLD = 15, 2


def ddp_setup(rank: int, controller: str | None, port: int, job: str, first_ip: int):  # type: ignore[no-untyped-def]
    """A DDP model on a Gloo group, its gradients through the switch when `controller` is given; data."""
    import torch.distributed as dist

    from hostlib import Communicator
    from hostlib.torch import P4ReduceState, p4reduce_hook

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    model = torch.nn.parallel.DistributedDataParallel(net)
    comm = None
    if controller is not None:
        comm = Communicator.join(controller, job, rank, WORLD, address=(f"127.0.0.{first_ip + rank}", 0))
        model.register_comm_hook(P4ReduceState(comm), p4reduce_hook)
    generator = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(64, 16, generator=generator)
    return net, model, comm, x, x[:, :1] * 2 - x[:, 1:2]


def train(rank: int, controller: str | None, port: int, job: str) -> list[float]:
    """One DDP worker; gradients through the switch when `controller` is given, else Gloo's all-reduce."""
    import torch.distributed as dist

    _, model, comm, x, y = ddp_setup(rank, controller, port, job, 60)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if comm is not None:
        comm.close()
    dist.destroy_process_group()
    return losses


def through_switch_and_gloo(
    tmp_path: Path, rank_fn: Callable[..., T], switch_ip: str, job: str
) -> tuple[list[T], list[T]]:
    """`rank_fn(rank, controller, port, job)` on WORLD spawned ranks: through the switch, then on Gloo."""
    ctx = multiprocessing.get_context("spawn")
    with services(tmp_path, ROOT / "build", switch_ip=switch_ip, pool_size=16) as svc:
        port = free_port()
        with ctx.Pool(WORLD) as pool:
            switch = pool.starmap(rank_fn, [(r, svc.controller, port, job) for r in range(WORLD)])
    port = free_port()
    with ctx.Pool(WORLD) as pool:
        gloo = pool.starmap(rank_fn, [(r, None, port, "") for r in range(WORLD)])
    return switch, gloo


def test_ddp_through_the_switch_follows_gloo(tmp_path: Path) -> None:
    switch, gloo = through_switch_and_gloo(tmp_path, train, "127.0.3.1", "ddp")
    for rank in range(WORLD):
        assert switch[rank][-1] < switch[rank][0] * 0.8, "training through the switch did not learn"
        for ours, theirs in zip(switch[rank], gloo[rank]):
            assert ours == pytest.approx(theirs, rel=1e-4, abs=1e-6)


def train_with_scaler(
    rank: int, controller: str | None, port: int, job: str
) -> tuple[list[float], list[float]]:
    """GradScaler training where rank 1's gradients overflow at one step: (scales, losses) per step."""
    import torch.distributed as dist

    net, model, comm, x, y = ddp_setup(rank, controller, port, job, 70)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    result = torch_overflow.train_with_scaler(net, model, optimizer, x, y, rank)
    if comm is not None:
        comm.close()
    dist.destroy_process_group()
    return result


def test_grad_scaler_skips_an_overflowing_step_on_every_rank_as_with_gloo(tmp_path: Path) -> None:
    switch, gloo = through_switch_and_gloo(tmp_path, train_with_scaler, "127.0.3.2", "amp")
    torch_overflow.check_against_gloo(switch, gloo)


def test_a_hook_error_reaches_backward_as_itself() -> None:
    """DDP meets the hook's future in C++: its error must arrive as an error, not as a value to cast."""
    import torch.distributed as dist

    from hostlib.torch import P4ReduceState, p4reduce_hook

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1).double())
        model.register_comm_hook(P4ReduceState(comm=None), p4reduce_hook)  # type: ignore[arg-type]
        with pytest.raises(RuntimeError) as raised:
            model(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
        assert "TypeError: p4reduce_hook handles float32 and float16, not torch.float64" in str(raised.value)
        assert "Unable to cast" not in str(raised.value)
    finally:
        dist.destroy_process_group()
