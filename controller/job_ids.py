"""Job ids 1..MAX_JOBS-1, recycled only after a quarantine.

A deleted job's id must not name another job while a packet of the old one
may still be on its way. Protocol version 2 already makes such a packet
harmless (a reused id comes with a new epoch, so clean slots, and new keys,
so the old job's packets are refused as BAD_KEY), and the quarantine adds
time on top: a freed id is handed out again only `quarantine` seconds after
its job was deleted, never-used ids first, then the longest-freed. A burst
of create+delete pairs therefore exhausts the ids for at most `quarantine`
seconds instead of until the daemon restarts.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable

from contracts.protocol import MAX_JOBS
from controller.errors import PoolExhausted


class JobIds:
    def __init__(self, quarantine: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.quarantine = quarantine
        self._now = clock
        self._fresh = list(range(1, MAX_JOBS))  # a heap: never used on this switch
        self._freed: deque[tuple[float, int]] = deque()  # (free again at, id), oldest first
        self._used: set[int] = set()

    def take(self) -> int:
        """The lowest never-used id, else the longest-freed one whose quarantine is over."""
        if self._fresh:
            job_id = heapq.heappop(self._fresh)
        elif self._freed and self._freed[0][0] <= self._now():
            job_id = self._freed.popleft()[1]
        else:
            raise PoolExhausted(self._exhausted())
        self._used.add(job_id)
        return job_id

    def release(self, job_id: int) -> None:
        """The job is deleted: its id rests for `quarantine` seconds."""
        self._used.discard(job_id)
        self._freed.append((self._now() + self.quarantine, job_id))

    def claim(self, job_id: int) -> None:
        """An id found in use on the switch (recovery after a restart)."""
        self._forget(job_id)
        self._used.add(job_id)

    def rest(self, job_id: int) -> None:
        """An id some past job used (its counters show traffic): quarantined from now on."""
        if job_id in self._used:
            return
        self._forget(job_id)
        self._freed.append((self._now() + self.quarantine, job_id))

    def _forget(self, job_id: int) -> None:
        if job_id in self._fresh:
            self._fresh.remove(job_id)
            heapq.heapify(self._fresh)
        self._freed = deque(item for item in self._freed if item[1] != job_id)

    def _exhausted(self) -> str:
        message = f"all {MAX_JOBS - 1} job ids are in use or resting after a deletion"
        if self._freed:
            wait = max(self._freed[0][0] - self._now(), 0.0)
            return f"{message}; the next one is free in {wait:.1f} s"
        return f"{message}; delete a job first"
