"""torchrun's elastic restart through the switch: a rank SIGKILLed mid-training, the group restarted.

`torchrun --nproc-per-node 4 --max-restarts 1 examples/train_elastic.py`: rank 2 kills itself at
step 12 of the first attempt; the controller names it and reclaims the job's slots, torchrun restarts
every worker, the new group joins a new job and resumes from the step-10 checkpoint. The final losses
equal an uninterrupted run's exactly (the switch sums integers: the same inputs give the same bits).
The same crash on Gloo gives docs/reliability.md its comparison (measured, not asserted).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.launch import ROOT, services  # noqa: E402
from hostlib.torch.launch import torchrun_command  # noqa: E402

pytestmark = pytest.mark.slow

WORLD, STEPS, DIE_AT, DIE_RANK, EVERY = 4, 16, 12, 2, 5


def train(tmp: Path, name: str, env: dict[str, str], *extra: str, crash: bool = True) -> list[dict[str, Any]]:
    """One torchrun of the example; its events (JSON lines), after checking every rank finished."""
    crashing = [f"--die-at-step={DIE_AT}", f"--die-rank={DIE_RANK}"] if crash else []
    arguments = [
        f"--nproc-per-node={WORLD}",
        "--max-restarts=1",
        str(ROOT / "examples" / "train_elastic.py"),
        f"--steps={STEPS}",
        "--width=64",
        f"--checkpoint-every={EVERY}",
        f"--checkpoint={tmp / name}.pt",
        f"--events={tmp / name}.jsonl",
        f"--json={tmp / name}",
        *crashing,
        *extra,
    ]
    done = subprocess.run(
        torchrun_command(arguments),
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return [json.loads(line) for line in (tmp / f"{name}.jsonl").read_text().splitlines()]


def final_losses(tmp: Path, name: str) -> list[float]:
    return [json.loads((tmp / f"{name}-{rank}.json").read_text())["losses"][-1] for rank in range(WORLD)]


def restart_seconds(events: list[dict[str, Any]]) -> float:
    """From the kill to the end of the first step after the restart."""
    killed = next(e["t"] for e in events if "killed" in e)
    return min(e["t"] for e in events if e["attempt"] == 1 and "step" in e) - killed


def test_a_rank_killed_mid_training_restarts_through_the_switch_and_ends_where_an_unbroken_run_does(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    with services(logs, ROOT / "build", switch_ip="127.0.40.4", pool_size=32) as svc:
        env = {"P4REDUCE_CONTROLLER": svc.controller, "P4REDUCE_STRICT": "1"}  # no silent Gloo fallback
        crashed = train(tmp_path, "p4", env)
        train(tmp_path, "whole", env, crash=False)
    log = (logs / "controller.log").read_text()

    assert [e["rank"] for e in crashed if "killed" in e] == [DIE_RANK]
    resumed = {e["rank"]: e["resumed_from"] for e in crashed if e["attempt"] == 1 and "resumed_from" in e}
    assert resumed == dict.fromkeys(range(WORLD), EVERY * (DIE_AT // EVERY)), "every rank resumes at step 10"
    assert not any(e["attempt"] == 1 and "raised" in e for e in crashed), "the restarted group trains on"
    # Two jobs for the crashed run: the first reclaimed, naming the dead rank; the second a new one.
    created = re.findall(r"created job '(torch-[^']+)': id (\d+)", log)
    assert len(created) == 3, log  # crashed run: 2 attempts; the uninterrupted run: 1
    first, second = created[0][0], created[1][0]
    assert first != second
    assert re.search(
        rf"job '{re.escape(first)}' was reclaimed: rank {DIE_RANK}'s connection to the controller closed "
        r"[0-9.]+ s ago .*freed id \d+ and slots",
        log,
    ), log
    ended = r"ended: (every rank has left|rank \d left and so has every other rank)"
    assert re.search(rf"job '{re.escape(second)}' {ended}", log), log
    # Deterministic float training: the switch's integer sums give the very bits of the unbroken run.
    assert final_losses(tmp_path, "p4") == final_losses(tmp_path, "whole")

    gloo = train(tmp_path, "gloo", {}, "--backend=gloo")
    p4_restart, gloo_restart = restart_seconds(crashed), restart_seconds(gloo)
    print(f"kill to first step after the restart: p4reduce {p4_restart:.2f} s, Gloo {gloo_restart:.2f} s")
    out = os.environ.get("P4REDUCE_RELIABILITY_OUT")
    if out:
        with open(out, "a") as sink:
            row = {"section": "torchrun-restart", "p4reduce_s": p4_restart, "gloo_s": gloo_restart}
            sink.write(json.dumps({**row, "load": os.getloadavg()[0]}) + "\n")
