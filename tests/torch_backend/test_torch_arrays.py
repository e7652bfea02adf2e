"""A tensor and the numpy array the host library takes share memory both ways, bfloat16 included.

bfloat16, which numpy lacks, travels as its bit patterns: host_array gives them as uint16, and
host_tensor turns such an array (or an int16 one) back into a bfloat16 tensor over the same memory.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.torch.arrays import host_array, host_tensor  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_a_tensor_goes_to_numpy_and_back_over_the_same_memory(dtype: torch.dtype) -> None:
    tensor = torch.tensor([1.5, -2.0, 0.25, 3.0]).to(dtype)
    array = host_array(tensor)
    name = "bfloat16" if dtype == torch.bfloat16 else str(array.dtype)
    back = host_tensor(array, name)
    assert back.dtype == dtype and torch.equal(back, tensor)
    back[0] = 7
    assert tensor[0].item() == 7  # one memory, not a copy


@pytest.mark.parametrize("integers", [np.uint16, np.int16])
def test_bfloat16_bit_patterns_in_a_16_bit_integer_array_become_that_tensor(integers: type) -> None:
    bits = np.array([0x3FC0, 0xC000], dtype=np.uint16).view(integers)  # 1.5 and -2.0 in bfloat16
    assert host_tensor(bits, "bfloat16").tolist() == [1.5, -2.0]
    assert host_array(torch.tensor([1.5, -2.0], dtype=torch.bfloat16)).tolist() == [0x3FC0, 0xC000]
