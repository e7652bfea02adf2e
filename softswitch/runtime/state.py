"""Runtime state of a loaded P4 program: tables, registers, counters, multicast.

This is the contract between the two halves of the embedded switch: the
P4Runtime server (`softswitch.p4runtime.server`) writes and reads it by P4Info id,
and the compiled pipeline (a backend under `softswitch.backends`) looks entries up and
updates registers and counters while packets flow. All values are plain
Python ints (unsigned, already masked to the field's width); the server
converts P4Runtime bytestrings at the boundary so the packet path never does.

Lookups are tuned for the Python backend's packet path: a table whose keys
are all `exact` is a dict; any other table is a list kept sorted
best-match-first and scanned with precomputed (value, mask) pairs.

A backend that keeps its own (native) copy binds it here, so that the
server's contract does not change: a table's `mirror` is told of every
insert, modify, delete and default action before the call returns; a
register's `values`, a counter's `packets`/`bytes` and an entry's direct
counter `cell` may be views of the backend's memory (any mutable sequence
of ints); `PacketReplication.mirror` is told of every group change. Writes
take effect at once and reads come back from the backend's memory.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence
from dataclasses import dataclass, field
from typing import Protocol

EXACT = "exact"
LPM = "lpm"
TERNARY = "ternary"
OPTIONAL = "optional"
RANGE = "range"
MATCH_KINDS = (EXACT, LPM, TERNARY, OPTIONAL, RANGE)

# One field of a table key as the server stores it:
#   exact, optional (set): value
#   lpm:                   (value, prefix_len)
#   ternary:               (value, mask)
#   range:                 (low, high)
#   optional (wildcard), or a ternary/lpm/range field left out: None
FieldMatch = int | tuple[int, int] | None


class StateError(Exception):
    """A runtime-state operation the P4Runtime spec forbids.

    `code` is the canonical gRPC status name the server must answer with
    (e.g. "ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT",
    "RESOURCE_EXHAUSTED", "OUT_OF_RANGE").
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ActionCall:
    """An action with its directionless arguments, as an entry stores it."""

    action_id: int
    args: tuple[int, ...] = ()


@dataclass(slots=True)
class KeyField:
    name: str
    kind: str
    width: int


class Entry:
    """One table entry. `packets`/`bytes` are its direct counter, if any, kept in `cell`."""

    __slots__ = ("match", "priority", "action", "metadata", "is_const", "cell", "handle", "_tests", "_rank")

    def __init__(
        self,
        match: tuple[FieldMatch, ...],
        priority: int,
        action: ActionCall,
        metadata: bytes = b"",
        is_const: bool = False,
        packets: int = 0,
        bytes: int = 0,  # noqa: A002 - the P4Runtime name
    ) -> None:
        self.match = match
        self.priority = priority
        self.action = action
        self.metadata = metadata
        self.is_const = is_const
        # The direct counter [packets, bytes]: a list, or a view of a backend's memory while bound.
        self.cell: MutableSequence[int] = [packets, bytes]
        self.handle = -1  # where a mirror keeps this entry (-1: not bound)
        # Precomputed for the scan: per field (value, mask) or a (low, high) range.
        self._tests: tuple[tuple[str, int, int], ...] = ()
        self._rank: tuple[int, int] = (0, 0)

    @property
    def packets(self) -> int:
        return self.cell[0]

    @packets.setter
    def packets(self, value: int) -> None:
        self.cell[0] = value

    @property
    def bytes(self) -> int:
        return self.cell[1]

    @bytes.setter
    def bytes(self, value: int) -> None:
        self.cell[1] = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return self._identity() == other._identity()

    __hash__ = None  # type: ignore[assignment]

    def _identity(self) -> tuple[object, ...]:
        counts = (self.packets, self.bytes)
        return (self.match, self.priority, self.action, self.metadata, self.is_const, *counts)

    def __repr__(self) -> str:
        return (
            f"Entry(match={self.match!r}, priority={self.priority}, action={self.action!r}, "
            f"packets={self.packets}, bytes={self.bytes})"
        )


