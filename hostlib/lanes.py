"""A rank's side of the switch's shared-memory lanes (contracts/lanes.py; docs/hostlib.md, *Lanes*).

When the switch's UDP address is on loopback, the switch may offer a lane: two rings in memory shared
with it, which the native engine's `run` then uses in place of the socket for every datagram that fits
(the socket stays for the rest and for doorbells). Without one, nothing changes: the same datagrams go
by UDP. Asking costs a connect to an abstract Unix socket, refused at once where no switch serves one.
"""

from __future__ import annotations

import logging
import os
import socket
import weakref
from typing import Protocol

from contracts.lanes import LANES_VERSION, REPLY, REQUEST, lanes_enabled, lanes_possible, socket_name

log = logging.getLogger("hostlib.lanes")
ANSWER_TIMEOUT = 5.0  # seconds the switch has to answer a request (it answers from a thread of its own)
# Every lease this process holds, so that a forked child lets go of its copies (_forget_leases).
_leases: weakref.WeakSet[socket.socket] = weakref.WeakSet()


def _forget_leases() -> None:
    """In a forked child (a DataLoader worker, say): close the inherited copies of the parent's leases.
    Kept open, they would keep a dead parent's lanes taken for as long as the child lives."""
    for lease in list(_leases):
        lease.close()
    _leases.clear()


os.register_at_fork(after_in_child=_forget_leases)


class LaneUser(Protocol):
    def attach_lane(self, memfd: int, lease: int) -> None: ...


def request_lane(sock: socket.socket, switch: tuple[str, int], engine: LaneUser) -> socket.socket | None:
    """Ask the switch at `switch` for a lane for `sock`'s address and attach `engine` to it. The connection
    it returns is the lane's lease: close it to give the lane back. None: no lane (UDP alone)."""
    if not lanes_enabled() or not lanes_possible(switch[0]):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.settimeout(ANSWER_TIMEOUT)
        connection.connect(socket_name(*switch))
        socket.send_fds(connection, [REQUEST.pack(LANES_VERSION)], [sock.fileno()])  # proof of its address
        reply, fds, _flags, _address = socket.recv_fds(connection, REPLY.size, 1)
    except OSError as error:  # no switch serving lanes there (a Python switch, another host's, none)
        connection.close()
        log.debug("no shared-memory lane at %s:%d (%s)", *switch, error)
        return None
    try:
        if len(reply) != REPLY.size or reply[0] != LANES_VERSION or len(fds) != (REPLY.unpack(reply)[1] >= 0):
            log.warning("the switch at %s:%d answered a lane request with something else", *switch)
            connection.close()
            return None
        index = REPLY.unpack(reply)[1]
        if index < 0:
            log.info("the switch at %s:%d has no free shared-memory lane; this rank uses UDP", *switch)
            connection.close()
            return None
        engine.attach_lane(fds[0], connection.fileno())
        _leases.add(connection)
        log.debug("shared-memory lane %d of %s:%d attached", index, *switch)
    except OSError as error:
        log.warning("the shared-memory lane of %s:%d cannot be used (%s); this rank uses UDP", *switch, error)
        connection.close()
        return None
    finally:
        for fd in fds:
            os.close(fd)
    return connection
