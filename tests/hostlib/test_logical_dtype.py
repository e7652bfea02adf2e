"""`logical_dtype="bfloat16"`: bfloat16 values travel as float32 under a bfloat16 descriptor.

That a bfloat16 rank and a float32 rank are refused as a mismatch is shown
with four ranks through the switch (tests/torch_backend); here, one rank
against a reflector: the call works, and a wrong use of the keyword is an
error that still takes the call's number, so that peers fail at once.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import Communicator, JobSpec
from hostlib.reflector import Reflector


def test_bfloat16_values_carried_as_float32_come_back_as_float32() -> None:
    with Reflector() as reflector, Communicator(JobSpec(3, 1, 8, reflector.address, 64, 0x1234), 0) as comm:
        values = np.array([1.0, -0.5, 3.0, 2.0**-8], dtype=np.float32)  # exactly representable in bfloat16
        result = comm.allreduce(values, logical_dtype="bfloat16")
        assert result.dtype == np.float32 and np.allclose(result, values, rtol=1e-6)
        calls = comm.stats().calls
        with pytest.raises(TypeError, match="widened to float32, not INT32"):
            comm.allreduce(np.ones(3, dtype=np.int32), logical_dtype="bfloat16")
        with pytest.raises(ValueError, match="logical_dtype must be None or 'bfloat16'"):
            comm.allreduce(values, logical_dtype="float8")  # type: ignore[arg-type]
        assert np.array_equal(comm.allreduce(np.ones(2, dtype=np.int32)), [1, 1])
        assert comm.stats().calls == calls + 3, "each refused call still took part (alone, it completes)"
