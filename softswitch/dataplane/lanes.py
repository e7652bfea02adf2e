"""Hands out a UDP port's shared-memory lanes to the ranks on this host (contracts/lanes.py, lanes.h).

The native loop owns the lanes (their memfds, their rings); this thread only answers the Unix socket.
A rank proves which UDP address it speaks from by passing its UDP socket itself (SCM_RIGHTS): the
address is read from that socket, so no process can ask for a lane, and so for the results, of an
address it does not own. Each lane is a memfd of its own, handed to that rank alone. When the rank's
connection closes, because it left or died, its lane is closed: a dead rank's lane is free again within
a moment, without any liveness check of its own.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import threading
from collections.abc import Callable, Iterable

from contracts.lanes import LANES_VERSION, REPLY, REQUEST, lanes_possible, socket_name
from softswitch.dataplane.ports import Port, UdpPort

log = logging.getLogger("softswitch.dataplane")

Open = Callable[[bytes, int], tuple[int, int]]  # (the rank's IPv4 address, its UDP port) -> (index, memfd)
Close = Callable[[int], None]  # lane index
Rank = tuple[bytes, int]  # its IPv4 address (4 bytes) and UDP port


def rank_address(fd: int) -> Rank | None:
    """The IPv4 address and port a rank's UDP socket (passed to us) is bound to; None for anything else."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            if sock.family != socket.AF_INET or sock.type != socket.SOCK_DGRAM:
                return None
            ip, port = sock.getsockname()
    except OSError:
        return None
    return (socket.inet_aton(ip), port) if port else None


class LaneNameTaken(OSError):
    """Another process holds the lanes' socket name of a port this switch serves: it would be handed
    the ranks' datagrams (and could answer them), so the switch does not start."""


class LaneServer:
    """The Unix socket of one UDP port's lanes, served by a thread of its own.

    Without `lanes` (the Python loop, or $P4REDUCE_LANES=0) it holds the name all the same and refuses
    every request, so that no other process can take the name while this switch runs and pose as it.
    """

    def __init__(self, address: str, udp_port: int, lanes: tuple[Open, Close] | None) -> None:
        self._lanes_of = lanes
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        name = socket_name(address, udp_port)
        try:
            self._listener.bind(name)
            self._listener.listen(16)
        except OSError as error:
            self._listener.close()
            if error.errno == errno.EADDRINUSE:  # our UDP port is ours, so its lane name should be too
                raise LaneNameTaken(
                    error.errno,
                    f"another process holds the shared-memory lanes' socket of udp {address}:{udp_port} "
                    f"(abstract name {name[1:].decode()!r}): it would receive the ranks' datagrams; "
                    "stop it (ss -xlp shows it)",
                ) from None
            raise
        self._wake_read, self._wake_write = os.pipe()
        self._lanes: dict[socket.socket, tuple[int, Rank]] = {}  # connection -> its lane and rank
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self.describe = f"lanes of udp {address}:{udp_port}"
        self._thread = threading.Thread(target=self._serve, name="p4reduce-lanes", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj == self._wake_read:
                    return
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._answer(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            connection, _ = self._listener.accept()
        except OSError:
            return
        self._selector.register(connection, selectors.EVENT_READ)

    def _answer(self, connection: socket.socket) -> None:
        try:
            request, fds, _flags, _address = socket.recv_fds(connection, 64, 1)
        except OSError:
            request, fds = b"", []
        try:
            rank = rank_address(fds[0]) if len(fds) == 1 else None
        finally:
            for fd in fds:
                os.close(fd)
        if connection in self._lanes or not request:  # a second request, or the rank is gone: close it
            self._drop(connection)
            return
        if len(request) != REQUEST.size or request[0] != LANES_VERSION or rank is None:
            log.warning(
                "%s: a malformed lane request (%d bytes, %d fds) refused",
                self.describe,
                len(request),
                len(fds),
            )
            self._drop(connection)
            return
        # A rank asking again (a new engine on the same socket) gets a new lane in place of its old one, and
        # the old connection then owns nothing: its closing later must not close what its index now is.
        for other, (_index, owner) in list(self._lanes.items()):
            if owner == rank:
                del self._lanes[other]
        index, memfd = self._lanes_of[0](*rank) if self._lanes_of is not None else (-1, -1)
        try:
            if index < 0:
                connection.send(REPLY.pack(LANES_VERSION, -1))
            else:
                socket.send_fds(connection, [REPLY.pack(LANES_VERSION, index)], [memfd])
        except OSError:
            if index >= 0 and self._lanes_of is not None:
                self._lanes_of[1](index)
            self._drop(connection)
            return
        finally:
            if memfd >= 0:
                os.close(memfd)
        if index >= 0:
            self._lanes[connection] = (index, rank)
            log.debug("%s: lane %d for %s:%d", self.describe, index, socket.inet_ntoa(rank[0]), rank[1])

    def _drop(self, connection: socket.socket) -> None:
        index, _rank = self._lanes.pop(connection, (-1, None))
        if index >= 0 and self._lanes_of is not None:
            self._lanes_of[1](index)
        self._selector.unregister(connection)
        connection.close()

    def close(self) -> None:
        """Stop answering and close every lane's connection (the loop closes the lanes themselves)."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        for key in list(self._selector.get_map().values()):
            if isinstance(key.fileobj, socket.socket) and key.fileobj is not self._listener:
                key.fileobj.close()
        self._selector.close()
        self._listener.close()
        os.close(self._wake_read)
        os.close(self._wake_write)


def serve_lanes(
    ports: Iterable[Port], lanes_of: Callable[[UdpPort], tuple[Open, Close] | None]
) -> list[LaneServer]:
    """A LaneServer for each UDP port on a loopback address, serving the lanes `lanes_of` gives it (None:
    its name alone, refusing every rank). Both loops hold every such name, so that no other process
    poses as this switch to the ranks on its host. When one cannot be made (LaneNameTaken, say), those
    made before it are closed again and the error goes on."""
    servers: list[LaneServer] = []
    try:
        for port in ports:
            if isinstance(port, UdpPort) and lanes_possible(port.address):
                servers.append(LaneServer(port.address, port.udp_port, lanes_of(port)))
    except BaseException:
        for server in servers:
            server.close()
        raise
    return servers
