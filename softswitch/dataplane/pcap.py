"""Packet captures per port and direction, as bmv2's --pcap writes them.

Files are classic libpcap (microsecond timestamps, Ethernet link type), one
per port and direction: `<dir>/<port>_in.pcap` and `<dir>/<port>_out.pcap`,
created when the first frame passes. Writes are buffered; `flush()` is
called by the packet loop when idle and `close()` at shutdown, so a capture
is complete once the daemon has exited cleanly.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import BinaryIO

_GLOBAL_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)  # LINKTYPE_ETHERNET
_RECORD = struct.Struct("<IIII")


class PcapDirectory:
    """All capture files of one daemon run."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._files: dict[tuple[int, str], BinaryIO] = {}

    def write(self, port: int, direction: str, frame: bytes) -> None:
        """Record one frame; direction is "in" or "out"."""
        out = self._files.get((port, direction))
        if out is None:
            out = open(self.directory / f"{port}_{direction}.pcap", "wb")
            out.write(_GLOBAL_HEADER)
            self._files[(port, direction)] = out
        now = time.time()
        seconds = int(now)
        length = len(frame)
        out.write(_RECORD.pack(seconds, int((now - seconds) * 1_000_000), length, length))
        out.write(frame)

    def flush(self) -> None:
        for out in self._files.values():
            out.flush()

    def close(self) -> None:
        for out in self._files.values():
            out.close()
        self._files.clear()


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a capture written by PcapDirectory (for tests and tools)."""
    return [frame for _, frame in read_timed_pcap(path)]


def read_timed_pcap(path: Path) -> list[tuple[float, bytes]]:
    """(seconds since the epoch, frame) of each record of a capture written by PcapDirectory."""
    data = path.read_bytes()
    if len(data) < len(_GLOBAL_HEADER) or data[:4] != _GLOBAL_HEADER[:4]:
        raise ValueError(f"{path}: not a little-endian microsecond pcap file")
    records = []
    offset = len(_GLOBAL_HEADER)
    while offset + _RECORD.size <= len(data):
        seconds, micros, captured, _ = _RECORD.unpack_from(data, offset)
        offset += _RECORD.size
        records.append((seconds + micros * 1e-6, data[offset : offset + captured]))
        offset += captured
    return records
