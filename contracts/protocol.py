"""Wire-protocol constants and the p4reduce header layout (docs/protocol.md, protocol version 2).

This is the only Python module that knows these numbers; the P4 side keeps
them in p4src/common/constants.p4 and a test checks that both agree.

K (values per packet) and the switch's slot count are compile-time
parameters of the P4 program: the controller reads them from the pipeline's
P4Info (`P4INFO_VALUES_ANNOTATION`, `P4INFO_SLOTS_ANNOTATION` on the job
table) and tells workers K in the job description, so nothing else
hard-codes them; the defaults below are what the program compiles to
without -D.
"""

from __future__ import annotations

import enum
import functools

import numpy as np

PROTOCOL_VERSION = 3
UDP_PORT = 20562  # 0x5052: UDP destination port of DATA packets
HEADER_BYTES = 24

DEFAULT_VALUES_PER_PACKET = 64  # K without -DVALUES_PER_PACKET on bmv2 (p4c) and Tofino
# K without -DVALUES_PER_PACKET on the embedded switch's target (p4reduce-p4c's default, which predefines
# __P4REDUCE_SOFTSWITCH__): it pays per packet, and 1024 was its fastest (docs/performance.md)
EMBEDDED_DEFAULT_VALUES_PER_PACKET = 1024
SUPPORTED_VALUES_PER_PACKET = (32, 64, 128, 256, 512, 1024)  # 512 and 1024: software targets, jumbo frames
DEFAULT_SLOT_COUNT = 2048  # slots per set, switch-wide, without -DSLOT_COUNT
P4INFO_VALUES_ANNOTATION = "p4reduce_values_per_packet"
P4INFO_SLOTS_ANNOTATION = "p4reduce_slot_count"

MAX_WORKERS = 32  # width of the per-slot bitmap
MAX_JOBS = 1024  # job ids 1 .. MAX_JOBS-1
FLOOD_GROUP = 1  # multicast group used for L2 flooding
RESULT_TTL = 64

EXP_BIAS = 128  # wire exponent = e + EXP_BIAS
EXP_NONE = 0  # no exponent (integers, or no next chunk)
EXP_NONFINITE = 255  # the block holds NaN/Inf on some rank; the switch's max propagates it

USE_BITS = 16  # seq = call number (high 16 bits) : use within the call (low 16 bits)
MAX_USES_PER_CALL = 1 << USE_BITS
CALL_NUMBERS = 1 << (32 - USE_BITS)  # call numbers wrap here

# ECN (RFC 3168): the low two bits of the IPv4 DSCP/ECN byte (docs/protocol.md, *Congestion*). Hosts send
# DATA and QUERY with ECT(0) while congestion control is on; the switch carries CE to the results.
ECN_MASK = 0x03
ECN_NOT_ECT = 0x00
ECN_ECT1 = 0x01
ECN_ECT0 = 0x02
ECN_CE = 0x03

SET_BIT = 0x8000  # the set bit in the 16-bit set/slot word
SLOT_MASK = 0x7FFF


class MsgType(enum.IntEnum):
    DATA = 1  # worker -> switch: a contribution
    RESULT = 2  # switch -> workers: the sums of a completed use
    MISSING = 3  # switch -> asker: its contribution to the use is missing; aux = ranks that contributed
    ABORT = 4  # switch -> job (or sender): the call is aborted; aux = the call the slot holds (0: unknown)
    STALE = 5  # switch -> sender: the slot has moved past this use; aux = the seq it holds
    QUERY = 6  # worker -> switch, header only: where is this use? (answered RESULT, MISSING, STALE or not)


NOTICES = (MsgType.MISSING, MsgType.ABORT, MsgType.STALE)  # header-only packets from the switch


class DropReason(enum.IntEnum):
    """Index into the switch's drop counters; names as in docs/protocol.md."""

    TRUNCATED = 1
    BAD_CHECKSUM = 2
    BAD_LENGTH = 3
    BAD_TYPE = 4
    UNKNOWN_JOB = 5
    WRONG_SENDER = 6
    BAD_KEY = 7
    SLOT_OUT_OF_RANGE = 8
    STALE = 9
    DUPLICATE = 10
    CALL_MISMATCH = 11
    CALL_ABORTED = 12
    NO_RESULT_DEST = 13
    CONTRIBUTED = 14  # a QUERY about a collecting use from a rank whose contribution is in


DROP_REASON_COUNT = 16  # size of the drop counter arrays

# The 24-byte header as one structured record, big-endian, so a receive buffer
# is viewed as records without copying.
HEADER_DTYPE = np.dtype(
    [
        ("msg_type", "u1"),
        ("rank", "u1"),
        ("job_id", ">u2"),
        ("set_slot", ">u2"),
        ("exp", "u1"),
        ("flags", "u1"),
        ("seq", ">u4"),
        ("key", ">u4"),
        ("call", ">u4"),
        ("aux", ">u4"),
    ]
)
assert HEADER_DTYPE.itemsize == HEADER_BYTES


def payload_bytes(values_per_packet: int) -> int:
    """UDP payload of DATA and RESULT: the header and K signed 32-bit values."""
    return HEADER_BYTES + 4 * values_per_packet


@functools.cache
def packet_dtype(values_per_packet: int) -> np.dtype:
    """A whole DATA/RESULT payload as one record: the header's fields and `values` (K big-endian int32)."""
    if values_per_packet not in SUPPORTED_VALUES_PER_PACKET:
        raise ValueError(f"K = {values_per_packet} is not one of {SUPPORTED_VALUES_PER_PACKET}")
    return np.dtype(HEADER_DTYPE.descr + [("values", ">i4", (values_per_packet,))])


def seq_of(call_number: int, use: int) -> int:
    """The wire identity of a use: call number in the high bits, use within the call in the low."""
    return ((call_number % CALL_NUMBERS) << USE_BITS) | use


def call_number_of(seq: int) -> int:
    return seq >> USE_BITS
