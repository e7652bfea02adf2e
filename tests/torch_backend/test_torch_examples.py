"""The training examples under torchrun: on p4reduce they train as on Gloo, and the switch saw every sum.

DDP runs with 4 ranks through the one-command launcher (its own switch and
controller); FSDP2 with 2 ranks, float32 and bfloat16, against a switch and
controller of the test's. Each run writes every rank's losses and the
switch's proof to JSON (the examples' --json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.launch import ROOT, services  # noqa: E402
from hostlib.torch.launch import split_arguments, torchrun_command  # noqa: E402

EXAMPLES = ROOT / "examples"
STEPS = 12


TORCH_EXIT_ABORT = "terminate called without an active exception"


def run(command: list[str], prefix: Path, world: int, env: dict[str, str] | None = None) -> str:
    """Run an example to its end: every rank wrote its record (docs/torch.md's Limitations: torch 2.13
    with Gloo may abort at interpreter exit, after the training, which is not the example's failure)."""
    done = subprocess.run(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )
    finished = all(Path(f"{prefix}-{rank}.json").exists() for rank in range(world))
    aborted_at_exit = finished and TORCH_EXIT_ABORT in done.stderr + done.stdout
    assert done.returncode == 0 or aborted_at_exit, (
        f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def records(prefix: Path, world: int) -> list[dict[str, Any]]:
    return [json.loads(Path(f"{prefix}-{rank}.json").read_text()) for rank in range(world)]


def example(world: int, script: str, *arguments: str) -> list[str]:
    """torchrun's arguments for an example."""
    return [f"--nproc-per-node={world}", str(EXAMPLES / script), *arguments]


def torchrun(world: int, script: str, *arguments: str) -> list[str]:
    return torchrun_command(example(world, script, *arguments))


def test_ddp_example_trains_like_gloo_and_every_bucket_crosses_the_switch(tmp_path: Path) -> None:
    world = 4
    launcher = [sys.executable, "-m", "hostlib.torch.launch", "--switch-ip=127.0.40.2", f"--logs={tmp_path}"]
    ddp = example(world, "train_ddp.py", f"--steps={STEPS}", f"--json={tmp_path}/p4")
    printed = run([*launcher, *ddp], tmp_path / "p4", world)
    gloo_run = torchrun(
        world, "train_ddp.py", "--backend=gloo", f"--steps={STEPS}", f"--json={tmp_path}/gloo"
    )
    run(gloo_run, tmp_path / "gloo", world)
    ours, gloo = records(tmp_path / "p4", world), records(tmp_path / "gloo", world)
    assert "every use crossed the switch" in printed and "loss (rank 0)" in printed
    for rank in range(world):
        assert ours[rank]["losses"] == pytest.approx(gloo[rank]["losses"], rel=1e-4, abs=1e-7)
        assert ours[rank]["losses"][-1] < ours[rank]["losses"][0] * 0.5, "it learns"
        proof = ours[rank]["switch"]
        assert proof["consistent"], proof
        # Each bucket DDP reduced is one all-reduce through the switch; none went to Gloo.
        assert proof["collectives"] == {"switch:all_reduce": ours[rank]["buckets"]}
        assert ours[rank]["buckets"] >= 2 * STEPS - 1, "several buckets per step (after the first)"


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with services(
        tmp_path_factory.mktemp("fsdp"), ROOT / "build", switch_ip="127.0.40.3", pool_size=32
    ) as svc:
        yield svc.controller


@pytest.mark.parametrize("precision", [[], ["--bf16"]], ids=["float32", "bfloat16"])
def test_fsdp2_example_trains_like_gloo_with_reduce_scatter_through_the_switch(
    tmp_path: Path, controller: str, precision: list[str]
) -> None:
    world = 2
    common = [f"--steps={STEPS}", *precision]
    ours_run = torchrun(world, "train_fsdp.py", *common, f"--json={tmp_path}/p4")
    run(ours_run, tmp_path / "p4", world, {"P4REDUCE_CONTROLLER": controller})
    gloo_run = torchrun(world, "train_fsdp.py", "--backend=gloo", *common, f"--json={tmp_path}/gloo")
    run(gloo_run, tmp_path / "gloo", world)
    ours, gloo = records(tmp_path / "p4", world), records(tmp_path / "gloo", world)
    # bfloat16 reductions: Gloo rounds to bfloat16 at every addition, the switch once: within bfloat16's
    # step (2^-8) of each other, the loss curves agree to well within 1%.
    tolerance = 1e-2 if precision else 1e-4
    for rank in range(world):
        assert ours[rank]["losses"] == pytest.approx(gloo[rank]["losses"], rel=tolerance, abs=1e-6)
        proof = ours[rank]["switch"]
        assert proof["consistent"], proof
        assert proof["collectives"] == {"switch:reduce_scatter": 3 * STEPS}, "3 FSDP units, one each per step"


def test_the_launcher_keeps_its_own_options_and_hands_the_rest_to_torchrun() -> None:
    own, rest = split_arguments(
        ["--switch-ip", "127.0.0.9", "--logs=x", "--nproc-per-node", "2", "t.py", "--logs"]
    )
    assert own == ["--switch-ip", "127.0.0.9", "--logs=x"]
    assert rest == ["--nproc-per-node", "2", "t.py", "--logs"]
    assert any(a.startswith("--master-port=") for a in torchrun_command(["t.py"]))
    assert not any(a.startswith("--master-port=") for a in torchrun_command(["--standalone", "t.py"]))


@pytest.mark.parametrize("script", ["train_ddp.py", "train_fsdp.py"])
def test_device_cuda_without_a_gpu_is_a_clear_error_before_any_process_group(script: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: scripts/gpu_check.sh runs the examples on it")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--device=cuda"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "--device cuda: torch.cuda.is_available() is false" in done.stderr, done.stderr[-2000:]
    assert "run with --device cpu" in done.stderr
