"""What the reliability suite shares: the long-variant switch, figures for docs/reliability.md, workers.

Fast variants run in `make test`; long ones (more frames, more loss rates,
bigger tensors) only with P4REDUCE_LONG_TESTS=1, as `make reliability`
sets it. With P4REDUCE_RELIABILITY_OUT=FILE every test appends its figures
to FILE as JSON lines (`make reliability` writes results/reliability.jsonl,
from which docs/reliability.md's tables are copied).
"""

from __future__ import annotations

import json
import os

import pytest

LONG = os.environ.get("P4REDUCE_LONG_TESTS") == "1"
long_variant = pytest.mark.skipif(not LONG, reason="a long variant: `make reliability` runs it")


def scale(fast: int, long: int) -> int:
    """How much of something this run does: the fast variant's amount or the long one's."""
    return long if LONG else fast


def record(section: str, **figures: object) -> None:
    """Append one row of figures for docs/reliability.md (when P4REDUCE_RELIABILITY_OUT names a file)."""
    out = os.environ.get("P4REDUCE_RELIABILITY_OUT")
    if out:
        with open(out, "a") as sink:
            sink.write(json.dumps({"section": section, "long": LONG, **figures}) + "\n")
