"""Shared-memory lanes between the embedded switch and ranks on its host: how a rank asks for one.

The layout of the lanes themselves is contracts/lanes.h, which the switch's loop and the host engine
compile. A switch's UDP port on a loopback address listens on an abstract Unix socket named after its
address (abstract names belong to a network namespace, as the address does, and vanish with the
process). A rank connects and sends `REQUEST` with its UDP socket beside it (SCM_RIGHTS: the switch
reads the rank's address from the socket itself, so none can claim another's), and gets back `REPLY`
with a lane index, and that lane's own memfd beside it when the index is not -1. The connection stays
open while the rank uses the lane: when it closes (the rank left, or died) the switch frees the lane.
$P4REDUCE_LANES=0 turns lanes off on either side; the datagrams then all take UDP, as before.
"""

from __future__ import annotations

import ipaddress
import os
import struct
from pathlib import Path

LANES_HEADER = Path(__file__).with_name("lanes.h")  # the rings' layout, spliced into the switch's loop
LANES_VERSION = 1  # contracts/lanes.h's P4R_LANES_VERSION
LANES_VARIABLE = "P4REDUCE_LANES"
REQUEST = struct.Struct("!B")  # version (the rank's UDP socket travels beside it)
REPLY = struct.Struct("!Bi")  # version, lane index (-1: none free)


def lanes_enabled() -> bool:
    """On unless $P4REDUCE_LANES is 0 (or false/off/no)."""
    return os.environ.get(LANES_VARIABLE, "1").strip().lower() not in ("0", "false", "off", "no")


def lanes_possible(address: str) -> bool:
    """Whether a UDP port at `address` can have lanes: a loopback address, where its peers share the host."""
    try:
        return ipaddress.IPv4Address(address).is_loopback
    except ValueError:
        return False


def socket_name(address: str, udp_port: int) -> bytes:
    """The abstract Unix socket a switch's UDP port at address:udp_port hands its lanes out on."""
    return f"\0p4reduce-lanes-{address}:{udp_port}".encode()
