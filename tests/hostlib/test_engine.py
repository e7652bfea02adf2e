"""The packet engine and the Communicator against a reflector standing in for a 1-worker switch.

The reflector answers each DATA with the RESULT a switch would send for a
job of one worker (same header, RESULT type, values and exponent echoed),
and can drop or duplicate answers deterministically, so loss recovery is
tested packet by packet. End-to-end behaviour through the real switch is in
test_through_switch.py.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest

from hostlib import AllreduceTimeout, Communicator, JobSpec
from hostlib.engine import Overtaking
from hostlib.reflector import Reflector


@pytest.fixture
def reflector() -> Iterator[Reflector]:
    with Reflector() as r:
        yield r


def communicator(address: tuple[str, int], pool: int = 8, timeout: float = 5.0) -> Communicator:
    return Communicator(
        JobSpec(job_id=3, world_size=1, pool_size=pool, switch_address=address), 0, progress_timeout=timeout
    )


def test_int32_comes_back_exact_and_state_persists_across_calls(reflector: Reflector) -> None:
    data = np.arange(-5000, 5000, dtype=np.int32) * 65537
    with communicator(reflector.address) as comm:
        assert np.array_equal(comm.allreduce(data), data)
        chunks = -(-data.size // 32)
        assert comm.engine.next_chunk == chunks
        sets_after_one = bytes(comm.engine.next_set)
        assert np.array_equal(comm.allreduce(data), data)
        assert comm.engine.next_chunk == 2 * chunks
        assert bytes(comm.engine.next_set) != sets_after_one or chunks % 16 == 0
        assert comm.stats().packets_sent == 2 * chunks


def test_float32_sum_of_one_worker_is_within_the_bound(reflector: Reflector) -> None:
    data = (np.random.default_rng(1).standard_normal(3000) * 100).astype(np.float32)
    with communicator(reflector.address) as comm:
        result = comm.allreduce(data)
    quantum = 2.0 ** np.ceil(np.log2(np.abs(data).max())) / (2**31 - 1)
    assert result.dtype == np.float32 and np.abs(result - data).max() <= quantum + np.abs(data).max() * 2**-24


def test_lost_answers_are_retransmitted_and_the_result_is_still_exact() -> None:
    data = np.arange(20000, dtype=np.int32)
    with Reflector(drop_every=7) as lossy, communicator(lossy.address) as comm:
        assert np.array_equal(comm.allreduce(data), data)
        stats = comm.stats()
        # Mid-call losses are found by the results that overtake them, not by the timer.
        assert stats.retransmissions > 0 and stats.fast_retransmissions > stats.retransmissions / 2


def sent_in_order(slots: int) -> Overtaking:
    overtaking = Overtaking(slots)
    for slot in range(slots):
        overtaking.sent(slot)
    return overtaking


def test_results_in_send_order_mark_nothing_lost() -> None:
    overtaking = sent_in_order(4)
    for _ in range(3):
        for slot in range(4):
            assert overtaking.answered(slot, first_send=True) == []
            overtaking.sent(slot)  # the slot's next use


def test_a_use_overtaken_by_three_later_results_is_lost_once_until_resent() -> None:
    overtaking = sent_in_order(8)
    assert [overtaking.answered(slot, first_send=True) for slot in (1, 2)] == [[], []]
    assert overtaking.answered(3, first_send=True) == [0]  # the third result sent after slot 0's use
    assert overtaking.answered(4, first_send=True) == []  # reported once
    overtaking.sent(0)  # the resend goes to the back of the order
    assert [overtaking.answered(slot, first_send=True) for slot in (5, 6, 7)] == [
        [],
        [],
        [],
    ]  # sent before it
    for slot in (1, 2, 3):
        overtaking.sent(slot)
    assert [overtaking.answered(slot, first_send=True) for slot in (1, 2, 3)] == [[], [], [0]]  # lost again


def test_every_use_lost_in_one_window_is_found_at_once() -> None:
    overtaking = sent_in_order(8)
    assert [overtaking.answered(slot, first_send=True) for slot in (3, 4)] == [[], []]
    assert overtaking.answered(5, first_send=True) == [0, 1, 2]


def test_results_of_resent_uses_overtake_nothing() -> None:
    # A resend's result may answer the first send, which is older than everything else in flight.
    overtaking = sent_in_order(5)
    overtaking.sent(1)  # slot 1 resent
    assert overtaking.answered(1, first_send=False) == []
    assert [overtaking.answered(slot, first_send=True) for slot in (2, 3)] == [[], []]
    assert overtaking.answered(4, first_send=True) == [0]


def test_a_timeout_backs_off_the_timer_until_a_fresh_sample(reflector: Reflector) -> None:
    # RFC 6298 5.5 and 5.7. Karn's rule keeps retransmitted (slow) uses out of the estimate, so
    # without the back-off a queue building behind a large window keeps the timer below the RTT.
    with communicator(reflector.address) as comm:
        engine = comm.engine
        engine.rto = 0.02
        deadlines, current, overtaking = np.array([0.0, np.inf]), [5, -1], Overtaking(2)
        engine._retransmit(deadlines, [0, 0], current, overtaking, now=1.0)
        assert engine.rto == 0.04 and deadlines[0] == 1.04 and engine.stats.retransmissions == 1
        engine._retransmit(deadlines, [1, 0], current, overtaking, now=1.04)
        assert engine.rto == 0.08 and deadlines[0] == pytest.approx(1.04 + 0.16)  # and per retry of the use
        engine._sample_rtt(0.002)
        assert engine.rto == 0.01  # a valid sample sets it again, here to the floor


def test_steady_round_trips_keep_the_timer_at_three_of_them(reflector: Reflector) -> None:
    # A queue makes round trips steady, so the deviation term vanishes; a use that waits a little
    # longer (behind a peer's recovery) must not be resent for nothing.
    with communicator(reflector.address) as comm:
        engine = comm.engine
        for _ in range(200):
            engine._sample_rtt(0.012)
        assert engine.rto == pytest.approx(0.036)


def test_stats_are_a_snapshot_to_subtract(reflector: Reflector) -> None:
    with communicator(reflector.address) as comm:
        comm.allreduce(np.ones(320, dtype=np.int32))
        before = comm.stats()
        comm.allreduce(np.ones(320, dtype=np.int32))
        after = comm.stats()
        assert (before.packets_sent, after.packets_sent - before.packets_sent) == (10, 10)
        assert (before.calls, after.calls) == (1, 2)


def test_duplicated_answers_are_ignored() -> None:
    data = np.arange(5000, dtype=np.int32)
    with Reflector(duplicate=True) as dup, communicator(dup.address) as comm:
        assert np.array_equal(comm.allreduce(data), data)
        assert np.array_equal(comm.allreduce(data), data)
        assert comm.stats().ignored_results > 0


def test_a_silent_switch_gives_a_clear_timeout_not_a_hang() -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        with communicator(silent.getsockname(), timeout=0.5) as comm:
            started = time.monotonic()
            with pytest.raises(AllreduceTimeout, match=r"no progress for .* unanswered by the switch"):
                comm.allreduce(np.ones(100, dtype=np.int32))
            assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_a_switch_that_is_not_running_is_named_in_the_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()
    with communicator(closed, timeout=0.5) as comm:
        with pytest.raises(AllreduceTimeout, match="ICMP port unreachable"):
            comm.allreduce(np.ones(100, dtype=np.int32))


def test_out_async_float16_and_validation(reflector: Reflector) -> None:
    with communicator(reflector.address) as comm:
        data = np.arange(100, dtype=np.int32).reshape(10, 10)
        out = np.empty_like(data)
        assert comm.allreduce(data, out=out) is out and np.array_equal(out, data)
        handle = comm.allreduce_async(data)
        assert np.array_equal(handle.wait(timeout=10), data)
        half = np.linspace(-2, 2, 50, dtype=np.float16)
        assert comm.allreduce(half).dtype == np.float16
        with pytest.raises(ValueError, match="out must have shape"):
            comm.allreduce(data, out=np.empty(3, dtype=np.int32))
        with pytest.raises(ValueError, match="NaN"):
            comm.allreduce(np.array([np.nan], dtype=np.float32))
    comm.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        comm.allreduce(data)
    with pytest.raises(ValueError, match="rank 1 is outside"):
        Communicator(JobSpec(1, 1, 8, reflector.address), 1)
