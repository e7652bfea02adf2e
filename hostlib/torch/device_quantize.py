"""hostlib.quantize's block floating point in torch operations, on the device the tensor is on.

The switch sums 32-bit integers, so every rank must turn its floats into
exactly the integers the host library would make (docs/protocol.md,
*Quantization* and *Non-finite values*), or a GPU rank and a CPU rank of
one job would disagree in the last bit. Each function here follows its
namesake in hostlib.quantize step for step, in float64 (which CUDA
computes to IEEE rules for +, *, / and round: no fused or approximate
operations are used):

* wire exponents: frexp of each chunk's float64 peak magnitude (NaN
  propagates through the max), clipped to -127 .. 126 and biased by 128;
  255 for a chunk with NaN, Inf or a magnitude of 2^126 or more;
* quantize: rint(x * S), S = floor((2^31 - 1) / N) / 2^E, rounding half to
  even; a product that does not fit int32 (or is NaN) becomes INT32_MIN,
  which is what numpy's float64 -> int32 cast gives on x86-64 (cvttsd2si),
  so the result does not depend on a device's own out-of-range cast;
* dequantize: the integer sum times 1/S (a reciprocal, then one
  multiplication per element, as the native engine does);
* per-element codes of a non-finite chunk, and their decoding.

The powers of two are built from their bits, not by exp2 or pow, so that
they are exact on every device. tests/torch_backend/test_device_quantize.py
compares every function with hostlib.quantize bit for bit on CPU tensors.

The 16-bit wire format ("pair words") packs two elements per 32-bit value
field: a chunk holds 2K elements, field j carries element 2j in its high
16-bit lane and 2j+1 in its low lane as the int32 hi * 65536 + lo
(wrapping), with S16 = floor((2^15 - 1) / N) / 2^E so that each lane's sum
of N ranks fits 16 bits; non-finite codes per element are 1 (+Inf), 64
(-Inf) and 65 (NaN). Its functions carry a `16` in their names.

Needs float64 on the device: CUDA and CPU have it (Apple's MPS does not).
"""

from __future__ import annotations

import torch

from contracts.protocol import EXP_BIAS, EXP_NONFINITE
from hostlib.quantize import (
    CODE_NAN,
    CODE_NEG_INF,
    CODE_POS_INF,
    INT32_MAX,
    MAX_EXPONENT,
    MIN_EXPONENT,
    OVERFLOW,
    ZERO_EXPONENT,
)

__all__ = [
    "as_chunks",
    "decode_nonfinite",
    "decode_nonfinite16",
    "dequantize",
    "dequantize16",
    "nonfinite_codes",
    "nonfinite_codes16",
    "quantize",
    "quantize16",
    "unpack_pairs",
    "wire_exponents",
]

INT16_MAX = 2**15 - 1
INT32_MIN = -(2**31)
# Per-element codes of a non-finite block at 16 bits: 6-bit counters, so 32 ranks' sums stay apart
CODE16_POS_INF, CODE16_NEG_INF, CODE16_NAN = 1, 1 << 6, 1 | 1 << 6
_MANTISSA_BITS = 52
_FLOAT64_BIAS = 1023


