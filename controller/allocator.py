"""First-fit allocation of contiguous slot ranges from a switch's slot pool.

Every job owns `pool_size` contiguous slots `[base, base + pool_size)` of the
switch-wide pool of SLOT_COUNT slots, a compile-time parameter of the P4
program that the controller reads from its P4Info (docs/protocol.md). First
fit keeps the low end dense and is what SwitchML does; ranges are few (one
per job), so a sorted list is all the structure needed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import grpc

from controller.errors import JobError, PoolExhausted


@dataclass(frozen=True, order=True)
class SlotRange:
    base: int
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size

    def __str__(self) -> str:
        return f"{self.base}..{self.end - 1}"


class SlotAllocator:
    """The used ranges of one switch's pool, kept sorted by base."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._used: list[SlotRange] = []

    def allocate(self, size: int) -> SlotRange:
        """The lowest free range of `size` slots; PoolExhausted says what is left when none fits."""
        if not 1 <= size <= self.capacity:
            raise JobError(
                f"pool size {size} is outside 1..{self.capacity}", grpc.StatusCode.INVALID_ARGUMENT
            )
        for gap in self.free_ranges():
            if gap.size >= size:
                taken = SlotRange(gap.base, size)
                bisect.insort(self._used, taken)
                return taken
        largest = self.largest_free()
        where = f" ({largest})" if largest.size else ""
        raise PoolExhausted(
            f"cannot allocate {size} contiguous slots: {self.free_slots()} of {self.capacity} slots "
            f"are free, the largest free range is {largest.size} slots{where}"
        )

    def reserve(self, taken: SlotRange) -> None:
        """Mark a range found on the switch as used (controller restart); overlaps are refused."""
        if taken.base < 0 or taken.size < 1 or taken.end > self.capacity:
            raise JobError(f"slot range {taken} does not fit the pool of {self.capacity} slots")
        for used in self._used:
            if used.base < taken.end and taken.base < used.end:
                raise JobError(f"slot range {taken} overlaps {used}, which is already in use")
        bisect.insort(self._used, taken)

    def release(self, taken: SlotRange) -> None:
        try:
            self._used.remove(taken)
        except ValueError:
            raise JobError(f"slot range {taken} is not allocated") from None

    def used(self) -> list[SlotRange]:
        return list(self._used)

    def free_ranges(self) -> list[SlotRange]:
        gaps, cursor = [], 0
        for used in self._used:
            if used.base > cursor:
                gaps.append(SlotRange(cursor, used.base - cursor))
            cursor = used.end
        if cursor < self.capacity:
            gaps.append(SlotRange(cursor, self.capacity - cursor))
        return gaps

    def free_slots(self) -> int:
        return self.capacity - sum(r.size for r in self._used)

    def largest_free(self) -> SlotRange:
        return max(self.free_ranges(), key=lambda r: r.size, default=SlotRange(0, 0))