class TableMirror(Protocol):
    """A backend's own copy of a table, kept equal to it (softswitch.backends.c.state)."""

    def add(self, entry: Entry) -> None:
        """Hold `entry` (raises StateError when it cannot); may bind `entry.cell` and `entry.handle`."""
        ...

    def update(self, entry: Entry) -> None: ...

    def remove(self, entry: Entry) -> None:
        """Forget `entry`; a bound `entry.cell` must become a plain list again."""
        ...

    def set_default(self, action: ActionCall) -> None: ...


def _full(width: int) -> int:
    return (1 << width) - 1


def _prefix_mask(width: int, prefix_len: int) -> int:
    return _full(width) ^ _full(width - prefix_len)


class Table:
    """A match-action table: entries, default action, lookup."""

    def __init__(
        self,
        table_id: int,
        name: str,
        keys: list[KeyField],
        size: int,
        default_action: ActionCall,
        default_is_const: bool = False,
        has_direct_counter: bool = False,
    ) -> None:
        self.id = table_id
        self.name = name
        self.keys = keys
        self.size = size
        self.mirror: TableMirror | None = None
        self._default_action = default_action
        self.initial_default_action = default_action
        self.default_is_const = default_is_const
        self.has_direct_counter = has_direct_counter
        self.default_packets = 0
        self.default_bytes = 0
        self.all_exact = all(k.kind == EXACT for k in keys)
        self.needs_priority = any(k.kind in (TERNARY, RANGE, OPTIONAL) for k in keys)
        self._entries: dict[tuple[tuple[FieldMatch, ...], int], Entry] = {}
        self._exact: dict[tuple[int, ...], Entry] = {}
        self._scan: list[Entry] = []

    @property
    def default_action(self) -> ActionCall:
        return self._default_action

    @default_action.setter
    def default_action(self, action: ActionCall) -> None:
        if self.mirror is not None:
            self.mirror.set_default(action)
        self._default_action = action

    def bind(self, mirror: TableMirror) -> None:
        """Let a backend's copy follow this table from now on, starting with what it holds."""
        for entry in self._entries.values():
            mirror.add(entry)
        mirror.set_default(self._default_action)
        self.mirror = mirror

    # ----------------------------------------------------------- packet path
    def lookup(self, key: tuple[int, ...]) -> Entry | None:
        """Return the best-matching entry for the key values, or None (miss)."""
        if self.all_exact:
            return self._exact.get(key)
        for entry in self._scan:
            for (kind, a, b), value in zip(entry._tests, key):
                if kind == "m":
                    if value & b != a:
                        break
                elif not a <= value <= b:
                    break
            else:
                return entry
        return None

    # ---------------------------------------------------------- control path
    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def find(self, match: tuple[FieldMatch, ...], priority: int) -> Entry | None:
        return self._entries.get((match, priority if self.needs_priority else 0))

    def insert(self, entry: Entry) -> None:
        self._check(entry)
        ident = (entry.match, entry.priority)
        if ident in self._entries:
            raise StateError("ALREADY_EXISTS", f"{self.name}: entry already exists")
        if len(self._entries) >= self.size:
            raise StateError("RESOURCE_EXHAUSTED", f"{self.name}: table is full ({self.size} entries)")
        self._prepare(entry)
        if self.mirror is not None:
            self.mirror.add(entry)
        self._entries[ident] = entry
        self._reindex()

    def modify(
        self, match: tuple[FieldMatch, ...], priority: int, action: ActionCall, metadata: bytes
    ) -> Entry:
        entry = self._existing(match, priority)
        entry.action = action
        entry.metadata = metadata
        if self.mirror is not None:
            self.mirror.update(entry)
        return entry

    def delete(self, match: tuple[FieldMatch, ...], priority: int) -> Entry:
        entry = self._existing(match, priority)
        del self._entries[(entry.match, entry.priority)]
        if self.mirror is not None:
            self.mirror.remove(entry)
        self._reindex()
        return entry

    def clear(self) -> None:
        """Remove all non-const entries and restore the initial default action."""
        if self.mirror is not None:
            for entry in self._entries.values():
                if not entry.is_const:
                    self.mirror.remove(entry)
        self._entries = {k: e for k, e in self._entries.items() if e.is_const}
        self.default_action = self.initial_default_action
        self._reindex()

    def _existing(self, match: tuple[FieldMatch, ...], priority: int) -> Entry:
        entry = self.find(match, priority)
        if entry is None:
            raise StateError("NOT_FOUND", f"{self.name}: no such entry")
        if entry.is_const:
            raise StateError("PERMISSION_DENIED", f"{self.name}: const entries cannot be changed")
        return entry

    def _check(self, entry: Entry) -> None:
        if len(entry.match) != len(self.keys):
            raise StateError("INVALID_ARGUMENT", f"{self.name}: expected {len(self.keys)} match fields")
        if self.needs_priority and entry.priority <= 0:
            raise StateError("INVALID_ARGUMENT", f"{self.name}: entries need a priority > 0")
        if not self.needs_priority and entry.priority != 0:
            raise StateError("INVALID_ARGUMENT", f"{self.name}: priority must be 0 for this table")
        for key, m in zip(self.keys, entry.match):
            top = _full(key.width)
            if m is None:
                if key.kind == EXACT:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}: exact field {key.name} is required")
                continue
            if key.kind in (EXACT, OPTIONAL):
                if not isinstance(m, int) or not 0 <= m <= top:
                    raise StateError(
                        "INVALID_ARGUMENT", f"{self.name}: {key.name} out of range for bit<{key.width}>"
                    )
            elif key.kind == LPM:
                value, plen = m  # type: ignore[misc]
                if not 0 < plen <= key.width or value & ~_prefix_mask(key.width, plen) or value > top:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}: bad lpm match on {key.name}")
            elif key.kind == TERNARY:
                value, mask = m  # type: ignore[misc]
                if mask == 0 or value & ~mask or mask > top or value > top:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}: bad ternary match on {key.name}")
            elif key.kind == RANGE:
                low, high = m  # type: ignore[misc]
                if not 0 <= low <= high <= top:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}: bad range match on {key.name}")

    def _prepare(self, entry: Entry) -> None:
        tests: list[tuple[str, int, int]] = []
        prefix = 0
        for key, m in zip(self.keys, entry.match):
            if m is None:
                tests.append(("m", 0, 0))
            elif key.kind in (EXACT, OPTIONAL):
                tests.append(("m", m, _full(key.width)))  # type: ignore[arg-type]
            elif key.kind == LPM:
                value, plen = m  # type: ignore[misc]
                prefix = plen
                tests.append(("m", value, _prefix_mask(key.width, plen)))
            elif key.kind == TERNARY:
                value, mask = m  # type: ignore[misc]
                tests.append(("m", value, mask))
            else:
                low, high = m  # type: ignore[misc]
                tests.append(("r", low, high))
        entry._tests = tuple(tests)
        entry._rank = (entry.priority, prefix)

    def _reindex(self) -> None:
        if self.all_exact:
            self._exact = {tuple(e.match): e for e in self._entries.values()}  # type: ignore[misc]
        else:
            # Highest priority first; for lpm tables longest prefix first.
            self._scan = sorted(self._entries.values(), key=lambda e: e._rank, reverse=True)