def as_chunks(flat: torch.Tensor, k: int) -> torch.Tensor:
    """The flat input as (chunks, k), zero-padded at the tail (k = 2K for the 16-bit format)."""
    chunks = -(-flat.numel() // k)
    padded = torch.zeros(chunks * k, dtype=flat.dtype, device=flat.device)
    padded[: flat.numel()] = flat.reshape(-1)
    return padded.reshape(chunks, k)


def _power_of_two(exponents: torch.Tensor) -> torch.Tensor:
    """2.0 ** e as float64, exact: the bit pattern of a normal float64 (-1022 <= e <= 1023)."""
    bits = (exponents.to(torch.int64) + _FLOAT64_BIAS) << _MANTISSA_BITS
    return bits.view(torch.float64)


def wire_exponents(chunks: torch.Tensor) -> torch.Tensor:
    """Per chunk (row) of floats, the int64 wire exponent it announces: e + 128, or 255 if non-finite.

    e is the smallest exponent with max|x| < 2^e (-126 for an all-zero chunk).
    """
    peak = chunks.to(torch.float64).abs().amax(dim=1)  # NaN propagates, as numpy's max
    finite = torch.isfinite(peak)
    _, exponent = torch.frexp(torch.where(finite, peak, torch.zeros_like(peak)))
    exponent = torch.where(peak == 0.0, torch.full_like(exponent, ZERO_EXPONENT), exponent)
    wire = exponent.to(torch.int64).clamp(MIN_EXPONENT, MAX_EXPONENT) + EXP_BIAS
    nonfinite = ~finite | (peak >= OVERFLOW)
    return torch.where(nonfinite, torch.full_like(wire, EXP_NONFINITE), wire)


def _scales(wire: torch.Tensor, levels: int) -> torch.Tensor:
    """float64 S per chunk, `levels` // 2^E (exact: a power-of-two division), E = 0 where non-finite."""
    finite = wire != EXP_NONFINITE
    exponents = torch.where(finite, wire - EXP_BIAS, torch.zeros_like(wire))
    return float(levels) / _power_of_two(exponents)


def _to_int32(products: torch.Tensor) -> torch.Tensor:
    """rint, then numpy's float64 -> int32 cast on x86-64: NaN and anything outside int32 give INT32_MIN."""
    rounded = torch.round(products)  # half to even, as np.rint
    fits = (rounded >= INT32_MIN) & (rounded <= INT32_MAX)  # False for NaN
    return torch.where(fits, rounded, torch.full_like(rounded, INT32_MIN)).to(torch.int32)


def quantize(chunks: torch.Tensor, wire: torch.Tensor, world_size: int) -> torch.Tensor:
    """(chunks, K) floats with their agreed wire exponents as (chunks, K) int32 for the wire.

    Row i is hostlib.quantize.quantize(chunks[i], wire[i], world_size) (native byte order).
    """
    x = chunks.to(torch.float64)
    wire = wire.to(device=x.device, dtype=torch.int64)
    values = _to_int32(x * _scales(wire, INT32_MAX // world_size)[:, None])
    return torch.where((wire == EXP_NONFINITE)[:, None], nonfinite_codes(x), values)


def nonfinite_codes(values: torch.Tensor) -> torch.Tensor:
    """Per element: +Inf (or overflow upwards) 1, -Inf (or downwards) 2^8, NaN 2^16, finite 0."""
    return _codes(values, CODE_POS_INF, CODE_NEG_INF, CODE_NAN)


def _codes(values: torch.Tensor, positive: int, negative: int, nan: int) -> torch.Tensor:
    x = values.to(torch.float64)
    codes = torch.zeros(x.shape, dtype=torch.int32, device=x.device)
    codes = torch.where(x >= OVERFLOW, positive, codes)
    codes = torch.where(x <= -OVERFLOW, negative, codes)
    return torch.where(torch.isnan(x), nan, codes).to(torch.int32)


def decode_nonfinite(sums: torch.Tensor) -> torch.Tensor:
    """Summed codes back to float64: NaN where a NaN, both infinities or nothing was counted, else ±Inf."""
    counts = sums.to(torch.int64)
    return _decode_counts(counts & 0xFF, (counts >> 8) & 0xFF, (counts >> 16) & 0xFF)


def _decode_counts(positive: torch.Tensor, negative: torch.Tensor, nan: torch.Tensor) -> torch.Tensor:
    out = torch.full(positive.shape, float("nan"), dtype=torch.float64, device=positive.device)
    out = torch.where((positive > 0) & (negative == 0) & (nan == 0), float("inf"), out)
    return torch.where((negative > 0) & (positive == 0) & (nan == 0), float("-inf"), out)


def dequantize(sums: torch.Tensor, wire: torch.Tensor, world_size: int) -> torch.Tensor:
    """(chunks, K) int32 sums and their agreed wire exponents back to float64 sums."""
    wire = wire.to(device=sums.device, dtype=torch.int64)
    reciprocal = 1.0 / _scales(wire, INT32_MAX // world_size)
    out = sums.to(torch.float64) * reciprocal[:, None]
    return torch.where((wire == EXP_NONFINITE)[:, None], decode_nonfinite(sums), out)


# ------------------------------------------------------------ 16 bits: two elements per value field


def _pack(lanes: torch.Tensor) -> torch.Tensor:
    """(chunks, 2K) int32 lanes as (chunks, K) int32 words hi * 65536 + lo, wrapping modulo 2^32."""
    pairs = lanes.to(torch.int64).reshape(lanes.shape[0], -1, 2)
    words = (pairs[..., 0] * 65536 + pairs[..., 1]) & 0xFFFFFFFF
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _sign_extend16(field: torch.Tensor) -> torch.Tensor:
    return torch.where(field >= 2**15, field - 2**16, field)


def unpack_pairs(words: torch.Tensor) -> torch.Tensor:
    """(chunks, K) summed words as (chunks, 2K) int64 lane sums: lo = sext(W & 0xFFFF),
    hi = sext(((W - lo) mod 2^32) >> 16), element 2j from the high lane of word j."""
    w = words.to(torch.int64)
    lo = _sign_extend16(w & 0xFFFF)
    hi = _sign_extend16(((w - lo) & 0xFFFFFFFF) >> 16)
    return torch.stack((hi, lo), dim=-1).reshape(words.shape[0], -1)


def nonfinite_codes16(values: torch.Tensor) -> torch.Tensor:
    """Per element at 16 bits: +Inf (or overflow upwards) 1, -Inf (or downwards) 64, NaN 65, finite 0."""
    return _codes(values, CODE16_POS_INF, CODE16_NEG_INF, CODE16_NAN)


def quantize16(chunks: torch.Tensor, wire: torch.Tensor, world_size: int) -> torch.Tensor:
    """(chunks, 2K) floats with their agreed wire exponents as (chunks, K) int32 pair words."""
    x = chunks.to(torch.float64)
    wire = wire.to(device=x.device, dtype=torch.int64)
    lanes = _to_int32(x * _scales(wire, INT16_MAX // world_size)[:, None])
    lanes = torch.where((wire == EXP_NONFINITE)[:, None], nonfinite_codes16(x), lanes)
    return _pack(lanes)


def decode_nonfinite16(lanes: torch.Tensor) -> torch.Tensor:
    """Summed 16-bit codes back to float64: +Inf if only +Inf was counted, -Inf if only -Inf, else NaN."""
    a, b = lanes & 63, (lanes >> 6) & 63
    out = torch.full(lanes.shape, float("nan"), dtype=torch.float64, device=lanes.device)
    out = torch.where((a > 0) & (b == 0), float("inf"), out)
    return torch.where((b > 0) & (a == 0), float("-inf"), out)


def dequantize16(words: torch.Tensor, wire: torch.Tensor, world_size: int) -> torch.Tensor:
    """(chunks, K) summed pair words and their agreed wire exponents back to (chunks, 2K) float64 sums."""
    wire = wire.to(device=words.device, dtype=torch.int64)
    lanes = unpack_pairs(words)
    reciprocal = 1.0 / _scales(wire, INT16_MAX // world_size)
    out = lanes.to(torch.float64) * reciprocal[:, None]
    return torch.where((wire == EXP_NONFINITE)[:, None], decode_nonfinite16(lanes), out)
