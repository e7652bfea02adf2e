"""Block floating point for in-network summation (docs/protocol.md, "Quantization" and "Non-finite values").

A switch adds 32-bit integers, so floats travel as integers scaled per
packet of K values. All workers of a slot use one agreed exponent E (the
maximum of their local exponents, agreed through the switch one use ahead),
and the scale leaves room for N addends:

    q = rint(x * S),  S = floor((2^31 - 1) / N) / 2^E

With |x| < 2^E every |q| <= floor((2^31-1)/N), so the sum of N workers
cannot overflow. The summed float is sum(q) / S; its error is at most half
a quantum per worker, N / (2 S) = N * 2^E / (2 * floor((2^31-1)/N)), about
N^2 * 2^(E-32): relative to the block's largest magnitude ~N^2 / 2^32.

A block holding NaN, Inf or a magnitude of 2^126 or more on some rank has
the reserved exponent 255: the switch's max propagates it, and every rank
then sends per-element codes instead of values, so the sums count the
non-finite kinds and every rank decodes the same NaN/Inf block.
"""

from __future__ import annotations

import numpy as np

from contracts.protocol import EXP_BIAS, EXP_NONFINITE

INT32_MAX = 2**31 - 1
LANE_BITS = 16  # a 16-bit value's lane in a 32-bit word
MIN_EXPONENT = 1 - EXP_BIAS  # -127: wire value 1 (0 means "no exponent")
MAX_EXPONENT = EXP_NONFINITE - 1 - EXP_BIAS  # 126: wire value 254 (255 means "non-finite")
ZERO_EXPONENT = -126  # exponent of an all-zero block (docs/protocol.md)
OVERFLOW = 2.0**MAX_EXPONENT  # a magnitude the quantization cannot carry: treated as infinite

# Per-element codes of a non-finite block; their sums count each kind (N <= 32 < 256).
CODE_POS_INF, CODE_NEG_INF, CODE_NAN = 1, 1 << 8, 1 << 16
# At 16 bits two counts of 6 bits (0 .. 32) fit a lane: NaN counts as both infinities, which decodes the
# same (NaN wherever both signs, or a NaN, were counted), and every lane's sum is at most 32 * 65 < 2^15.
CODE16_POS_INF, CODE16_NEG_INF = 1, 1 << 6
CODE16_NAN = CODE16_POS_INF | CODE16_NEG_INF
COUNT16_MASK = (1 << 6) - 1


def lanes(bits: int) -> int:
    """Values per 32-bit field: 1 at 32 bits, 2 at 16."""
    return 32 // bits


def levels(world_size: int, bits: int = 32) -> int:
    """The largest |q| a worker may send: N of them still fit a signed lane of `bits`."""
    return (2 ** (bits - 1) - 1) // world_size


