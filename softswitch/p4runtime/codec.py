"""P4Runtime bytestrings <-> Python ints.

P4Runtime carries every bit<W> value as a big-endian bytestring. A server
must accept any encoding whose value fits W bits (leading zero bytes
allowed) and must answer reads with the canonical form: no leading zero
bytes, zero as a single 0x00 byte (P4Runtime spec, "Bytestrings"). Values
that do not fit the width are OUT_OF_RANGE; an empty bytestring is not a
value at all (INVALID_ARGUMENT).
"""

from __future__ import annotations

from softswitch.p4runtime.errors import invalid, out_of_range


def decode(data: bytes, width: int, what: str) -> int:
    """The unsigned value of `data`, which must fit `width` bits."""
    if not data:
        raise invalid(f"{what}: empty bytestring (a value needs at least one byte)")
    value = int.from_bytes(data, "big")
    if value >> width:
        raise out_of_range(f"{what}: value 0x{data.hex()} does not fit in bit<{width}>")
    return value


def encode(value: int) -> bytes:
    """The canonical bytestring of a non-negative int."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_width(value: int, width: int) -> bytes:
    """`value` padded to the full byte width of bit<width> (for packet headers)."""
    return value.to_bytes((width + 7) // 8, "big")
