"""P4Runtime object ids, assigned the way p4c assigns them.

An id is the object type's prefix byte (p4info.proto `P4Ids.Prefix`) in the
top 8 bits and, in the low 24 bits, Bob Jenkins' one-at-a-time hash of the
fully qualified name. `@id(N)` fixes an id by hand; collisions are resolved
by linear probing over the 24-bit space, visiting names in sorted order so
that the result is deterministic — which is why ids stay stable as long as
names do, and why a controller must still resolve them from the P4Info.
"""

from __future__ import annotations

from collections.abc import Iterable

ACTION = 0x01
TABLE = 0x02
VALUE_SET = 0x03
CONTROLLER_HEADER = 0x04
ACTION_PROFILE = 0x11
COUNTER = 0x12
DIRECT_COUNTER = 0x13
METER = 0x14
DIRECT_METER = 0x15
REGISTER = 0x16
DIGEST = 0x17

_LOW24 = 0xFFFFFF
_WORD = 0xFFFFFFFF


def jenkins_one_at_a_time(text: str) -> int:
    """32-bit one-at-a-time hash of the UTF-8 bytes of `text`."""
    h = 0
    for byte in text.encode():
        h = (h + byte) & _WORD
        h = (h + (h << 10)) & _WORD
        h ^= h >> 6
    h = (h + (h << 3)) & _WORD
    h ^= h >> 11
    return (h + (h << 15)) & _WORD


def assign_ids(symbols: Iterable[tuple[int, str, int | None]]) -> dict[tuple[int, str], int]:
    """Ids for (prefix, name, explicit @id or None) triples, keyed by (prefix, name).

    Explicit ids are taken first (with their prefix byte forced, as p4c does
    when the annotation gives only the low bits); then the rest, name by name
    in sorted order, probe upward from their hash until a free id is found.
    """
    symbols = list(symbols)
    taken: set[int] = set()
    ids: dict[tuple[int, str], int] = {}
    for prefix, name, explicit in symbols:
        if explicit is not None:
            value = explicit if explicit >> 24 else (prefix << 24) | explicit
            if value in taken:
                raise ValueError(f"@id {explicit} of {name} is used twice")
            ids[(prefix, name)] = value
            taken.add(value)
    for prefix, name, _explicit in sorted(s for s in symbols if s[2] is None):
        start = jenkins_one_at_a_time(name) & _LOW24
        low = start
        while ((prefix << 24) | low) in taken:
            low = (low + 1) & _LOW24
            if low == start:
                raise ValueError(f"no free P4Runtime id for {name}")
        value = (prefix << 24) | low
        ids[(prefix, name)] = value
        taken.add(value)
    return ids


def aliases(names: Iterable[str]) -> dict[str, str]:
    """The shortest dotted suffix of each name that no other name ends with (p4c's default alias)."""
    names = list(dict.fromkeys(names))
    parts = {name: name.split(".") for name in names}
    result = {}
    for name, pieces in parts.items():
        for length in range(1, len(pieces) + 1):
            suffix = pieces[-length:]
            clash = any(other != name and parts[other][-length:] == suffix for other in names)
            if not clash:
                result[name] = ".".join(suffix)
                break
        else:
            result[name] = name
    return result
