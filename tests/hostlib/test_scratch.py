"""The input copies of asynchronous calls: kept by size and handed to the next call, never a fresh buffer
per call (a fresh buffer is fresh pages, zeroed by the kernel on first touch: docs/performance.md)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from hostlib import Communicator, JobSpec
from hostlib.calls import AllreduceError
from hostlib.reflector import Reflector
from hostlib.scratch import ScratchPool


def test_a_buffer_given_back_is_the_next_take_of_its_size() -> None:
    pool = ScratchPool()
    first = pool.take(4096)
    pool.give(first)
    assert pool.kept_bytes == 4096
    other = pool.take(1024)  # another size: a new buffer
    assert not np.shares_memory(other, first) and other.nbytes == 1024
    again = pool.take(4096)
    assert np.shares_memory(again, first) and pool.kept_bytes == 0


def test_a_copy_has_the_arrays_values_and_dtype_flat() -> None:
    pool = ScratchPool()
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T  # strided: the copy is C-contiguous
    copy = pool.copy(array)
    assert copy.dtype == np.float32 and copy.flags.c_contiguous
    assert np.array_equal(copy, array.reshape(-1))
    pool.give(copy)
    reused = pool.copy(np.ones(6, dtype=np.int64))  # the same 48 bytes, another dtype
    assert np.shares_memory(reused, copy) and reused.dtype == np.int64 and np.all(reused == 1)


def test_the_pool_keeps_at_most_its_limit_letting_the_oldest_go() -> None:
    pool = ScratchPool(limit=10_000)
    buffers = [pool.take(4000) for _ in range(3)]
    for buffer in buffers:
        pool.give(buffer)
    assert pool.kept_bytes == 8000  # the third pushed the first out
    taken = [pool.take(4000), pool.take(4000)]
    assert {b.ctypes.data for b in taken} == {buffers[1].ctypes.data, buffers[2].ctypes.data}
    pool.give(np.empty(20_000, dtype=np.uint8))  # larger than the limit: not kept
    assert pool.kept_bytes == 0


@pytest.fixture
def reflector() -> Iterator[Reflector]:
    with Reflector() as r:
        yield r


def one_rank(reflector: Reflector) -> Communicator:
    return Communicator(JobSpec(1, 1, 8, reflector.address, 64, 0), 0, progress_timeout=5)


def test_an_async_call_copies_its_input_into_a_buffer_the_next_call_reuses(reflector: Reflector) -> None:
    with one_rank(reflector) as comm:
        data = np.arange(1000, dtype=np.int32)
        handle = comm.allreduce_async(data)
        data[:] = -1  # the caller may reuse its array at once: the call reads its copy
        assert np.array_equal(handle.wait(10), np.arange(1000, dtype=np.int32))
        assert comm.scratch.kept_bytes == data.nbytes  # given back when the call ended
        # In place (out is the input): the input is copied too, into the same kept buffer.
        assert comm.allreduce_async(data, data).wait(10) is data and np.all(data == -1)
        assert comm.scratch.kept_bytes == data.nbytes


def test_a_call_reads_its_input_in_place_when_out_is_the_input_and_copies_it_when_out_overlaps_otherwise(
    reflector: Reflector,
) -> None:
    with one_rank(reflector) as comm:
        data = np.arange(1000, dtype=np.int32)
        assert comm.allreduce(data, out=data) is data and np.array_equal(data, np.arange(1000))
        assert comm.allreduce_async(data, data, copy=False).wait(10) is data  # the caller promises to wait
        assert np.array_equal(data, np.arange(1000)) and comm.scratch.kept_bytes == 0  # neither copied it
        # out one element on from the input: a block's result would land on the next block's input
        buffer = np.arange(1001, dtype=np.int32)
        assert np.array_equal(comm.allreduce(buffer[:-1], out=buffer[1:]), np.arange(1000))
        assert comm.scratch.kept_bytes == 4000


def test_a_call_that_fails_gives_its_copy_back_too() -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        spec = JobSpec(1, 1, 8, silent.getsockname(), 64, 0)
        with Communicator(spec, 0, progress_timeout=0.3) as comm:
            with pytest.raises(AllreduceError):
                comm.allreduce_async(np.ones(300, dtype=np.float32)).wait(10)
            assert comm.scratch.kept_bytes == 1200
