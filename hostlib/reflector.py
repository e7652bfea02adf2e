"""A reflector: answers every DATA at once with the RESULT a switch would send for a 1-worker job.

It stands in for the switch where the switch must not be the bottleneck
(benchmarks/bench_hostlib.py) or where loss must be exact rather than
random (the engine's unit tests): `drop_every=n` leaves every n-th DATA
unanswered, `duplicate=True` answers twice. Run in a thread (`Reflector`)
or as its own process (`python -m hostlib.reflector --bind 127.0.0.1:PORT`).
"""

from __future__ import annotations

import argparse
import socket
import threading
from types import TracebackType

from contracts.protocol import MsgType

_RESULT = bytes([MsgType.RESULT])


class Reflector:
    def __init__(
        self, bind: tuple[str, int] = ("127.0.0.1", 0), drop_every: int = 0, duplicate: bool = False
    ):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(bind)
        self.sock.settimeout(0.05)
        self.address: tuple[str, int] = self.sock.getsockname()
        self.drop_every, self.duplicate = drop_every, duplicate
        self.received = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Answer until stopped."""
        sock, buffer = self.sock, bytearray(2048)
        view = memoryview(buffer)
        while not self._stop.is_set():
            try:
                size, sender = sock.recvfrom_into(buffer)
            except TimeoutError:
                continue
            self.received += 1
            if self.drop_every and self.received % self.drop_every == 0:
                continue
            buffer[0] = _RESULT[0]
            sock.sendto(view[:size], sender)
            if self.duplicate:
                sock.sendto(view[:size], sender)

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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m hostlib.reflector", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:0", help="IP:PORT to listen on")
    args = parser.parse_args()
    host, port = args.bind.rsplit(":", 1)
    reflector = Reflector((host, int(port)))
    print(f"{reflector.address[0]}:{reflector.address[1]}", flush=True)
    try:
        reflector.serve()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
