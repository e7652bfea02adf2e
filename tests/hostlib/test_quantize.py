"""Block floating point: sums stay inside int32 and within the documented error bound."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import quantize as q

K = 32


def simulate(workers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """What N workers and the switch compute: agreed exponents, int32 sums, dequantized result."""
    n = len(workers)
    chunks = [q.as_chunks(w.astype(np.float32)) for w in workers]
    agreed = np.max([q.local_exponents(c) for c in chunks], axis=0)
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


def test_extremes_zeros_subnormals_and_largest_values() -> None:
    tiny = np.float32(1e-45)
    big = np.float32(2.0**126 * 1.5)
    # 1.0 shares no block with `big`: precision is relative to the largest magnitude of the block
    workers = [np.array([0, tiny, -tiny, big, -big] + [0] * 27 + [1.0] + [0] * 40, dtype=np.float32)] * 4
    result, bound = simulate(workers)
    exact = np.sum([w.astype(np.float64) for w in workers], axis=0)
    assert np.all(np.abs(result - exact) <= bound)
    assert result[0] == 0.0 and result[32] == pytest.approx(4.0, rel=1e-6)


def test_local_exponent_is_the_smallest_strict_power_of_two_bound() -> None:
    chunks = np.array([[0.0] * K, [1.0] + [0] * 31, [0.75] + [0] * 31, [-3.0] + [0] * 31], dtype=np.float32)
    assert q.local_exponents(chunks).tolist() == [q.ZERO_EXPONENT, 1, 0, 2]


def test_non_finite_inputs_are_refused_before_sending() -> None:
    bad = np.ones(100, dtype=np.float32)
    bad[[17, 40]] = [np.nan, np.inf]
    with pytest.raises(ValueError, match=r"2 NaN/Inf value\(s\), the first at flat index 17"):
        q.check_input(bad)


def test_unsupported_dtypes_and_huge_magnitudes_are_refused() -> None:
    with pytest.raises(TypeError, match="float64"):
        q.check_input(np.zeros(3, dtype=np.float64))
    with pytest.raises(ValueError, match="2\\^127"):
        q.check_input(np.array([3e38], dtype=np.float32))
    q.check_input(np.zeros(3, dtype=np.int32))
    q.check_input(np.zeros(3, dtype=np.float16))