def as_chunks(flat: np.ndarray, k: int) -> np.ndarray:
    """The flat input as (chunks, K), zero-padded at the tail."""
    chunks = -(-flat.size // k)
    padded = np.zeros(chunks * k, dtype=flat.dtype)
    padded[: flat.size] = flat
    return padded.reshape(chunks, k)


def wire_exponents(chunks: np.ndarray) -> np.ndarray:
    """Per chunk of floats, the wire exponent it announces: e + EXP_BIAS, or EXP_NONFINITE.

    e is the smallest exponent with max|x| < 2^e (ZERO_EXPONENT for an all-zero chunk).
    """
    magnitude = np.abs(chunks.astype(np.float64))
    with np.errstate(invalid="ignore"):
        peak = np.max(magnitude, axis=1, initial=0.0)  # NaN propagates
    _, exponent = np.frexp(np.where(np.isfinite(peak), peak, 0.0))  # peak = m * 2^exponent, 0.5 <= m < 1
    exponent = np.where(peak == 0.0, ZERO_EXPONENT, exponent)
    wire = np.clip(exponent, MIN_EXPONENT, MAX_EXPONENT).astype(np.int64) + EXP_BIAS
    nonfinite = ~np.isfinite(peak) | (peak >= OVERFLOW)
    return np.where(nonfinite, EXP_NONFINITE, wire)


def scale(exponent: int, world_size: int, bits: int = 32) -> float:
    """S for an agreed exponent: q = rint(x * S) keeps every N-worker sum inside a signed lane of `bits`."""
    return levels(world_size, bits) / 2.0**exponent


def quantize(values: np.ndarray, wire_exponent: int, world_size: int, bits: int = 32) -> np.ndarray:
    """One chunk as big-endian int32 ready for the wire: scaled values, or codes for a non-finite block.

    At 16 bits the chunk's even elements go to the high lanes and the odd ones to the low lanes of
    half as many words."""
    if wire_exponent == EXP_NONFINITE:
        q = nonfinite_codes(values, bits)
    else:
        exponent = wire_exponent - EXP_BIAS
        q = np.rint(values.astype(np.float64) * scale(exponent, world_size, bits)).astype(">i4")
    return q if bits == 32 else pack_pairs(q)


def pack_pairs(q: np.ndarray) -> np.ndarray:
    """Two values per word, hi * 2^16 + lo, wrapping like int32 (an out-of-range q wraps too, alike in
    both engines: only a switch lying about the maximum exponent makes one)."""
    wide = q.astype(np.uint32)
    return ((wide[0::2] << np.uint32(LANE_BITS)) + wide[1::2]).astype(">u4").view(">i4")


def unpack_pairs(words: np.ndarray) -> np.ndarray:
    """The lane sums of summed words, (..., K) -> (..., 2K) int64: lo is the word's low 16 bits as a signed
    number (every lane sum is inside int16), hi what remains once lo is taken away."""
    w = words.astype(np.int64) & 0xFFFFFFFF
    lo = ((w & 0xFFFF) ^ 0x8000) - 0x8000
    hi = ((((w - lo) & 0xFFFFFFFF) >> LANE_BITS) ^ 0x8000) - 0x8000
    return np.stack([hi, lo], axis=-1).reshape(*words.shape[:-1], 2 * words.shape[-1])


def nonfinite_codes(values: np.ndarray, bits: int = 32) -> np.ndarray:
    """Per element: +Inf (or overflow upwards) 1, -Inf (or downwards) 2^8, NaN 2^16, finite 0; at 16 bits
    1, 2^6 and both."""
    positive, negative, nan = (CODE_POS_INF, CODE_NEG_INF, CODE_NAN) if bits == 32 else (
        CODE16_POS_INF, CODE16_NEG_INF, CODE16_NAN,
    )  # fmt: skip
    x = values.astype(np.float64)
    codes = np.zeros(x.shape, dtype=">i4")
    with np.errstate(invalid="ignore"):
        codes[x >= OVERFLOW] = positive
        codes[x <= -OVERFLOW] = negative
    codes[np.isnan(x)] = nan
    return codes


def decode_nonfinite(sums: np.ndarray, bits: int = 32) -> np.ndarray:
    """Summed codes back to floats: NaN if any NaN or both infinities (or nothing) were counted, else ±Inf.
    At 16 bits a NaN was counted as both infinities, which the same rule decodes as NaN."""
    counts = sums.astype(np.int64)
    if bits == 32:
        positive, negative, nan = counts & 0xFF, (counts >> 8) & 0xFF, (counts >> 16) & 0xFF
    else:
        positive, negative, nan = counts & COUNT16_MASK, (counts >> 6) & COUNT16_MASK, 0
    out = np.full(counts.shape, np.nan)
    out[(positive > 0) & (negative == 0) & (nan == 0)] = np.inf
    out[(negative > 0) & (positive == 0) & (nan == 0)] = -np.inf
    return out


def error_bound(wire_exponent: int, world_size: int, bits: int = 32) -> float:
    """Largest absolute error of a summed value in a block with agreed `wire_exponent` (inf if non-finite)."""
    if wire_exponent == EXP_NONFINITE:
        return np.inf
    return world_size / (2.0 * scale(wire_exponent - EXP_BIAS, world_size, bits))


def dequantize(sums: np.ndarray, wire_exponents: np.ndarray, world_size: int, bits: int = 32) -> np.ndarray:
    """(chunks, K) summed words and their agreed wire exponents back to (chunks, K * lanes) float64 sums."""
    finite = wire_exponents != EXP_NONFINITE
    exponents = np.where(finite, wire_exponents - EXP_BIAS, 0).astype(np.float64)
    scales = levels(world_size, bits) / np.exp2(exponents)
    values = sums if bits == 32 else unpack_pairs(sums)
    # times 1/S, not divided by S: one multiplication per element (the C engine's too, bit for bit)
    out = values.astype(np.float64) * (1.0 / scales)[:, None]
    if not finite.all():
        out[~finite] = decode_nonfinite(values[~finite], bits)
    return out


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values held as their uint16 bit patterns (numpy has no bfloat16), widened exactly."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def float_to_bfloat16(values: np.ndarray) -> np.ndarray:
    """float64 (or float32) values rounded to bfloat16 bit patterns: to float32 first (numpy's cast),
    then to nearest, ties to even, NaN as 0x7FC0: torch's own conversion of that float32."""
    with np.errstate(over="ignore"):  # beyond float32's range is Inf, as torch rounds it
        wide = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (wide + np.uint32(0x7FFF) + ((wide >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.where(np.isnan(values), np.uint32(0x7FC0), rounded).astype(np.uint16)
