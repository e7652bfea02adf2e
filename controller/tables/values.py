"""Decoding of values read back from a switch.

Reads return canonical bytestrings (no leading zero bytes) that finsy
decodes to ints for plain bit<W> fields, or to strings when the P4Info
carries a format annotation; the controller compares ints only.
"""

from __future__ import annotations

import ipaddress
from typing import Any


def as_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    text = str(value)
    if text.count(".") == 3:
        return int(ipaddress.IPv4Address(text))
    if text.count(":") == 5:
        return int(text.replace(":", ""), 16)
    return int(text, 0)


def field(values: dict[str, Any], name: str) -> int:
    """A match field or action parameter by full name or by its last component (finsy's alias)."""
    if name in values:
        return as_int(values[name])
    short = name.rsplit(".", 1)[-1]
    for key, value in values.items():
        if key.rsplit(".", 1)[-1] == short:
            return as_int(value)
    raise KeyError(name)
