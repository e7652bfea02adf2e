"""What one call sends and where its results go, per dtype: the plans the packet engine carries out.

A plan knows `uses` (how many packets the call takes) for the `width` W
(slots) the engine gives it, what each use carries (`payload`) and what to
do with each result (`deliver`); `result()` assembles the sum.

int32 travels as it is and sums exactly (wrapping like the switch's adder).
float32/float16/bfloat16 travel as block floating point (hostlib.quantize).
A call's first M uses are its priming: their values carry, one byte per
rank, the local exponents of the call's first W chunks (one per slot), so
that the switch's sum hands every rank every rank's exponent and each takes
the maximum. Every later use carries a chunk scaled with its agreed
exponent: for the first W chunks the priming's, for the others the one the
previous result on the same slot agreed. Each announces the local exponent
of the next chunk on its slot (or 255 when that chunk holds NaN/Inf, so
that every rank sends the non-finite codes for it).
"""

from __future__ import annotations

import numpy as np

from contracts.protocol import EXP_NONE, EXP_NONFINITE
from hostlib import quantize as q
from hostlib.calls import Descriptor, NonFinite, NonFiniteError, Op


def priming_uses(width: int, world_size: int, k: int) -> int:
    """M: the priming uses of a float call on W slots, each of 4K bytes, one byte per rank per slot. M = 1
    up to W * N = 4K (K = 1024: 128 slots of 32 ranks), so priming no longer grows with the window (it
    was a DATA per slot, and W was held to a slot per 32 chunks to keep that cost down)."""
    return -(-width * world_size // (4 * k))


class IntPlan:
    """int32: use u carries chunk u."""

    def __init__(self, flat: np.ndarray, k: int, world_size: int, op: Op) -> None:
        self.size, self.k, self.world_size, self.op = flat.size, k, world_size, op
        self.wire = q.as_chunks(flat.astype(">i4", copy=False), k)
        self.uses = len(self.wire)
        self.sums = np.zeros_like(self.wire)
        self._send = memoryview(self.wire).cast("B")
        self._receive = memoryview(self.sums).cast("B")
        self.priming = 0

    def width(self, slots: int) -> int:
        return min(slots, self.uses)

    def start(self, width: int, rank: int) -> None:
        """The engine's choice of W and its rank; int32 needs neither."""

    def payload(self, use: int, agreed_exp: int) -> tuple[memoryview, int]:
        return self._send[use * 4 * self.k : (use + 1) * 4 * self.k], EXP_NONE

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        self._receive[use * 4 * self.k : (use + 1) * 4 * self.k] = values

    def result(self) -> np.ndarray:
        sums = self.sums.reshape(-1)[: self.size].astype(np.int32)
        if self.op == Op.AVG:  # truncated towards zero, as NCCL
            return (np.trunc(sums.astype(np.float64) / self.world_size)).astype(np.int32)
        return sums


class FloatPlan:
    """float32/float16/bfloat16 through block floating point; uses 0..M-1 prime the call's first W chunks.

    At 16 bits (`bits`) a chunk is 2K values, two per 32-bit field; the engine sees K words either way.
    bfloat16 comes as its uint16 bit patterns."""

    def __init__(
        self, flat: np.ndarray, k: int, world_size: int, op: Op, nonfinite: NonFinite, bits: int = 32
    ) -> None:
        self.size, self.k, self.world_size, self.op, self.nonfinite = flat.size, k, world_size, op, nonfinite
        self.bits, self.block = bits, k * q.lanes(bits)  # elements per chunk
        if flat.dtype == np.uint16:
            flat = q.bfloat16_to_float32(flat)
        self.chunks = q.as_chunks(flat.astype(np.float32, copy=False), self.block)
        self.local = q.wire_exponents(self.chunks)
        self.count = len(self.chunks)
        self.slots = 0
        self.priming = 0
        self.uses = 0
        self.agreed = np.zeros(self.count, dtype=np.int64)  # wire exponent each chunk was sent with
        self.sums = np.zeros((self.count, k), dtype=">i4")
        self._receive = memoryview(self.sums).cast("B")
        self._table = bytearray()  # the priming's sums: byte c * N + r is rank r's exponent of chunk c

    def width(self, slots: int) -> int:
        return min(slots, self.count)

    def start(self, width: int, rank: int) -> None:
        self.slots = width
        self.priming = priming_uses(width, self.world_size, self.k) if self.count else 0
        self.uses = self.count + self.priming
        table = bytearray(self.priming * 4 * self.k)
        mine = self.local[:width].astype(np.uint8).tobytes()
        table[rank : width * self.world_size : self.world_size] = mine
        self._table = table  # this rank's bytes until the priming's results replace them with the sums

    def _announce(self, chunk: int) -> int:
        """The wire exponent of `chunk`, announced one use ahead (EXP_NONE if the slot has no such chunk)."""
        return int(self.local[chunk]) if chunk < self.count else EXP_NONE

    def _primed(self, chunk: int) -> int:
        """The agreed exponent of one of the first W chunks: the largest any rank announced in the priming
        (255, non-finite, wins as in the switch's maximum)."""
        n = self.world_size
        return max(self._table[chunk * n : (chunk + 1) * n])

    def payload(self, use: int, agreed_exp: int) -> tuple[bytes, int]:
        size = 4 * self.k
        if use < self.priming:
            return bytes(self._table[use * size : (use + 1) * size]), EXP_NONE
        chunk = use - self.priming
        if chunk < self.slots:
            agreed_exp = self._primed(chunk)
        self.agreed[chunk] = agreed_exp
        values = q.quantize(self.chunks[chunk], agreed_exp, self.world_size, self.bits)
        return values.tobytes(), self._announce(chunk + self.slots)

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        size = 4 * self.k
        if use < self.priming:
            self._table[use * size : (use + 1) * size] = values
            return
        chunk = use - self.priming
        self._receive[chunk * size : (chunk + 1) * size] = values

    def nonfinite_blocks(self) -> np.ndarray:
        return np.flatnonzero(self.agreed == EXP_NONFINITE)

    def result(self) -> np.ndarray:
        blocks = self.nonfinite_blocks()
        if blocks.size and self.nonfinite == NonFinite.RAISE:
            raise nonfinite_error(blocks.size, int(blocks[0]), self.block, self.size)
        sums = q.dequantize(self.sums, self.agreed, self.world_size, self.bits)
        if self.op == Op.AVG:
            sums /= self.world_size
        return sums.reshape(-1)[: self.size]

    def error_bound(self) -> np.ndarray:
        return error_bounds(self.agreed, self.world_size, self.op, self.block, self.size, self.bits)


def nonfinite_error(blocks: int, first_block: int, k: int, size: int) -> NonFiniteError:
    """What every rank raises with nonfinite='raise' when `blocks` blocks were agreed non-finite."""
    first = first_block * k
    return NonFiniteError(
        f"{blocks} block(s) of {k} elements held NaN or Inf on some rank, the first "
        f"at elements {first}..{min(first + k, size) - 1}; every rank raises "
        "(nonfinite='raise')"
    )


def error_bounds(
    agreed: np.ndarray, world_size: int, op: Op, block: int, size: int, bits: int = 32
) -> np.ndarray:
    """Per element, the largest absolute error the quantization allows (docs/protocol.md), from the
    wire exponent each block (of `block` elements) was sent with."""
    bounds = np.array([q.error_bound(int(e), world_size, bits) for e in agreed], dtype=np.float64)
    if op == Op.AVG:
        bounds /= world_size
    return np.repeat(bounds, block)[:size]


class RefusedPlan:
    """One use of zeros with a refused descriptor: a rank that cannot take part still meets its peers,
    so that they fail at once (the switch sees two descriptors) instead of waiting for a timeout."""

    uses = 1
    priming = 0

    def __init__(self, k: int) -> None:
        self._zeros = bytes(4 * k)

    def width(self, slots: int) -> int:
        return 1

    def start(self, width: int, rank: int) -> None:
        pass

    def payload(self, use: int, agreed_exp: int) -> tuple[bytes, int]:
        return self._zeros, EXP_NONE

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        pass

    def result(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int32)


Plan = IntPlan | FloatPlan | RefusedPlan


def plan_for(flat: np.ndarray, descriptor: Descriptor, k: int, world_size: int) -> Plan:
    """int32 exactly; floats (bfloat16 as uint16 bit patterns) at the descriptor's wire width."""
    if flat.dtype == np.int32:
        return IntPlan(flat, k, world_size, descriptor.op)
    return FloatPlan(flat, k, world_size, descriptor.op, descriptor.nonfinite, descriptor.bits)
