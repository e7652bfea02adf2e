"""The device-side quantizer (hostlib.torch.device_quantize) against hostlib.quantize, bit for bit.

Every block kind the protocol distinguishes is here: ordinary values, one
large value among small ones (most elements quantize to a few levels),
mixed signs, float32 and float64 denormals, NaN, ±Inf, magnitudes of 2^126
and more, all-zero blocks, rounding ties, and float16 and bfloat16 inputs.
The tests run on CPU tensors in CI; with a GPU the same comparisons run on
CUDA tensors too (skipped with the reason otherwise).

The 16-bit wire format is compared with hostlib.quantize's `bits=16`
functions and with a plain numpy transcription of its specification
(below), which reads as the spec does: one step per clause.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from contracts.protocol import EXP_BIAS, EXP_NONFINITE  # noqa: E402
from hostlib import quantize as reference  # noqa: E402
from hostlib.torch import device_quantize as dq  # noqa: E402
from tests.torch_backend.devices import DEVICES  # noqa: E402

K = 64


def adversarial_blocks(seed: int = 7) -> np.ndarray:
    """(blocks, K) float32: one block per hostile case, then random ones of every scale."""
    rng = np.random.default_rng(seed)
    tiny = np.float32(1e-45)  # the smallest float32 denormal
    blocks = [
        rng.standard_normal(K),
        np.r_[1e6, rng.standard_normal(K - 1) * 1e-3],  # one large among small ones
        np.r_[-3e4, rng.uniform(-1, 1, K - 1)],  # mixed signs, the peak negative
        np.full(K, tiny) * rng.integers(-5, 6, K),  # float32 denormals
        np.r_[np.float32(1.1754942e-38), np.full(K - 1, tiny)],  # the largest denormal
        np.zeros(K),
        np.r_[np.nan, rng.standard_normal(K - 1)],
        np.r_[np.inf, rng.standard_normal(K - 1)],
        np.r_[-np.inf, rng.standard_normal(K - 1)],
        np.r_[np.inf, -np.inf, np.nan, np.zeros(K - 3)],
        np.r_[2.0**126, rng.standard_normal(K - 1)],  # overflow upwards
        np.r_[-(2.0**127), 1.0, np.zeros(K - 2)],  # overflow downwards
        np.r_[np.float32(2.0**126) * np.float32(0.99999994), np.ones(K - 1)],  # just below overflow
        np.r_[1.0, 0.5, 0.25, -1.0, np.zeros(K - 4)],  # powers of two: the exponent's edge
        np.r_[2.0**-127, 2.0**-130, np.zeros(K - 2)],  # below the smallest exponent
        np.arange(K) - K / 2,  # integers: many rounding ties after scaling
    ]
    for scale in (1e-30, 1e-8, 1e-3, 1.0, 1e3, 1e20, 1e37):
        blocks.append(rng.standard_normal(K) * scale)
    return np.asarray(blocks).astype(np.float32)


def inputs() -> Iterator[tuple[str, torch.Tensor, np.ndarray]]:
    """(name, tensor, the same values as numpy float array) for float32, float16, bfloat16, float64."""
    blocks = adversarial_blocks()
    yield "float32", torch.from_numpy(blocks), blocks
    with np.errstate(over="ignore"):
        half = blocks.astype(np.float16)  # overflows to Inf beyond 65504: Inf blocks of their own
    yield "float16", torch.from_numpy(half), half
    bf16 = torch.from_numpy(blocks).to(torch.bfloat16)
    yield "bfloat16", bf16, bf16.float().numpy()  # widening bfloat16 to float32 is exact
    wide = blocks.astype(np.float64)
    wide[3] = np.full(K, 5e-324) * np.arange(K)  # float64 denormals
    yield "float64", torch.from_numpy(wide), wide


CASES = list(inputs())
IDS = [name for name, _, _ in CASES]


def agreed(exponents: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exponents other ranks could have raised them to: the same, larger, or non-finite."""
    raised = np.minimum(exponents + rng.integers(0, 3, exponents.size), EXP_NONFINITE - 1)
    return np.where(exponents == EXP_NONFINITE, EXP_NONFINITE, raised)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "tensor", "values"), CASES, ids=IDS)
def test_wire_exponents_match_the_host_library(
    device: str, name: str, tensor: torch.Tensor, values: np.ndarray
) -> None:
    got = dq.wire_exponents(tensor.to(device)).cpu().numpy()
    assert got.tolist() == reference.wire_exponents(values).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "tensor", "values"), CASES, ids=IDS)
