"""`logical_dtype="bfloat16"`: bfloat16 travels under a bfloat16 descriptor, as its bits or widened.

That a bfloat16 rank and a float32 rank are refused as a mismatch is shown
with four ranks through the switch (tests/torch_backend); here, one rank
against a reflector: the call works, and a wrong use of the keyword is an
error that still takes the call's number, so that peers fail at once.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import Communicator, JobSpec
from hostlib import quantize as q
from hostlib.reflector import Reflector


def test_bfloat16_values_carried_as_float32_come_back_as_float32() -> None:
    with Reflector() as reflector, Communicator(JobSpec(3, 1, 8, reflector.address, 64, 0x1234), 0) as comm:
        values = np.array([1.0, -0.5, 3.0, 2.0**-8], dtype=np.float32)  # exactly representable in bfloat16
        result = comm.allreduce(values, logical_dtype="bfloat16")
        assert result.dtype == np.float32 and np.allclose(result, values, rtol=1e-6)
        calls = comm.stats().calls
        with pytest.raises(TypeError, match="or the values widened to float32, not int32"):
            comm.allreduce(np.ones(3, dtype=np.int32), logical_dtype="bfloat16")
        with pytest.raises(ValueError, match="logical_dtype must be None or 'bfloat16'"):
            comm.allreduce(values, logical_dtype="float8")  # type: ignore[arg-type]
        assert np.array_equal(comm.allreduce(np.ones(2, dtype=np.int32)), [1, 1])
        assert comm.stats().calls == calls + 3, "each refused call still took part (alone, it completes)"


def test_bfloat16_bit_patterns_come_back_as_bit_patterns_rounded_to_nearest_even() -> None:
    """torch hands its bfloat16 tensors over as uint16 views (no widening copy): the sum comes back in
    the same form, the float sums rounded through float32 to the nearest bfloat16, ties to even."""
    values = np.array([1.0, -0.5, 3.0, 2.0**-8, 0.0, 1.5], dtype=np.float32)
    bits = q.float_to_bfloat16(values)
    assert np.array_equal(q.bfloat16_to_float32(bits), values), "exactly representable in bfloat16"
    with Reflector() as reflector, Communicator(JobSpec(3, 1, 8, reflector.address, 64, 0x1234), 0) as comm:
        for wire_bits in (32, 16):
            result = comm.allreduce(bits, logical_dtype="bfloat16", wire_bits=wire_bits)
            assert result.dtype == np.uint16
            assert np.array_equal(q.bfloat16_to_float32(result), values), wire_bits
        with pytest.raises(TypeError, match="got uint16"):
            comm.allreduce(bits)  # uint16 alone is not a float
        with pytest.raises(ValueError, match="int32 sums are exact at 32 bits only"):
            comm.allreduce(np.ones(3, dtype=np.int32), wire_bits=16)
        with pytest.raises(ValueError, match="wire_bits must be 16 or 32, not 8"):
            comm.allreduce(values, wire_bits=8)  # type: ignore[arg-type]
        assert np.array_equal(comm.allreduce(np.ones(2, dtype=np.int32)), [1, 1]), "the refusals took part"
