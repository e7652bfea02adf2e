"""experiments.convergence: the three ways of summing bf16 gradients train the digits alike.

A short run (one seed, 80 steps) through the real switch and Gloo: every
way's curve is recorded, and the switch's curves, at 32 and at 16 bits,
follow Gloo's, which adds in bfloat16 itself (docs/performance.md,
*16-bit gradients*, has the full run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")
pytest.importorskip(
    "sklearn", reason="the digits come with scikit-learn (pip install 'p4reduce[experiments]')"
)

from experiments.convergence import METHODS, main  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_bf16_gradients_summed_three_ways_train_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--seeds", "1", "--steps", "80", "--eval-every", "40", "--out", str(tmp_path)]) == 0
    curves = {c["method"]: c for c in json.loads((tmp_path / "curves.json").read_text())}
    assert set(curves) == set(METHODS)
    gloo = curves["gloo"]
    assert gloo["steps"] == [0, 40, 80] and gloo["loss"][-1] < 0.5 * gloo["loss"][0], "it learns"
    for method in ("p4reduce-32", "p4reduce-16"):
        mine = curves[method]
        assert mine["loss"][0] == gloo["loss"][0], "the same seed, the same start"
        assert abs(mine["loss"][-1] - gloo["loss"][-1]) <= 0.05 * gloo["loss"][-1], (method, mine, gloo)
        assert abs(mine["accuracy"][-1] - gloo["accuracy"][-1]) <= 0.02, (method, mine, gloo)
    assert "steps to 95%" in capsys.readouterr().out
