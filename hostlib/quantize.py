"""Block floating point for in-network summation (docs/protocol.md, "Quantization").

A switch adds 32-bit integers, so floats travel as integers scaled per
packet of K values. All workers of a slot use one agreed exponent E (the
maximum of their local exponents, agreed through the switch one use ahead),
and the scale leaves room for N addends:

    q = rint(x * S),  S = floor((2^31 - 1) / N) / 2^E

With |x| < 2^E every |q| <= floor((2^31-1)/N), so the sum of N workers
cannot overflow. The summed float is sum(q) / S; its error is at most half
a quantum per worker, N / (2 S) = N * 2^E / (2 * floor((2^31-1)/N)), about
N^2 * 2^(E-32): relative to the block's largest magnitude ~N^2 / 2^32.
"""

from __future__ import annotations

import numpy as np

from contracts.protocol import EXP_BIAS, VALUES_PER_PACKET

INT32_MAX = 2**31 - 1
MIN_EXPONENT = 1 - EXP_BIAS  # -127: wire value 1 (0 means "no exponent")
MAX_EXPONENT = 255 - EXP_BIAS  # 127: wire value 255
ZERO_EXPONENT = -126  # exponent of an all-zero block (docs/protocol.md)

SUPPORTED = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32))


def check_input(array: np.ndarray) -> None:
    """Refuse what cannot be summed exactly or meaningfully, before anything is sent."""
    if array.dtype not in SUPPORTED:
        names = ", ".join(str(d) for d in SUPPORTED)
        raise TypeError(f"allreduce supports {names}; got {array.dtype} (cast it first)")
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        if not finite.all():
            bad = np.flatnonzero(~finite.reshape(-1))
            raise ValueError(
                f"input holds {bad.size} NaN/Inf value(s), the first at flat index {bad[0]}: "
                "nothing was sent (a non-finite gradient would poison every worker's result)"
            )
        limit = float(2.0**MAX_EXPONENT)
        peak = float(np.abs(array).max(initial=0.0))
        if peak >= limit:
            raise ValueError(f"input magnitude {peak:g} is at or above 2^{MAX_EXPONENT}: cannot be quantized")


def as_chunks(flat: np.ndarray, k: int = VALUES_PER_PACKET) -> np.ndarray:
    """The flat input as (chunks, K), zero-padded at the tail."""
    chunks = -(-flat.size // k)
    padded = np.zeros(chunks * k, dtype=flat.dtype)
    padded[: flat.size] = flat
    return padded.reshape(chunks, k)


def local_exponents(chunks: np.ndarray) -> np.ndarray:
    """Per chunk, the smallest e with max|x| < 2^e (ZERO_EXPONENT for an all-zero chunk), as int."""
    peak = np.abs(chunks).max(axis=1).astype(np.float64)
    _, exponent = np.frexp(peak)  # peak = m * 2^exponent with 0.5 <= m < 1, so peak < 2^exponent
    exponent = np.where(peak == 0.0, ZERO_EXPONENT, exponent)
    return np.clip(exponent, MIN_EXPONENT, MAX_EXPONENT).astype(np.int64)


def scale(exponent: int, world_size: int) -> float:
    """S for an agreed exponent: q = rint(x * S) keeps every N-worker sum inside int32."""
    return (INT32_MAX // world_size) / 2.0**exponent


def quantize(values: np.ndarray, exponent: int, world_size: int) -> np.ndarray:
    """One chunk as big-endian int32 ready for the wire."""
    return np.rint(values.astype(np.float64) * scale(exponent, world_size)).astype(">i4")


def error_bound(exponent: int, world_size: int) -> float:
    """Largest absolute error of a summed value in a block with agreed `exponent`."""
    return world_size / (2.0 * scale(exponent, world_size))


def dequantize(sums: np.ndarray, exponents: np.ndarray, world_size: int) -> np.ndarray:
    """(chunks, K) integer sums and their agreed exponents back to float64 sums."""
    scales = (INT32_MAX // world_size) / np.exp2(exponents.astype(np.float64))
    return sums.astype(np.float64) / scales[:, None]
