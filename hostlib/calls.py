"""What a call is, as every rank must agree on it, and how calls fail (docs/protocol.md, *Call agreement*).

Each DATA packet carries its call's 32-bit descriptor; the switch compares
descriptors between the contributions of a use and aborts the call for
every rank when they differ. The descriptor is exact, not a hash, so that an
ABORT, which carries the offender's descriptor and the slot's, lets every
rank say what differs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MAX_CALL_ELEMENTS = (1 << 24) - 1  # the descriptor's count field
WIRE_BITS = (16, 32)  # bits per value on the wire (docs/protocol.md, *Wire formats*)
WIRE16_BIT = 1 << 24  # set in the descriptor of a call at 16 bits per value


class DType(enum.IntEnum):
    """Descriptor dtype codes. REFUSED: a rank that cannot take part (its own arguments are wrong)."""

    INT32 = 1
    FLOAT32 = 2
    FLOAT16 = 3
    BFLOAT16 = 4
    REFUSED = 15


class Op(enum.IntEnum):
    SUM = 0
    AVG = 1


class NonFinite(enum.IntEnum):
    """What a NaN or Inf in some rank's input does: come back in its block, or make every rank raise."""

    PROPAGATE = 0
    RAISE = 1


def check_wire_bits(bits: int, dtype: DType) -> int:
    """`bits`, if a call of `dtype` may travel at it: 16 or 32, and int32 at 32 only (its sums are exact)."""
    if bits not in WIRE_BITS:
        raise ValueError(f"wire_bits must be 16 or 32, not {bits!r}")
    if bits == 16 and dtype == DType.INT32:
        raise ValueError("int32 sums are exact at 32 bits only: wire_bits=16 is for float tensors")
    return bits


@dataclass(frozen=True)
class Descriptor:
    """`bits`: the wire format, 32 (one value per 32-bit field) or 16 (two: floats only). It is part
    of the descriptor so that ranks sending the same tensor at different widths, whose sums would be
    garbage, are a mismatch like any other."""

    dtype: DType
    op: Op
    nonfinite: NonFinite
    count: int
    bits: int = 32

    def __post_init__(self) -> None:
        if not 0 <= self.count <= MAX_CALL_ELEMENTS:
            raise ValueError(f"a call carries at most {MAX_CALL_ELEMENTS} elements, not {self.count}")
        check_wire_bits(self.bits, self.dtype)

    def encode(self) -> int:
        wire16 = WIRE16_BIT if self.bits == 16 else 0
        return self.dtype << 28 | self.op << 26 | self.nonfinite << 25 | wire16 | self.count

    @classmethod
    def decode(cls, word: int) -> Descriptor | None:
        """The descriptor a word carries, or None if it is not one this library could have sent."""
        try:
            return cls(
                DType(word >> 28),
                Op(word >> 26 & 3),
                NonFinite(word >> 25 & 1),
                word & MAX_CALL_ELEMENTS,
                16 if word & WIRE16_BIT else 32,
            )
        except ValueError:
            return None

    def __str__(self) -> str:
        if self.dtype == DType.REFUSED:
            return "a refused call (that rank's own arguments were wrong)"
        mode = ", raise on non-finite" if self.nonfinite == NonFinite.RAISE else ""
        wire = " at 16 bits" if self.bits == 16 else ""
        return f"{self.op.name.lower()} of {self.count} × {self.dtype.name.lower()}{wire}{mode}"


def describe_word(word: int) -> str:
    descriptor = Descriptor.decode(word)
    return str(descriptor) if descriptor is not None else f"an unknown call (descriptor {word:#010x})"


class AllreduceError(RuntimeError):
    """An all-reduce failed; every rank of the job gets an error for the same call."""


class AllreduceTimeout(AllreduceError):
    """A call made no progress for too long: the switch, the job's entries or a peer is gone.

    After a timeout the communicator refuses further calls, as NCCL and Gloo do: the ranks are no
    longer known to be in step.
    """


class AllreduceAborted(AllreduceError):
    """The switch aborted the call for every rank, or the other ranks abandoned it."""


class AllreduceMismatch(AllreduceAborted):
    """The ranks' calls differ (element count, dtype, operation or non-finite mode)."""


class NonFiniteError(AllreduceError, ValueError):
    """Some rank's input held NaN or Inf and the call asked every rank to raise (nonfinite="raise")."""