@pytest.mark.parametrize("world", [1, 3, 4, 32])
def test_quantize_and_dequantize_match_the_host_library_bit_for_bit(
    device: str, name: str, tensor: torch.Tensor, values: np.ndarray, world: int
) -> None:
    rng = np.random.default_rng(world)
    local = reference.wire_exponents(values)
    for wire in (local, agreed(local, rng)):
        q = dq.quantize(tensor.to(device), torch.from_numpy(wire), world).cpu().numpy()
        expected = np.stack([reference.quantize(v, int(e), world) for v, e in zip(values, wire, strict=True)])
        assert q.tolist() == expected.astype(np.int32).tolist()
        sums = (q.astype(np.int64) * world).astype(np.int32)  # as if every rank sent the same (wrapping)
        back = dq.dequantize(torch.from_numpy(sums).to(device), torch.from_numpy(wire), world)
        expected_back = reference.dequantize(sums, wire, world)
        assert back.cpu().numpy().view(np.int64).tolist() == expected_back.view(np.int64).tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_exponents_too_small_for_the_values_give_numpys_int32_min_not_the_devices_cast(device: str) -> None:
    """A product beyond int32 (a wrong exponent) or NaN: numpy on x86-64 gives INT32_MIN; so must we."""
    values = np.array([[3.0, -3.0, 1e30, -1e30, np.nan, 0.5, 2.0**31, -(2.0**31)] * 8])
    wire = np.array([EXP_BIAS + 0])  # E = 0: |x| < 1 fits, 3.0 does not
    got = dq.quantize(torch.from_numpy(values).to(device), torch.from_numpy(wire), 1).cpu().numpy()
    with np.errstate(invalid="ignore"):
        expected = reference.quantize(values[0], int(wire[0]), 1).astype(np.int32)
    assert got[0].tolist() == expected.tolist()
    assert got[0, 0] == dq.INT32_MIN


@pytest.mark.parametrize("device", DEVICES)
def test_summed_nonfinite_codes_decode_as_the_host_library_does(device: str) -> None:
    rng = np.random.default_rng(3)
    codes = np.array([0, reference.CODE_POS_INF, reference.CODE_NEG_INF, reference.CODE_NAN])
    sums = codes[rng.integers(0, 4, (500, 4))].sum(axis=1).astype(np.int32)  # four ranks' codes summed
    got = dq.decode_nonfinite(torch.from_numpy(sums).to(device)).cpu().numpy()
    assert got.view(np.int64).tolist() == reference.decode_nonfinite(sums).view(np.int64).tolist()


def test_as_chunks_pads_the_tail_with_zeros_as_the_host_library() -> None:
    flat = np.arange(1, 131, dtype=np.float32)
    got = dq.as_chunks(torch.from_numpy(flat), K).numpy()
    assert np.array_equal(got, reference.as_chunks(flat, K))


# ------------------------------------------------------------ the 16-bit wire format


