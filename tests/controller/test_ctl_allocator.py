"""The slot allocator: first fit over the switch's pool, and what it says when a request cannot be met."""

from __future__ import annotations

import pytest

from contracts.protocol import DEFAULT_SLOT_COUNT as SLOT_COUNT
from controller.allocator import SlotAllocator, SlotRange
from controller.errors import JobError, PoolExhausted


def test_first_fit_packs_ranges_from_the_bottom_of_the_pool() -> None:
    pool = SlotAllocator(SLOT_COUNT)
    assert pool.allocate(64) == SlotRange(0, 64)
    assert pool.allocate(10) == SlotRange(64, 10)
    assert pool.capacity == SLOT_COUNT
    assert pool.free_slots() == SLOT_COUNT - 74


def test_a_freed_hole_is_reused_by_the_first_request_that_fits() -> None:
    pool = SlotAllocator(100)
    a, b, c = pool.allocate(30), pool.allocate(30), pool.allocate(30)
    pool.release(b)
    assert pool.allocate(20) == SlotRange(30, 20)  # first fit: the hole, not the tail
    assert pool.allocate(10) == SlotRange(50, 10)
    assert pool.allocate(10) == SlotRange(90, 10)
    assert pool.used() == [a, SlotRange(30, 20), SlotRange(50, 10), c, SlotRange(90, 10)]
    assert pool.free_slots() == 0


def test_fragmentation_is_reported_with_free_count_and_largest_range() -> None:
    pool = SlotAllocator(100)
    ranges = [pool.allocate(10) for _ in range(10)]
    for r in ranges[::2]:  # free every other range: 50 free, none larger than 10
        pool.release(r)
    with pytest.raises(PoolExhausted) as error:
        pool.allocate(11)
    assert str(error.value) == (
        "cannot allocate 11 contiguous slots: 50 of 100 slots are free, "
        "the largest free range is 10 slots (0..9)"
    )


def test_exhaustion_says_nothing_is_free() -> None:
    pool = SlotAllocator(8)
    pool.allocate(8)
    with pytest.raises(PoolExhausted, match="0 of 8 slots are free, the largest free range is 0 slots$"):
        pool.allocate(1)


@pytest.mark.parametrize("size", [0, -1, SLOT_COUNT + 1])
def test_sizes_outside_the_pool_are_refused(size: int) -> None:
    with pytest.raises(JobError, match=f"pool size {size} is outside 1..{SLOT_COUNT}"):
        SlotAllocator(SLOT_COUNT).allocate(size)


def test_reserve_rebuilds_the_state_found_on_a_switch_and_refuses_overlaps() -> None:
    pool = SlotAllocator(100)
    pool.reserve(SlotRange(20, 10))
    assert pool.allocate(20) == SlotRange(0, 20)
    assert pool.allocate(5) == SlotRange(30, 5)
    with pytest.raises(JobError, match="overlaps 20..29"):
        pool.reserve(SlotRange(25, 10))
    with pytest.raises(JobError, match="does not fit"):
        pool.reserve(SlotRange(95, 10))


def test_releasing_an_unknown_range_is_an_error() -> None:
    with pytest.raises(JobError, match="not allocated"):
        SlotAllocator(SLOT_COUNT).release(SlotRange(0, 4))
