"""Job ids: never-used first, a freed id only after its rest, and a refusal that says when."""

from __future__ import annotations

import grpc
import pytest

from contracts.protocol import MAX_JOBS
from controller.errors import PoolExhausted
from controller.job_ids import JobIds


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_never_used_ids_come_first_then_the_longest_rested_after_its_quarantine() -> None:
    clock = Clock()
    ids = JobIds(quarantine=10.0, clock=clock)
    taken = [ids.take() for _ in range(MAX_JOBS - 1)]
    assert taken == list(range(1, MAX_JOBS))
    ids.release(7)
    clock.now += 4
    ids.release(3)
    with pytest.raises(PoolExhausted) as refused:
        ids.take()
    assert refused.value.status == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(refused.value) == (
        "all 1023 job ids are in use or resting after a deletion; the next one is free in 6.0 s"
    )
    clock.now += 6
    assert ids.take() == 7  # rested first, free first
    with pytest.raises(PoolExhausted):
        ids.take()  # 3 rests 4 s more
    clock.now += 4
    assert ids.take() == 3


def test_a_freed_id_waits_even_while_never_used_ones_remain() -> None:
    clock = Clock()
    ids = JobIds(quarantine=10.0, clock=clock)
    first = ids.take()
    ids.release(first)
    assert ids.take() == 2  # not the one just freed


def test_after_a_restart_ids_in_use_are_claimed_and_ids_with_traffic_rest() -> None:
    clock = Clock()
    ids = JobIds(quarantine=10.0, clock=clock)
    ids.claim(1)
    ids.rest(2)  # a deleted job's counters showed packets
    ids.rest(1)  # in use: nothing to rest
    assert ids.take() == 3
    clock.now += 11
    assert [ids.take() for _ in range(MAX_JOBS - 4)][-1] == MAX_JOBS - 1
    assert ids.take() == 2  # rested long enough