def spec_quantize16(values: np.ndarray, wire_exponent: int, world: int) -> np.ndarray:
    """One chunk of 2K floats as K int32 pair words, transcribed from the 16-bit format's specification."""
    x = values.astype(np.float64)
    if wire_exponent == EXP_NONFINITE:
        lanes = np.zeros(x.shape, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            lanes[x >= reference.OVERFLOW] = 1
            lanes[x <= -reference.OVERFLOW] = 64
        lanes[np.isnan(x)] = 65
    else:
        s16 = ((2**15 - 1) // world) / 2.0 ** (wire_exponent - EXP_BIAS)
        with np.errstate(invalid="ignore"):
            lanes = np.rint(x * s16).astype(np.int32).astype(np.int64)  # the int32 cast rule
    hi, lo = lanes[0::2], lanes[1::2]
    return (hi * 65536 + lo).astype(np.int32)  # wrapping int32 arithmetic


def spec_dequantize16(words: np.ndarray, wire_exponent: int, world: int) -> np.ndarray:
    """K summed words back to 2K float64 sums, transcribed from the specification."""
    w = words.astype(np.int64)
    lo = ((w & 0xFFFF) ^ 0x8000) - 0x8000  # sign-extended
    hi = (((((w - lo) % 2**32) >> 16) ^ 0x8000) - 0x8000)  # fmt: skip
    lanes = np.empty(2 * w.size, dtype=np.int64)
    lanes[0::2], lanes[1::2] = hi, lo
    if wire_exponent == EXP_NONFINITE:
        a, b = lanes & 63, (lanes >> 6) & 63
        out = np.full(lanes.shape, np.nan)
        out[(a > 0) & (b == 0)] = np.inf
        out[(b > 0) & (a == 0)] = -np.inf
        return out
    s16 = ((2**15 - 1) // world) / np.exp2(float(wire_exponent - EXP_BIAS))
    return lanes.astype(np.float64) * (1.0 / s16)


def _pairs(values: np.ndarray) -> np.ndarray:
    """The (blocks, K) cases as (blocks / 2, 2K) chunks of the 16-bit format."""
    return values.reshape(-1, 2 * K) if len(values) % 2 == 0 else values[:-1].reshape(-1, 2 * K)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "tensor", "values"), CASES, ids=IDS)
@pytest.mark.parametrize("world", [1, 4, 32])
def test_16_bit_pair_words_follow_the_specification_and_the_host_library_bit_for_bit(
    device: str, name: str, tensor: torch.Tensor, values: np.ndarray, world: int
) -> None:
    chunks = _pairs(values)
    device_chunks = _pairs_tensor(tensor).to(device)
    local = reference.wire_exponents(chunks)
    assert dq.wire_exponents(device_chunks).cpu().numpy().tolist() == local.tolist()
    rng = np.random.default_rng(world)
    for wire in (local, agreed(local, rng)):
        words = dq.quantize16(device_chunks, torch.from_numpy(wire), world).cpu().numpy()
        expected = np.stack([spec_quantize16(c, int(e), world) for c, e in zip(chunks, wire, strict=True)])
        assert words.tolist() == expected.tolist()
        with np.errstate(invalid="ignore"):
            host = [reference.quantize(c, int(e), world, bits=16) for c, e in zip(chunks, wire, strict=True)]
        assert words.tolist() == np.stack(host).astype(np.int32).tolist()
        # Each rank's lanes differ: the sums of N ranks' words must unpack to the lanes' sums.
        exponents = torch.from_numpy(wire)
        summed = wrapped_sum(
            [dq.quantize16(device_chunks * (r + 1) / world, exponents, world) for r in range(world)]
        )
        back = dq.dequantize16(torch.from_numpy(summed).to(device), exponents, world).cpu().numpy()
        spec = np.stack([spec_dequantize16(s, int(e), world) for s, e in zip(summed, wire, strict=True)])
        assert back.view(np.int64).tolist() == spec.view(np.int64).tolist()
        assert (
            back.view(np.int64).tolist()
            == reference.dequantize(summed, wire, world, bits=16).view(np.int64).tolist()
        )


def wrapped_sum(words: list[torch.Tensor]) -> np.ndarray:
    """The switch's sum of the ranks' words: int32, wrapping modulo 2^32."""
    total = sum(w.cpu().numpy().astype(np.int64) for w in words)
    return (np.asarray(total) % 2**32).astype(np.uint32).view(np.int32)


def _pairs_tensor(tensor: torch.Tensor) -> torch.Tensor:
    rows = tensor.shape[0] - tensor.shape[0] % 2
    return tensor[:rows].reshape(-1, 2 * K)


def test_16_bit_lane_sums_of_32_ranks_unpack_exactly_with_negative_low_lanes() -> None:
    """The borrow between lanes: a negative low lane takes one from the high lane; unpacking gives it back."""
    rng = np.random.default_rng(5)
    lanes = rng.integers(-1023, 1024, (32, 1, 2 * K))  # |q| <= floor(32767 / 32) = 1023
    words = [dq._pack(torch.from_numpy(rank)) for rank in lanes]
    assert (
        dq.unpack_pairs(torch.from_numpy(wrapped_sum(words))).numpy().tolist() == lanes.sum(axis=0).tolist()
    )


def test_16_bit_nonfinite_codes_decode_by_kind() -> None:
    """+Inf only: +Inf; -Inf only: -Inf; any NaN, both infinities, or nothing counted: NaN."""
    counts = torch.tensor([[1, 3, 64, 128, 65, 65 + 1, 1 + 64, 0]])
    got = dq.decode_nonfinite16(counts).numpy()[0]
    assert got[0] == got[1] == np.inf and got[2] == got[3] == -np.inf
    assert np.isnan(got[4:]).all()
