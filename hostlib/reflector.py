"""A reflector: answers as a switch would for a job of one worker, with no P4 in the way.

A 1-worker job's RESULT is its DATA with the RESULT type, and a QUERY is
answered with the last RESULT of that use (a replay) or, if its DATA never
arrived, with a MISSING that names no contributor: that is all a 1-worker
switch does (docs/protocol.md). It stands in for the switch where the
switch must not be the bottleneck (benchmarks/) or where loss must be exact
rather than random (the engine's unit tests): `drop_every=n` leaves every
n-th DATA unanswered, `duplicate=True` answers twice, `mark_every=n` sends
every n-th RESULT with ECN CE (as a congested link would mark it), and
`tos_seen` records the DSCP/ECN byte each DATA arrived with.

`NativeReflector` is the same in C (hostlib/csrc/reflector.c), without the
GIL, for the benchmarks: with `workers=N` it sums the DATA of N ranks of one
job and multicasts each RESULT as the switch does. Run either in a thread or
as its own process: `python -m hostlib.reflector --bind 127.0.0.1:PORT
[--native [--workers N]]`.
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
from types import TracebackType

from contracts.protocol import ECN_CE, HEADER_BYTES, MsgType
from hostlib import _reflector
from hostlib.native import receive_with_tos


class Reflector:
    def __init__(
        self,
        bind: tuple[str, int] = ("127.0.0.1", 0),
        drop_every: int = 0,
        duplicate: bool = False,
        mark_every: int = 0,
    ):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(bind)
        self.sock.settimeout(0.05)
        self.address: tuple[str, int] = self.sock.getsockname()
        self.drop_every, self.duplicate, self.mark_every = drop_every, duplicate, mark_every
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        self.received = 0
        self.results = 0
        self.tos_seen: set[int] = set()
        self._answered: dict[bytes, bytes] = {}  # (set|slot, seq) -> the RESULT sent for it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def answer(self, datagram: bytes) -> bytes | None:
        """What a 1-worker switch sends back for one datagram (None: nothing)."""
        if len(datagram) < HEADER_BYTES:
            return None
        use = datagram[4:6] + datagram[8:12]
        if datagram[0] == MsgType.QUERY:
            replay = self._answered.get(use)
            if replay is not None:
                return replay
            return bytes([MsgType.MISSING]) + datagram[1:20] + bytes(4)
        if datagram[0] != MsgType.DATA:
            return None
        self.received += 1
        if self.drop_every and self.received % self.drop_every == 0:
            return None
        result = bytes([MsgType.RESULT]) + datagram[1:]
        if len(self._answered) > 1 << 16:
            self._answered.clear()
        self._answered[use] = result
        return result

    def serve(self) -> None:
        """Answer until stopped."""
        sock = self.sock
        while not self._stop.is_set():
            try:
                datagram, tos, sender = receive_with_tos(sock, 2048)
            except TimeoutError:
                continue
            if datagram[:1] == bytes([MsgType.DATA]):
                self.tos_seen.add(tos)
            reply = self.answer(datagram)
            if reply is None:
                continue
            ancillary = []
            if reply[0] == MsgType.RESULT:
                self.results += 1
                if self.mark_every and self.results % self.mark_every == 0:
                    ancillary = [(socket.IPPROTO_IP, socket.IP_TOS, bytes([ECN_CE]))]
            for _ in range(2 if self.duplicate else 1):
                sock.sendmsg([reply], ancillary, 0, sender)

    def __enter__(self) -> Reflector:
        self._thread = threading.Thread(target=self.serve, name="reflector", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sock.close()


class NativeReflector:
    """The reflector in C: answers as a switch does for one job of `workers` ranks, until closed."""

    def __init__(self, bind: tuple[str, int] = ("127.0.0.1", 0), workers: int = 1) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        self.sock.bind(bind)
        self.address: tuple[str, int] = self.sock.getsockname()
        self.workers = workers
        self.counts: tuple[int, int] = (0, 0)  # datagrams received and sent, once stopped
        self._stop_read, self._stop_write = os.pipe()
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Answer until `stop` (from another thread) or the end of the process."""
        self.counts = _reflector.serve(self.sock.fileno(), self._stop_read, self.workers)

    def stop(self) -> None:
        os.write(self._stop_write, b"x")

    def __enter__(self) -> NativeReflector:
        self._thread = threading.Thread(target=self.serve, name="native-reflector", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join()
        self.sock.close()
        os.close(self._stop_read)
        os.close(self._stop_write)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m hostlib.reflector", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:0", help="IP:PORT to listen on")
    parser.add_argument("--native", action="store_true", help="the C reflector (hostlib/csrc/reflector.c)")
    parser.add_argument("--workers", type=int, default=1, help="ranks of the job (--native only)")
    args = parser.parse_args()
    host, port = args.bind.rsplit(":", 1)
    if args.workers != 1 and not args.native:
        parser.error("--workers needs --native")
    reflector = (
        NativeReflector((host, int(port)), args.workers) if args.native else Reflector((host, int(port)))
    )
    print(f"{reflector.address[0]}:{reflector.address[1]}", flush=True)
    try:
        reflector.serve()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
