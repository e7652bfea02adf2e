"""The devices a test runs on: CPU always, CUDA where torch sees a GPU (skipped with the reason otherwise)."""

from __future__ import annotations

import pytest
import torch

NO_CUDA = "no CUDA device here (torch.cuda.is_available() is false): scripts/gpu_check.sh runs these on a GPU"
NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)]
