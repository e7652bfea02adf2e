"""scripts/gpu_check.sh, as far as it runs without a GPU: its dry run, and its refusal to measure nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hostlib.launch import ROOT  # noqa: E402

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def gpu_check(*arguments: str) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run(
        ["bash", str(SCRIPT), *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_dry_run_checks_what_needs_no_gpu_and_names_every_gpu_step(tmp_path: Path) -> None:
    done = gpu_check("--dry-run", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    would = [line for line in done.stdout.splitlines() if line.startswith("==> would run")]
    assert any("test_torch_cuda.py" in line for line in would)
    assert any("bench_device_copy.py --device cuda" in line for line in would)
    assert any("--example ddp" in line for line in would)
    assert any("--example fsdp --bf16" in line for line in would)
    figures = json.loads((tmp_path / "device_copy.json").read_text())  # the copy benchmark, on CPU
    assert figures["device"] == "cpu" and figures["copy"]["ratio_to_copy"] == 1.0
    summary = (tmp_path / "summary.txt").read_text()
    assert "DRY RUN" in summary and "DDP: not measured" in summary
    assert "torch" in (tmp_path / "env.txt").read_text()
    assert len(list(tmp_path.iterdir())) <= 8, "the device tool brings back at most 8 files"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the script would measure")
def test_without_a_gpu_it_exits_saying_so_and_measures_nothing(tmp_path: Path) -> None:
    done = gpu_check(str(tmp_path))
    assert done.returncode == 1
    assert "error: no usable GPU (torch.cuda.is_available() is false" in done.stdout
    assert not (tmp_path / "summary.txt").exists()


def test_a_missing_output_folder_argument_prints_the_usage() -> None:
    done = gpu_check()
    assert done.returncode == 2 and "--dry-run OUT" in done.stderr
