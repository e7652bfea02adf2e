"""All-reduce over a tree of switches (two leaves under a spine): exact or loud, whatever the links do.

The hosts are the unchanged engines; the leaves and the spine run the P4 program
(tests/hostlib/tree_fabric.py). Every scenario of docs/protocol.md, *Aggregation trees*:
partial sums up, results down, a lost partial, a lost result on either link, duplicates and
reordering, calls that disagree across leaves, non-finite values from one leaf.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from contracts.protocol import MsgType
from hostlib.calls import AllreduceMismatch, NonFinite
from tests.hostlib.tree_fabric import Hop, TreeFabric, TreeFault


def ints(world: int, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**20), 2**20, size, dtype=np.int32) for _ in range(world)]


def exact_sum(arrays: list[np.ndarray]) -> np.ndarray:
    return np.sum(np.stack(arrays).astype(np.int64), axis=0).astype(np.int32)


def faults(seed: int, links: tuple[str, ...], *, drop: float = 0.0, duplicate: float = 0.0,
           delay: float = 0.0) -> TreeFault:  # fmt: skip
    """Independent per packet on the named links, both ways: loss, duplication, delay (reordering)."""
    rng = random.Random(seed)

    def fault(hop: Hop) -> list[float]:
        if hop.link not in links:
            return [0.0]
        if rng.random() < drop:
            return []
        first = rng.uniform(0.002, 0.03) if rng.random() < delay else 0.0
        if rng.random() < duplicate:
            return [first, first + rng.uniform(0.001, 0.02)]
        return [first]

    return fault


@pytest.mark.parametrize("engine", ["spec", "native"])
def test_each_leaf_sends_one_partial_per_use_and_every_rank_gets_the_exact_sum(engine: str) -> None:
    fabric = TreeFabric(leaves=2, per_leaf=3, pool=16, engine=engine)
    data = ints(6, 40 * 64 + 7, seed=1)
    results = fabric.run(fabric.plans(data))
    assert all(np.array_equal(r, exact_sum(data)) for r in results)
    uses = fabric.spine_counter("MyIngress.job_data_in") // 2
    assert uses == 41  # 40 full chunks and a short one: one partial sum per leaf per use
    up = fabric.hops("spine", upstream=True, msg_type=MsgType.DATA)
    down = fabric.hops("spine", upstream=False, msg_type=MsgType.RESULT)
    assert len(up) == len(down) == 2 * uses  # the spine links carry the tensor once each way, per leaf
    assert all(fabric.leaf_counter(i, "MyIngress.job_data_in") == 3 * uses for i in range(2))


@pytest.mark.parametrize(
    ("links", "engine", "seed"),
    [
        (("worker",), "spec", 1),
        (("spine",), "spec", 2),
        (("worker", "spine"), "spec", 3),
        (("worker", "spine"), "native", 4),
    ],
)
def test_loss_duplication_and_reordering_on_any_link_leave_every_result_exact(
    links: tuple[str, ...], engine: str, seed: int
) -> None:
    fault = faults(seed, links, drop=0.05, duplicate=0.05, delay=0.1)
    fabric = TreeFabric(leaves=2, per_leaf=2, pool=16, engine=engine, fault=fault)
    for call in range(3):
        data = ints(4, 60 * 64, seed=10 * seed + call)
        results = fabric.run(fabric.plans(data))
        assert all(isinstance(r, np.ndarray) for r in results), results
        assert all(np.array_equal(r, exact_sum(data)) for r in results), f"call {call}"
    assert sum(1 for _, _, copies in fabric.log if copies == 0) > 20  # losses really happened


def test_a_partial_lost_on_the_spine_link_is_sent_again_by_its_leaf_not_by_the_workers() -> None:
    """Every fifth partial sum is lost on its way up: the workers ask their leaf, the leaf asks the
    spine, the spine says MISSING, and the leaf sends the partial again from its copy."""

    def lose_partials(hop: Hop) -> list[float]:
        if hop.link == "spine" and hop.upstream and hop.msg_type == MsgType.DATA and hop.number % 5 == 2:
            return []
        return [0.0]

    fabric = TreeFabric(leaves=2, per_leaf=2, pool=16, fault=lose_partials)
    data = ints(4, 50 * 64, seed=5)
    assert all(np.array_equal(r, exact_sum(data)) for r in fabric.run(fabric.plans(data)))
    assert sum(e.stats.retransmissions for e in fabric.engines) == 0, "no worker resends its DATA"
    assert fabric.spine_counter("MyIngress.job_missing") >= 5
    assert fabric.hops("spine", upstream=True, msg_type=MsgType.QUERY), "the leaves asked upstream"


def test_a_result_lost_on_the_spine_link_is_replayed_by_the_spine() -> None:
    def lose_results(hop: Hop) -> list[float]:
        lost = hop.link == "spine" and not hop.upstream and hop.msg_type == MsgType.RESULT
        return [] if lost and hop.number % 4 == 1 else [0.0]

    fabric = TreeFabric(leaves=2, per_leaf=2, pool=16, fault=lose_results)
    data = ints(4, 30 * 64, seed=6)
    assert all(np.array_equal(r, exact_sum(data)) for r in fabric.run(fabric.plans(data)))
    assert fabric.spine_counter("MyIngress.job_replays") >= 5
    assert sum(e.stats.retransmissions for e in fabric.engines) == 0


def test_calls_that_differ_across_leaves_fail_on_every_rank_of_every_leaf_and_the_next_is_exact() -> None:
    fabric = TreeFabric(leaves=2, per_leaf=2, pool=8, fault=faults(7, ("worker", "spine"), drop=0.03))
    rng = np.random.default_rng(7)
    plans = fabric.plans([rng.integers(0, 9, 640, dtype=np.int32) for _ in range(4)])
    plans[3] = fabric.plans([rng.integers(0, 9, 641, dtype=np.int32)])[0]  # rank 3, on leaf 1, disagrees
    results = fabric.run(plans)
    assert all(isinstance(r, AllreduceMismatch) for r in results), results
    fabric.drain(0.1)
    data = ints(4, 900, seed=8)
    assert all(np.array_equal(r, exact_sum(data)) for r in fabric.run(fabric.plans(data)))


def test_a_nan_on_one_leaf_comes_back_in_its_block_on_every_rank_and_floats_agree() -> None:
    fabric = TreeFabric(leaves=2, per_leaf=2, pool=8)
    rng = np.random.default_rng(9)
    inputs = [rng.standard_normal(700).astype(np.float32) for _ in range(4)]
    inputs[3][100] = np.nan
    inputs[0][500] = np.inf
    results = fabric.run(fabric.plans(inputs))
    assert all(r.tobytes() == results[0].tobytes() for r in results), "every rank decodes the same"
    assert np.isnan(results[0][100]) and np.isinf(results[0][500])
    fine = np.ones(700, dtype=bool)
    fine[64:128] = fine[448:512] = False  # the two non-finite blocks (K = 64)
    assert np.allclose(results[0][fine], np.sum(inputs, axis=0)[fine], atol=1e-5)
    raising = fabric.run(fabric.plans(inputs, nonfinite=NonFinite.RAISE))
    assert all("NaN or Inf" in str(r) for r in raising)


def test_the_c_backend_runs_the_tree_as_the_python_one() -> None:
    fault = faults(11, ("worker", "spine"), drop=0.05, duplicate=0.05, delay=0.1)
    fabric = TreeFabric(leaves=2, per_leaf=2, pool=16, backend="c", fault=fault)
    data = ints(4, 20 * 64, seed=11)
    assert all(np.array_equal(r, exact_sum(data)) for r in fabric.run(fabric.plans(data)))
