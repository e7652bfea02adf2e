"""Wire-protocol constants and the p4reduce header layout (docs/protocol.md).

This is the only Python module that knows these numbers; the P4 side keeps
them in p4src/common/constants.p4 and a test checks that both agree.
"""

from __future__ import annotations

import enum

import numpy as np

UDP_PORT = 20562  # 0x5052: UDP destination port of DATA packets
VALUES_PER_PACKET = 32  # K
HEADER_BYTES = 12
PAYLOAD_BYTES = HEADER_BYTES + 4 * VALUES_PER_PACKET  # UDP payload of every p4reduce packet

MAX_WORKERS = 32  # width of the per-slot bitmap
SLOT_COUNT = 2048  # slots per set, switch-wide
MAX_JOBS = 1024  # job ids 1 .. MAX_JOBS-1
FLOOD_GROUP = 1  # multicast group used for L2 flooding
RESULT_TTL = 64

EXP_BIAS = 128  # wire exponent = e + EXP_BIAS; 0 means "no exponent"
EXP_NONE = 0
SET_BIT = 0x8000  # the set bit in the 16-bit set/slot word
SLOT_MASK = 0x7FFF


class MsgType(enum.IntEnum):
    DATA = 1
    RESULT = 2


class DropReason(enum.IntEnum):
    """Index into the switch's drop counters; names as in docs/protocol.md."""

    TRUNCATED = 1
    BAD_CHECKSUM = 2
    BAD_LENGTH = 3
    BAD_TYPE = 4
    UNKNOWN_JOB = 5
    WRONG_SENDER = 6
    SLOT_OUT_OF_RANGE = 7
    EARLY_DUPLICATE = 8
    NO_RESULT_DEST = 9


DROP_REASON_COUNT = 16  # size of the drop counter arrays

# The whole UDP payload as one structured record, big-endian, so a receive
# buffer of n packets is viewed as an array of n records without copying.
PACKET_DTYPE = np.dtype(
    [
        ("msg_type", "u1"),
        ("rank", "u1"),
        ("job_id", ">u2"),
        ("set_slot", ">u2"),
        ("exp", "u1"),
        ("flags", "u1"),
        ("chunk", ">u4"),
        ("values", ">i4", (VALUES_PER_PACKET,)),
    ]
)
assert PACKET_DTYPE.itemsize == PAYLOAD_BYTES
