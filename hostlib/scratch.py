"""`ScratchPool`: the input copies of a communicator's calls, kept for the next call of the same size.

An asynchronous all-reduce copies its input before it returns, so that the
caller may reuse its array at once. Taking a fresh buffer for each copy is
what made a DDP step slow: a fresh allocation of megabytes is fresh pages,
and the kernel zeroes every page on first touch. On a virtual machine whose
guest hands freed pages back to the host (virtio free page reporting), each
of those first touches is also a fault on the host: measured on this
project's 2-core machine, page zeroing was 60 % of a training rank's CPU
in the steps that took 0.6 s instead of 0.2 s (docs/performance.md, *A
bandwidth-bound DDP step*). Training calls the same sizes step after step
(DDP's buckets, FSDP's shards), so a buffer handed back when its call ends
is the next call's copy, already in memory.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["DEFAULT_LIMIT", "ScratchPool"]

DEFAULT_LIMIT = 256 << 20  # bytes kept between calls, at most


class ScratchPool:
    """Byte buffers by size. `take` hands out one (kept or new), `give` hands it back; what is given back
    beyond `limit` bytes in all is let go, the oldest first. Thread-safe: a call's copy is taken on the
    caller's thread and given back on the communicator's."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._free: list[np.ndarray] = []  # oldest first
        self._kept = 0  # bytes in _free
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A uint8 buffer of exactly `nbytes`, its contents whatever they were."""
        with self._lock:
            for at in range(len(self._free) - 1, -1, -1):  # the most recently given back first
                if self._free[at].nbytes == nbytes:
                    self._kept -= nbytes
                    return self._free.pop(at)
        return np.empty(nbytes, dtype=np.uint8)

    def give(self, buffer: np.ndarray) -> None:
        if buffer.nbytes > self.limit:
            return
        with self._lock:
            self._free.append(buffer.reshape(-1).view(np.uint8))
            self._kept += buffer.nbytes
            while self._kept > self.limit:
                self._kept -= self._free.pop(0).nbytes

    @property
    def kept_bytes(self) -> int:
        return self._kept

    def copy(self, array: np.ndarray) -> np.ndarray:
        """A flat, C-contiguous copy of `array` (same dtype) in a buffer of the pool."""
        flat = self.take(array.nbytes).view(array.dtype)
        np.copyto(flat, array.reshape(-1))
        return flat
