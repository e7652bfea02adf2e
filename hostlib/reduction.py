"""What one all-reduce sends, per dtype: the UsePlans the packet engine carries out.

int32 travels as it is and sums exactly (wrapping like the switch's adder).
float32/float16 travel as block floating point (hostlib.quantize): each
slot's first use in a call is a priming packet whose only job is to agree
the exponent of the slot's first chunk; every later use carries a chunk
scaled with the exponent the previous result agreed, and announces the
local exponent of the next chunk on that slot.
"""

from __future__ import annotations

import numpy as np

from contracts.protocol import EXP_BIAS, EXP_NONE, VALUES_PER_PACKET
from hostlib import quantize as q

K = VALUES_PER_PACKET
_ZEROS = bytes(4 * K)


class IntPlan:
    """int32: use u carries chunk u."""

    def __init__(self, flat: np.ndarray, pool_size: int) -> None:
        self.size = flat.size
        self.wire = q.as_chunks(flat.astype(">i4", copy=False))
        self.uses = len(self.wire)
        self.slots = min(pool_size, self.uses)
        self.sums = np.zeros_like(self.wire)
        self._send = memoryview(self.wire).cast("B")
        self._receive = memoryview(self.sums).cast("B")

    def payload(self, use: int, agreed_exp: int) -> tuple[memoryview, int]:
        return self._send[use * 4 * K : (use + 1) * 4 * K], EXP_NONE

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        self._receive[use * 4 * K : (use + 1) * 4 * K] = values

    def result(self) -> np.ndarray:
        return self.sums.reshape(-1)[: self.size].astype(np.int32)


class FloatPlan:
    """float32/float16 through block floating point; uses 0..W-1 prime the slots."""

    def __init__(self, flat: np.ndarray, pool_size: int, world_size: int) -> None:
        self.size = flat.size
        self.world_size = world_size
        self.chunks = q.as_chunks(flat.astype(np.float32, copy=False))
        self.local = q.local_exponents(self.chunks) + EXP_BIAS  # wire exponents
        n = len(self.chunks)
        self.slots = min(pool_size, n)
        self.uses = n + self.slots if n else 0
        self.agreed = np.zeros(n, dtype=np.int64)  # wire exponent each chunk was scaled with
        self.sums = np.zeros((n, K), dtype=">i4")
        self._receive = memoryview(self.sums).cast("B")

    def _announce(self, chunk: int) -> int:
        """The wire exponent of `chunk`, announced one use ahead (0 when the slot has no such chunk)."""
        return int(self.local[chunk]) if chunk < len(self.chunks) else EXP_NONE

    def payload(self, use: int, agreed_exp: int) -> tuple[bytes, int]:
        if use < self.slots:
            return _ZEROS, self._announce(use)  # priming: agree the exponent of chunk `use`
        chunk = use - self.slots
        self.agreed[chunk] = agreed_exp
        values = q.quantize(self.chunks[chunk], agreed_exp - EXP_BIAS, self.world_size)
        return values.tobytes(), self._announce(chunk + self.slots)

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        if use >= self.slots:
            chunk = use - self.slots
            self._receive[chunk * 4 * K : (chunk + 1) * 4 * K] = values

    def result(self) -> np.ndarray:
        sums = q.dequantize(self.sums, self.agreed - EXP_BIAS, self.world_size)
        return sums.reshape(-1)[: self.size]

    def error_bound(self) -> np.ndarray:
        """Per element, the largest absolute error the quantization allows (docs/protocol.md)."""
        bounds = np.array([q.error_bound(int(e) - EXP_BIAS, self.world_size) for e in self.agreed])
        return np.repeat(bounds, K)[: self.size]


def plan_for(flat: np.ndarray, pool_size: int, world_size: int) -> IntPlan | FloatPlan:
    if flat.dtype == np.int32:
        return IntPlan(flat, pool_size)
    return FloatPlan(flat, pool_size, world_size)
