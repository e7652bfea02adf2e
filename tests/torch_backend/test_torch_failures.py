"""DDP on the p4reduce backend when things go wrong: an overflowing step, a rank that dies.

GradScaler must skip exactly the steps it skips on Gloo (protocol v2's
non-finite blocks reach every rank); a rank killed in the middle of a step
must make the others raise torch's distributed error, with p4reduce's
reason inside, instead of waiting forever.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.launch import ROOT, services  # noqa: E402
from tests import torch_overflow  # noqa: E402
from tests.torch_backend.ranks import init, run_ranks, values  # noqa: E402

WORLD, STEPS, KILLED_STEP = 2, 8, 2
PROGRESS_TIMEOUT = 3.0


def ddp(backend: str, rank: int, world: int, port: int, controller: str) -> tuple[Any, Any, Any, Any]:
    """A DDP model on the backend (no hook), its optimizer, and this rank's data."""
    init(backend, rank, world, port, controller=controller, progress_timeout=PROGRESS_TIMEOUT)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    model = torch.nn.parallel.DistributedDataParallel(net)
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(100 + rank))
    return net, model, torch.optim.SGD(model.parameters(), lr=0.05), (x, x[:, :1] * 2 - x[:, 1:2])


def train_with_scaler(rank: int, world: int, port: int, backend: str, controller: str) -> Any:
    """GradScaler training where rank 1's gradients overflow at one step: (scales, losses) per step."""
    import torch.distributed as dist

    net, model, optimizer, (x, y) = ddp(backend, rank, world, port, controller)
    result = torch_overflow.train_with_scaler(net, model, optimizer, x, y, rank)
    dist.destroy_process_group()
    return result


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Any:
    logs: Path = tmp_path_factory.mktemp("torch-failures")
    with services(logs, ROOT / "build", switch_ip="127.0.40.4", pool_size=16) as svc:
        yield svc.controller


def test_grad_scaler_skips_the_same_steps_as_with_gloo(controller: str) -> None:
    ours = values(run_ranks(train_with_scaler, WORLD, "p4reduce", controller), WORLD)
    gloo = values(run_ranks(train_with_scaler, WORLD, "gloo", controller), WORLD)
    torch_overflow.check_against_gloo(ours, gloo)


def train_until_killed(rank: int, world: int, port: int, controller: str) -> str:
    """Rank 1 is killed (SIGKILL) during backward at one step; what the others see of it."""
    net, model, optimizer, (x, y) = ddp("p4reduce", rank, world, port, controller)
    step = 0

    def die(grad: torch.Tensor) -> torch.Tensor:
        if rank == 1 and step == KILLED_STEP:
            os.kill(os.getpid(), signal.SIGKILL)
        return grad

    net[0].weight.register_hook(die)  # the first layer's gradient comes last: other buckets are in flight
    started = 0.0
    try:
        for step in range(STEPS):  # noqa: B007 (read by the hook)
            optimizer.zero_grad()
            started = time.monotonic()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    except Exception as error:
        return f"after {time.monotonic() - started:.1f} s at step {step}: {type(error).__name__}: {error}"
    return "finished without noticing"


def test_a_rank_killed_mid_step_makes_the_others_fail_clearly_instead_of_hanging(controller: str) -> None:
    answers = run_ranks(train_until_killed, WORLD, controller, timeout=120)
    assert 1 not in answers, "rank 1 was killed"
    ok, seen = answers[0]
    assert ok, seen
    assert f"at step {KILLED_STEP}" in seen, seen
    seconds = float(seen.split()[1])
    assert seconds < PROGRESS_TIMEOUT + 10, f"the error came late: {seen}"
    # torch's distributed error, p4reduce's reason inside (a timeout, or the controller's word of the peer).
    # DDP's reducer meets it in C++ and re-raises it as the RuntimeError it derives from, message intact.
    assert seen.split(": ")[1].split()[-1] in ("RuntimeError", "DistBackendError"), seen
    assert "DistBackendError: p4reduce all_reduce of" in seen, seen
    # The controller names the dead rank 0.5 s after its stream closed, before the 3 s progress timeout.
    assert "AllreduceAborted: job 'torch-" in seen, seen
    assert "rank 1's connection to the controller closed" in seen, seen
