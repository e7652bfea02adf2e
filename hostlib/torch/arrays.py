"""How a host tensor is handed to the host library: a numpy array over its memory, and the call's keywords.

Both the CPU path (backend.py) and the staged device path (staging.py) go
through here, so that a bfloat16 tensor travels the same way on both.
"""

from __future__ import annotations

import numpy as np
import torch

HALF_DTYPES = (torch.float16, torch.bfloat16)  # what the group's wire_bits applies to


def host_array(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as numpy, sharing its memory; bfloat16, which numpy lacks, as its bit patterns in uint16
    (an int16 buffer of them too), as the communicator takes it under logical_dtype='bfloat16'."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    array = tensor.numpy()
    return array.view(np.uint16) if array.dtype == np.int16 else array


def host_tensor(array: np.ndarray, logical_dtype: str) -> torch.Tensor:
    """host_array's inverse: a tensor over `array`'s memory, of `logical_dtype` (numpy's names, and
    "bfloat16" for its bit patterns in a 16-bit integer array)."""
    tensor = torch.from_numpy(array)
    if logical_dtype == "bfloat16":
        tensor = tensor.view(torch.int16).view(torch.bfloat16)
    return tensor


def call_keywords(dtype: torch.dtype, wire_bits: int) -> dict[str, object]:
    """Communicator.allreduce's keywords for a tensor of `dtype`: bfloat16's name, and the group's
    `wire_bits` for float16 and bfloat16 (float32 and int32 always travel at 32)."""
    return {
        "logical_dtype": "bfloat16" if dtype == torch.bfloat16 else None,
        "wire_bits": wire_bits if dtype in HALF_DTYPES else 32,
    }
