"""Mixed-precision training in which one rank's gradients overflow at one step (DDP hook and backend tests).

torch.amp's GradScaler must then skip that step on every rank, halve its
scale and go on, exactly as it does when Gloo sums the gradients.
"""

from __future__ import annotations

from typing import Any

import torch

STEPS, POISONED_STEP, POISONED_RANK = 8, 3, 1


def train_with_scaler(net: Any, model: Any, optimizer: Any, x: Any, y: Any, rank: int) -> Any:
    """(scales, losses) per step; `net[0].weight`'s gradient is infinite on one rank at one step."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1000)
    step = 0

    def overflow(grad: torch.Tensor) -> torch.Tensor:
        return grad * float("inf") if rank == POISONED_RANK and step == POISONED_STEP else grad

    net[0].weight.register_hook(overflow)
    scales, losses = [], []
    for step in range(STEPS):  # noqa: B007 (read by the hook)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


def check_against_gloo(ours: list[Any], gloo: list[Any]) -> None:
    """Every rank skipped the poisoned step, as with Gloo, and training went on."""
    import pytest

    for rank, (scales, losses) in enumerate(ours):
        assert scales[POISONED_STEP] == scales[POISONED_STEP - 1] / 2, scales
        assert scales == gloo[rank][0], "the same steps skipped as with Gloo"
        assert losses[-1] < losses[0], "training continued after the skipped step"
        assert losses == pytest.approx(gloo[rank][1], rel=1e-4, abs=1e-6)
