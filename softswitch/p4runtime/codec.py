"""P4Runtime bytestrings <-> Python ints.

P4Runtime carries every bit<W> value as a big-endian bytestring. A server
must accept any encoding whose value fits W bits (leading zero bytes
allowed) and must answer reads with the canonical form: no leading zero
bytes, zero as a single 0x00 byte. A value that does not fit, and an empty
bytestring, are OUT_OF_RANGE (P4Runtime 1.3, "Bytestrings"). PI answers
differently on both: a value too wide is INVALID_ARGUMENT, an empty
bytestring is taken as zero; `lenient=True` gives PI's answers
(Conformance.BMV2).
"""

from __future__ import annotations

from softswitch.p4runtime.errors import TOO_WIDE, invalid, out_of_range


def decode(data: bytes, width: int, what: str, *, lenient: bool = False) -> int:
    """The unsigned value of `data`, which must fit `width` bits."""
    if not data and not lenient:
        raise out_of_range(f"{what}: empty bytestring (a value needs at least one byte)")
    value = int.from_bytes(data, "big")
    if value >> width:
        if lenient:
            raise invalid(TOO_WIDE.format(width=width))
        shown = f"0x{data.hex()}" if len(data) <= 16 else f"of {len(data)} bytes"
        raise out_of_range(f"{what}: value {shown} does not fit in bit<{width}>")
    return value


def encode(value: int) -> bytes:
    """The canonical bytestring of a non-negative int."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_width(value: int, width: int) -> bytes:
    """`value` padded to the full byte width of bit<width> (for packet headers)."""
    return value.to_bytes((width + 7) // 8, "big")
