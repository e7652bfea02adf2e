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
MIN_EXPONENT = 1 - EXP_BIAS  # -127: wire value 1 (0 means "no exponent")
MAX_EXPONENT = EXP_NONFINITE - 1 - EXP_BIAS  # 126: wire value 254 (255 means "non-finite")
ZERO_EXPONENT = -126  # exponent of an all-zero block (docs/protocol.md)
OVERFLOW = 2.0**MAX_EXPONENT  # a magnitude the quantization cannot carry: treated as infinite

# Per-element codes of a non-finite block; their sums count each kind (N <= 32 < 256).
CODE_POS_INF, CODE_NEG_INF, CODE_NAN = 1, 1 << 8, 1 << 16


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


def scale(exponent: int, world_size: int) -> float:
    """S for an agreed exponent: q = rint(x * S) keeps every N-worker sum inside int32."""
    return (INT32_MAX // world_size) / 2.0**exponent


def quantize(values: np.ndarray, wire_exponent: int, world_size: int) -> np.ndarray:
    """One chunk as big-endian int32 ready for the wire: scaled values, or codes for a non-finite block."""
    if wire_exponent == EXP_NONFINITE:
        return nonfinite_codes(values)
    exponent = wire_exponent - EXP_BIAS
    return np.rint(values.astype(np.float64) * scale(exponent, world_size)).astype(">i4")


def nonfinite_codes(values: np.ndarray) -> np.ndarray:
    """Per element: +Inf (or overflow upwards) 1, -Inf (or downwards) 2^8, NaN 2^16, finite 0."""
    x = values.astype(np.float64)
    codes = np.zeros(x.shape, dtype=">i4")
    with np.errstate(invalid="ignore"):
        codes[x >= OVERFLOW] = CODE_POS_INF
        codes[x <= -OVERFLOW] = CODE_NEG_INF
    codes[np.isnan(x)] = CODE_NAN
    return codes


def decode_nonfinite(sums: np.ndarray) -> np.ndarray:
    """Summed codes back to floats: NaN if any NaN or both infinities (or nothing) were counted, else ±Inf."""
    counts = sums.astype(np.int64)
    positive, negative, nan = counts & 0xFF, (counts >> 8) & 0xFF, (counts >> 16) & 0xFF
    out = np.full(counts.shape, np.nan)
    out[(positive > 0) & (negative == 0) & (nan == 0)] = np.inf
    out[(negative > 0) & (positive == 0) & (nan == 0)] = -np.inf
    return out


def error_bound(wire_exponent: int, world_size: int) -> float:
    """Largest absolute error of a summed value in a block with agreed `wire_exponent` (inf if non-finite)."""
    if wire_exponent == EXP_NONFINITE:
        return np.inf
    return world_size / (2.0 * scale(wire_exponent - EXP_BIAS, world_size))


def dequantize(sums: np.ndarray, wire_exponents: np.ndarray, world_size: int) -> np.ndarray:
    """(chunks, K) integer sums and their agreed wire exponents back to float64 sums."""
    finite = wire_exponents != EXP_NONFINITE
    exponents = np.where(finite, wire_exponents - EXP_BIAS, 0).astype(np.float64)
    scales = (INT32_MAX // world_size) / np.exp2(exponents)
    # times 1/S, not divided by S: one multiplication per element (the C engine's too, bit for bit)
    out = sums.astype(np.float64) * (1.0 / scales)[:, None]
    if not finite.all():
        out[~finite] = decode_nonfinite(sums[~finite])
    return out