@dataclass(slots=True)
class Register:
    id: int
    name: str
    width: int
    size: int
    values: MutableSequence[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.values:
            self.values = [0] * self.size

    def reset(self) -> None:
        self.values[:] = [0] * self.size


@dataclass(slots=True)
class Counter:
    """An indexed counter array; `unit` is "packets", "bytes" or "both"."""

    id: int
    name: str
    unit: str
    size: int
    packets: MutableSequence[int] = field(default_factory=list)
    bytes: MutableSequence[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.packets:
            self.packets = [0] * self.size
            self.bytes = [0] * self.size

    def count(self, index: int, length: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += length


@dataclass(frozen=True, slots=True)
class Replica:
    port: int
    rid: int
    # How a P4Runtime client named the port, so a read answers in kind: 0 = the
    # `egress_port` number, N = the `port` bytestring of N bytes. Not part of identity.
    port_bytes: int = field(default=0, compare=False)


Replicas = tuple[Replica, ...]


class GroupMirror(Protocol):
    """A backend's own copy of the multicast groups and clone sessions."""

    def set_group(self, group: int, replicas: Replicas) -> None:
        """Replace a group's replicas; () deletes it."""
        ...

    def set_clone_session(self, session: int, replicas: Replicas) -> None:
        """Replace a clone session's replicas; () deletes it."""
        ...


class _Groups(dict[int, Replicas]):
    """Multicast groups or clone sessions; every change is also made in the backend's copy, if bound."""

    def __init__(self, owner: PacketReplication, sessions: bool = False) -> None:
        super().__init__()
        self._owner = owner
        self._sessions = sessions

    def _mirror(self, group: int, replicas: Replicas) -> None:
        mirror = self._owner.mirror
        if mirror is not None:
            (mirror.set_clone_session if self._sessions else mirror.set_group)(group, replicas)

    def __setitem__(self, group: int, replicas: Replicas) -> None:
        self._mirror(group, replicas)
        super().__setitem__(group, replicas)

    def __delitem__(self, group: int) -> None:
        super().__delitem__(group)
        self._mirror(group, ())

    def clear(self) -> None:
        for group in list(self):
            del self[group]

    def pop(self, group: int, *default: Replicas) -> Replicas:  # type: ignore[override]
        if group not in self:
            if default:
                return default[0]
            raise KeyError(group)
        value = self[group]
        del self[group]
        return value

    def update(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():  # type: ignore[call-overload]
            self[key] = value

    def setdefault(self, group: int, default: Replicas = ()) -> Replicas:  # type: ignore[override]
        if group not in self:
            self[group] = default
        return self[group]

    def popitem(self) -> tuple[int, Replicas]:
        group = next(reversed(self))
        return group, self.pop(group)


class PacketReplication:
    """Multicast groups and clone sessions (the v1model traffic manager's tables)."""

    def __init__(self) -> None:
        self.mirror: GroupMirror | None = None
        self._groups = _Groups(self)
        self._sessions = _Groups(self, sessions=True)

    @property
    def groups(self) -> dict[int, Replicas]:
        return self._groups

    @groups.setter
    def groups(self, groups: dict[int, Replicas]) -> None:
        """Replace every group (RECONCILE_AND_COMMIT carries them over this way)."""
        self._groups.clear()
        self._groups.update(groups)

    @property
    def clone_sessions(self) -> dict[int, Replicas]:
        return self._sessions

    @clone_sessions.setter
    def clone_sessions(self, sessions: dict[int, Replicas]) -> None:
        """Replace every clone session (RECONCILE_AND_COMMIT carries them over this way)."""
        self._sessions.clear()
        self._sessions.update(sessions)

    def bind(self, mirror: GroupMirror) -> None:
        for group, replicas in self._groups.items():
            mirror.set_group(group, replicas)
        for session, replicas in self._sessions.items():
            mirror.set_clone_session(session, replicas)
        self.mirror = mirror

    def replicas(self, group: int) -> tuple[Replica, ...]:
        return self._groups.get(group, ())


@dataclass
class RuntimeState:
    """Everything a P4Runtime client can read or write, keyed by P4Info id."""

    tables: dict[int, Table] = field(default_factory=dict)
    registers: dict[int, Register] = field(default_factory=dict)
    counters: dict[int, Counter] = field(default_factory=dict)
    pre: PacketReplication = field(default_factory=PacketReplication)
