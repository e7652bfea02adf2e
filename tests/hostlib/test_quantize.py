"""Block floating point: sums stay inside int32, within the documented error bound, and non-finite
blocks come back as NaN/Inf on every rank (docs/protocol.md, *Quantization*, *Non-finite values*)."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.protocol import EXP_BIAS, EXP_NONFINITE
from hostlib import quantize as q

K = 64


def simulate(workers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """What N workers and the switch compute: agreed exponents, int32 sums, dequantized result."""
    n = len(workers)
    chunks = [q.as_chunks(w.astype(np.float32), K) for w in workers]
    agreed = np.max([q.wire_exponents(c) for c in chunks], axis=0)
    sums = np.zeros(chunks[0].shape, dtype=np.int64)
    for c in chunks:
        quantized = np.stack([q.quantize(c[i], int(agreed[i]), n) for i in range(len(c))]).astype(np.int64)
        sums += quantized
    assert np.abs(sums).max(initial=0) <= 2**31 - 1, "the switch's 32-bit adder would overflow"
    result = q.dequantize(sums.astype(np.int32), agreed, n).reshape(-1)[: workers[0].size]
    bound = np.repeat([q.error_bound(int(e), n) for e in agreed], K)[: workers[0].size]
    return result, bound


@pytest.mark.parametrize("world", [1, 2, 4, 32])
@pytest.mark.parametrize("seed", range(4))
def test_sums_are_within_the_bound_for_mixed_magnitudes(world: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = 1000 + seed * 37  # tails shorter than K
    workers = [
        (rng.standard_normal(size) * 10.0 ** rng.uniform(-8, 8, size)).astype(np.float32)
        for _ in range(world)
    ]
    result, bound = simulate(workers)
    exact = np.sum([w.astype(np.float64) for w in workers], axis=0)
    assert np.all(np.abs(result - exact) <= bound)


def test_extremes_zeros_subnormals_and_largest_carried_values() -> None:
    tiny = np.float32(1e-45)
    big = np.float32(2.0**125 * 1.5)  # below 2^126, the largest magnitude the wire carries
    # 1.0 shares no block with `big`: precision is relative to the largest magnitude of the block
    workers = [np.array([0, tiny, -tiny, big, -big] + [0] * (K - 5) + [1.0] + [0] * 40, dtype=np.float32)] * 4
    result, bound = simulate(workers)
    exact = np.sum([w.astype(np.float64) for w in workers], axis=0)
    assert np.all(np.abs(result - exact) <= bound)
    assert result[0] == 0.0 and result[K] == pytest.approx(4.0, rel=1e-6)


def test_wire_exponent_is_the_smallest_strict_power_of_two_bound() -> None:
    rows = [[0.0] * K, [1.0] + [0] * (K - 1), [0.75] + [0] * (K - 1), [-3.0] + [0] * (K - 1)]
    assert (q.wire_exponents(np.array(rows, dtype=np.float32)) - EXP_BIAS).tolist() == [
        q.ZERO_EXPONENT,
        1,
        0,
        2,
    ]


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 2.0**126, -(2.0**127)])
def test_a_non_finite_or_overflowing_block_announces_the_reserved_exponent(value: float) -> None:
    chunk = np.zeros((2, K), dtype=np.float32)
    chunk[1, 7] = value
    assert q.wire_exponents(chunk).tolist() == [q.ZERO_EXPONENT + EXP_BIAS, EXP_NONFINITE]


def test_summed_codes_decode_to_what_a_float_sum_would_give() -> None:
    ranks = [
        np.array([np.inf, np.inf, np.nan, 1.0, np.inf, 2.0**127], dtype=np.float32),
        np.array([1.0, -np.inf, 1.0, 2.0, np.inf, 1.0], dtype=np.float32),
        np.array([2.0, 0.0, 3.0, 3.0, -1.0, 1.0], dtype=np.float32),
    ]
    sums = np.sum([q.nonfinite_codes(r).astype(np.int64) for r in ranks], axis=0).astype(">i4")
    decoded = q.decode_nonfinite(sums)
    assert decoded[0] == np.inf and decoded[4] == np.inf and decoded[5] == np.inf  # one sign: ±Inf
    assert np.isnan(decoded[1]) and np.isnan(decoded[2])  # both signs, or a NaN: NaN
    assert np.isnan(decoded[3]), "finite elements of a non-finite block are not carried"
    assert q.error_bound(EXP_NONFINITE, 3) == np.inf


def test_dequantize_mixes_finite_and_non_finite_blocks() -> None:
    finite = q.quantize(np.ones(K, dtype=np.float32), 1 + EXP_BIAS, 2).astype(np.int64) * 2
    codes = q.nonfinite_codes(np.full(K, -np.inf, dtype=np.float32)).astype(np.int64)
    sums = np.stack([finite, codes]).astype(">i4")
    out = q.dequantize(sums, np.array([1 + EXP_BIAS, EXP_NONFINITE]), 2)
    assert np.allclose(out[0], 2.0) and np.all(out[1] == -np.inf)


# ------------------------------------------------------------------------------------------ 16 bits


def simulate16(workers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """simulate() at 16 bits: 2K values per chunk, two per word, summed by a 32-bit wrapping adder."""
    n, block = len(workers), 2 * K
    chunks = [q.as_chunks(w.astype(np.float32), block) for w in workers]
    agreed = np.max([q.wire_exponents(c) for c in chunks], axis=0)
    lane_sums = np.zeros(chunks[0].shape, dtype=np.int64)
    words = np.zeros((len(agreed), K), dtype=np.int64)
    for c in chunks:
        for i in range(len(c)):
            wire = q.quantize(c[i], int(agreed[i]), n, bits=16)
            assert wire.shape == (K,) and wire.dtype == np.dtype(">i4")
            words[i] += wire.astype(np.int64)
            if agreed[i] != EXP_NONFINITE:
                scaled = c[i].astype(np.float64) * q.scale(int(agreed[i]) - EXP_BIAS, n, 16)
                lane_sums[i] += np.rint(scaled).astype(np.int64)
    assert np.abs(lane_sums).max(initial=0) <= 2**15 - 1, "a lane's sum would leave int16"
    wrapped = ((words + 2**31) % 2**32 - 2**31).astype(">i4")  # the switch's adder
    finite = agreed != EXP_NONFINITE
    assert np.array_equal(q.unpack_pairs(wrapped)[finite], lane_sums[finite]), "the adder added the lanes"
    result = q.dequantize(wrapped, agreed, n, bits=16).reshape(-1)[: workers[0].size]
    bound = np.repeat([q.error_bound(int(e), n, 16) for e in agreed], block)[: workers[0].size]
    return result, bound


def adversarial_blocks(rng: np.random.Generator, world: int) -> list[np.ndarray]:
    """Per rank, blocks built to hurt: one large value among small ones, mixed signs that cancel,
    subnormals, the largest carried magnitudes, and all-equal values at the top of their binade."""
    size = 9 * 2 * K + 11
    ranks = []
    for r in range(world):
        x = rng.standard_normal(size) * 1e-3
        x[5] = 1e3 * (-1) ** r  # one large value, opposite signs across ranks
        x[2 * K : 4 * K] = (-1.0) ** np.arange(2 * K) * (1 - 2.0**-24)  # just below a power of two
        x[4 * K : 6 * K] = rng.choice([1e-45, -1e-45, 1e-40, 0.0], 2 * K)  # subnormals
        x[6 * K] = 2.0**125 * 1.9 * (-1) ** r  # near the largest magnitude the wire carries
        x[8 * K : 9 * K] = 0.0
        ranks.append(x.astype(np.float32))
    return ranks


@pytest.mark.parametrize("world", [1, 2, 3, 4, 32])
@pytest.mark.parametrize("seed", range(3))
def test_16_bit_sums_are_within_their_bound_on_adversarial_blocks(world: int, seed: int) -> None:
    """|error| <= N * 2^E / (2 * floor((2^15 - 1) / N)) per element (docs/protocol.md, *Wire formats*)."""
    rng = np.random.default_rng(seed)
    for workers in (
        adversarial_blocks(rng, world),
        [(rng.standard_normal(3000) * 10.0 ** rng.uniform(-8, 8, 3000)).astype(np.float32)] * world,
    ):
        result, bound = simulate16(workers)
        exact = np.sum([w.astype(np.float64) for w in workers], axis=0)
        assert np.all(np.abs(result - exact) <= bound)


def test_16_bit_lanes_survive_every_carry_and_borrow_of_the_32_bit_adder() -> None:
    """Any lane sums inside int16, made of any addends: the wrapped word sum unpacks to them exactly."""
    rng = np.random.default_rng(7)
    world = 4
    limit = q.levels(world, 16)
    addends = rng.integers(-limit, limit + 1, size=(world, 4096))
    addends[:, :8] = [[limit, -limit, -1, 1, 0, -limit, limit, -1]] * world  # the extremes, every sign
    words = np.sum([q.pack_pairs(a.astype(np.int32)).astype(np.int64) for a in addends], axis=0)
    wrapped = ((words + 2**31) % 2**32 - 2**31).astype(">i4")
    assert np.array_equal(q.unpack_pairs(wrapped[None])[0], addends.sum(axis=0))


def test_16_bit_codes_decode_as_the_32_bit_ones_do() -> None:
    ranks = [
        np.array([np.inf, np.inf, np.nan, 1.0, np.inf, 2.0**127, -np.inf, 0.0], dtype=np.float32),
        np.array([1.0, -np.inf, 1.0, 2.0, np.inf, 1.0, -np.inf, 0.0], dtype=np.float32),
        np.array([2.0, 0.0, 3.0, 3.0, -1.0, 1.0, -(2.0**126), 0.0], dtype=np.float32),
    ]
    wide = np.sum([q.nonfinite_codes(r).astype(np.int64) for r in ranks], axis=0).astype(">i4")
    narrow = np.sum([q.nonfinite_codes(r, 16).astype(np.int64) for r in ranks], axis=0)
    assert np.array_equal(q.decode_nonfinite(narrow, 16), q.decode_nonfinite(wide), equal_nan=True)
    everyone = np.sum([q.nonfinite_codes(np.array([np.nan]), 16)] * 32)  # 32 ranks, all NaN: no overflow
    assert everyone < 2**15 and np.isnan(q.decode_nonfinite(np.array([everyone]), 16)[0])
