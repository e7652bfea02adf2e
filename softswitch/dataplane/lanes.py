"""Hands out a UDP port's shared-memory lanes to the ranks on this host (contracts/lanes.py, lanes.h).

The native loop owns the lanes (their memfd, their rings); this thread only answers the Unix socket:
a rank's request opens a lane for its UDP address and gets the memfd, and when the rank's connection
closes, because it left or died, the lane is closed. So a dead rank's lane is free again within a
moment, without any liveness check of its own.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
from collections.abc import Callable

from contracts.lanes import LANES_VERSION, REPLY, REQUEST, socket_name

log = logging.getLogger("softswitch.dataplane")

Open = Callable[[bytes, int], int]  # (the rank's IPv4 address, its UDP port) -> lane index, or -1
Close = Callable[[int], None]  # lane index


class LaneServer:
    """The Unix socket of one UDP port's lanes, served by a thread of its own."""

    def __init__(self, address: str, udp_port: int, memfd: int, open_lane: Open, close_lane: Close) -> None:
        self._memfd = memfd
        self._open, self._close = open_lane, close_lane
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._listener.bind(socket_name(address, udp_port))  # OSError when another switch has it
            self._listener.listen(16)
        except OSError:
            self._listener.close()
            raise
        self._wake_read, self._wake_write = os.pipe()
        self._lanes: dict[socket.socket, int] = {}  # connection -> its lane
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
            request = connection.recv(64)
        except OSError:
            request = b""
        if connection in self._lanes or not request:  # a second request, or the rank is gone: close it
            self._drop(connection)
            return
        if len(request) != REQUEST.size or request[0] != LANES_VERSION:
            log.warning("%s: a malformed lane request (%d bytes) refused", self.describe, len(request))
            self._drop(connection)
            return
        _version, ip, udp_port = REQUEST.unpack(request)
        index = self._open(ip, udp_port)
        try:
            if index < 0:
                connection.send(REPLY.pack(LANES_VERSION, -1))
            else:
                socket.send_fds(connection, [REPLY.pack(LANES_VERSION, index)], [self._memfd])
        except OSError:
            if index >= 0:
                self._close(index)
            self._drop(connection)
            return
        if index >= 0:
            self._lanes[connection] = index
            log.debug("%s: lane %d for %s:%d", self.describe, index, socket.inet_ntoa(ip), udp_port)

    def _drop(self, connection: socket.socket) -> None:
        index = self._lanes.pop(connection, -1)
        if index >= 0:
            self._close(index)
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
