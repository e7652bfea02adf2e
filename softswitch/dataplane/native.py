"""The native packet loop (native/loop.c) behind the same interface as `loop.Dataplane`.

The P4Runtime server and the daemon use a data plane through `lock`,
`pipeline`, `packet_in`, `inject`, `stats`, `cpu_port`, `run` and `close`;
`NativeDataplane` offers exactly these, while its packets flow in a C
thread that never holds Python's GIL: receive with recvmmsg, the pipeline,
send with sendmmsg. A C-backend pipeline runs there directly; a Python one
(the reference backend, or a test's) is called back through ctypes with the
same signature, so any pipeline works on either loop.

`lock` is the C loop's own mutex (re-entrant for the thread holding it,
as the server takes it around a pipeline change). PacketIn frames are
queued by the C loop and handed to `packet_in` by the thread running
`run` (or by `inject`, for frames a PacketOut produced). Captures are
written by a C writer thread. Counters: the loop's come from C, the
server's own (`dropped_packet_out_not_primary`, ...) live here; `stats`
shows both.
"""

from __future__ import annotations

import ctypes
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from types import TracebackType

from contracts.lanes import LANES_HEADER, lanes_enabled
from softswitch.backends.c import build
from softswitch.backends.c.pipeline import Pipeline as NativePipeline
from softswitch.dataplane.lanes import Close, Open, serve_lanes
from softswitch.dataplane.loop import Faults, PortCounters, by_number, deliver_digest
from softswitch.dataplane.pcap import PcapDirectory
from softswitch.dataplane.ports import Port, RawPort, UdpPort
from softswitch.runtime.pipeline import Pipeline

SOURCE = Path(__file__).with_name("native") / "loop.c"
# Counters of the C loop, in the order of its enum.
STATS = (
    "rx",
    "tx",
    "consumed",
    "dropped_no_pipeline",
    "dropped_no_port",
    "dropped_unsendable",
    "dropped_fault_in",
    "dropped_fault_out",
    "dropped_pipeline_error",
    "dropped_packet_in_queue_full",
    "dropped_capture",
    "lane_rx",  # datagrams taken from shared-memory lanes (contracts/lanes.h)
    "lane_tx",  # and put into them
    "lane_full",  # for a lane whose ring was full: sent by UDP instead
    "lane_corrupt",  # lanes closed because their rank left an impossible index or length in a ring
)
# Per-port counters of the C loop, in the order of its enum: PortCounters' fields.
PORT_STATS = ("frames_in", "bytes_in", "frames_out", "bytes_out")
MAX_FRAME = 65536 + 64
log = logging.getLogger("softswitch.dataplane")

_U64, _U32, _VP = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p
PROCESS = ctypes.CFUNCTYPE(ctypes.c_int, _VP, _U64, _VP, _U32)
POINTER_OF = ctypes.CFUNCTYPE(_VP, _VP)
MAX_FAULT_PORTS = 256  # loop.c's MAX_PORTS
_library_lock = threading.Lock()
_library: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The loop's shared object, built once (cached like programs) and declared."""
    global _library
    with _library_lock:
        if _library is not None:
            return _library
        source = SOURCE.read_text().replace('#include "lanes.h"', LANES_HEADER.read_text(), 1)
        lib = build.load(build.build(source, name="dataplane"))
        signatures = {
            "dp_create": (
                [ctypes.c_int64, ctypes.c_double, ctypes.c_double, ctypes.POINTER(_U32), ctypes.c_int],
                _VP,
            ),
            "dp_add_port": ([_VP, _U32, ctypes.c_int, ctypes.c_int, _U32, ctypes.c_uint16], ctypes.c_int),
            "dp_fault_port": ([_VP, _U32], ctypes.c_int),
            "dp_lanes_create": ([_VP, _U32], ctypes.c_int),
            "dp_lane_open": ([_VP, _U32, _U32, ctypes.c_uint16], ctypes.c_int),
            "dp_lane_fd": ([_VP, _U32, ctypes.c_int], ctypes.c_int),
            "dp_lane_close": ([_VP, _U32, ctypes.c_int], None),
            "dp_lock": ([_VP], None),
            "dp_unlock": ([_VP], None),
            "dp_set_pipeline": ([_VP, _VP, _VP, _VP, _VP, _VP], None),
            "dp_stat": ([_VP, ctypes.c_int], _U64),
            "dp_port_number": ([_VP, _U32], ctypes.c_int64),
            "dp_port_stat": ([_VP, _U32, ctypes.c_int], _U64),
            "dp_last_error": ([_VP, ctypes.c_char_p, ctypes.c_size_t], _U64),
            "dp_inject": ([_VP, _U32, ctypes.c_char_p, _U32], None),
            "dp_capture": ([_VP, ctypes.c_char_p], ctypes.c_int),
            "dp_start": ([_VP], ctypes.c_int),
            "dp_stop": ([_VP], None),
            "dp_packet_in": (
                [_VP, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(_U32)],
                ctypes.c_long,
            ),
            "dp_destroy": ([_VP], None),
        }
        for name, (args, result) in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, result
        _library = lib
        return lib


class _Lock:
    """The C loop's mutex as a context manager; the thread holding it may take it again."""

    def __init__(self, lib: ctypes.CDLL, dp: int) -> None:
        self._lib, self._dp = lib, dp
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return
        self._lib.dp_lock(self._dp)  # ctypes releases the GIL while this waits
        self._owner, self._depth = me, 1

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lib.dp_unlock(self._dp)


class _Stats(MutableMapping[str, int]):
    """The loop's counters (from C) and the server's own, as one mapping."""

    def __init__(self, plane: NativeDataplane) -> None:
        self._plane = plane
        self._own: dict[str, int] = {}
        self._final: dict[str, int] | None = None  # the loop's counters when it was closed

    def _native(self, key: str) -> int:
        if key not in STATS:
            return 0
        if self._final is not None:
            return self._final[key]
        return int(self._plane._lib.dp_stat(self._plane._dp, STATS.index(key)))

    def freeze(self) -> None:
        self._final = {key: self._native(key) for key in STATS}

    def __getitem__(self, key: str) -> int:
        return self._native(key) + self._own.get(key, 0)

    def __setitem__(self, key: str, value: int) -> None:
        self._own[key] = value - self._native(key)

    def __delitem__(self, key: str) -> None:
        self._own.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        names = [k for k in STATS if self._native(k)] + [k for k in self._own if k not in STATS]
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _PythonPipeline:
    """A Python pipeline behind the C signatures (process, outputs, arena, error); called with the GIL."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.outs = (_Out * 64)()
        self.arena = ctypes.create_string_buffer(1 << 16)
        self.error = ctypes.create_string_buffer(256)
        self.process = PROCESS(self._process)
        self.outputs = POINTER_OF(lambda ctx: ctypes.addressof(self.outs))
        self.arena_of = POINTER_OF(lambda ctx: ctypes.addressof(self.arena))
        self.error_of = POINTER_OF(lambda ctx: ctypes.addressof(self.error))

    def _process(self, ctx: int, port: int, frame: int, length: int) -> int:
        try:
            produced = self.pipeline.process(port, ctypes.string_at(frame, length))
            if len(produced) > len(self.outs):
                self.outs = (_Out * (2 * len(produced)))()
            total = sum(len(out) for _, out in produced)
            if total > len(self.arena):
                self.arena = ctypes.create_string_buffer(2 * total)
            offset = 0
            for i, (egress, out) in enumerate(produced):
                self.outs[i].port, self.outs[i].offset, self.outs[i].length = egress, offset, len(out)
                ctypes.memmove(ctypes.addressof(self.arena) + offset, out, len(out))
                offset += len(out)
            return len(produced)
        except Exception as error:  # a pipeline bug must not kill the switch: the loop drops the packet
            log.exception("port %d: the pipeline failed; dropped", port)
            self.error.value = str(error).encode()[:255]
            return -1


class _Out(ctypes.Structure):
    _fields_ = [("port", _U64), ("offset", _U32), ("length", _U32)]


class NativeDataplane:
    """Ports, the installed pipeline and the native loop that connects them (see loop.Dataplane)."""

    def __init__(
        self,
        ports: list[Port],
        cpu_port: int | None = None,
        faults: Faults | None = None,
        pcap: PcapDirectory | None = None,
    ) -> None:
        self.ports = by_number(ports, cpu_port)
        self.cpu_port = cpu_port
        faults = faults or Faults()
        self._lib = library()
        seed = faults.seed if faults.seed is not None else int.from_bytes(os.urandom(16), "little")
        words = _seed_words(seed)
        array = (_U32 * len(words))(*words)
        self._dp = self._lib.dp_create(
            -1 if cpu_port is None else cpu_port, faults.drop_in, faults.drop_out, array, len(words)
        )
        if not self._dp:
            raise MemoryError("the native packet loop could not be created")
        for number in sorted(faults.ports):
            if self._lib.dp_fault_port(self._dp, number) != 0:
                raise ValueError(f"fault injection can be limited to at most {MAX_FAULT_PORTS} ports")
        for port in ports:
            if isinstance(port, UdpPort):
                address = int.from_bytes(port._local_ip, "little")  # network order, as the C side stores it
                status = self._lib.dp_add_port(
                    self._dp, port.number, port.fileno(), 1, address, port.udp_port
                )
            elif isinstance(port, RawPort):
                status = self._lib.dp_add_port(self._dp, port.number, port.fileno(), 0, 0, 0)
            else:
                raise TypeError(f"the native loop cannot drive a {type(port).__name__}")
            if status != 0:
                raise OSError(f"port {port.number}: the native loop cannot watch it")
        try:
            self._lane_servers = serve_lanes(ports, self._lanes_of)
        except OSError:
            self._lib.dp_destroy(self._dp)
            self._dp = None
            raise
        if pcap is not None and self._lib.dp_capture(self._dp, str(pcap.directory).encode()) != 0:
            raise OSError("the capture writer could not start")
        self.lock = _Lock(self._lib, self._dp)
        self.stats = _Stats(self)
        self.packet_in: Callable[[bytes], None] | None = None
        self.digest: Callable[[int, bytes], None] | None = None
        self._pipeline: Pipeline | None = None
        self._bound: object = None  # what keeps the installed pipeline's callbacks alive
        self._errors_seen = 0
        self._buffer = ctypes.create_string_buffer(MAX_FRAME)
        self._deliver = threading.Lock()
        self._final_ports: dict[int, PortCounters] = {}

    def _lanes_of(self, port: UdpPort) -> tuple[Open, Close] | None:
        """A loopback UDP port's shared-memory lanes, made in the loop; None (with $P4REDUCE_LANES=0, or
        when they cannot be made: logged) leaves it only their socket's name, and its ranks use UDP."""
        if not lanes_enabled():
            return None
        made = self._lib.dp_lanes_create(self._dp, port.number)
        if made < 0:
            why = os.strerror(-made)
            log.warning("port %d: no shared-memory lanes (%s); ranks use UDP", port.number, why)
            return None
        lib, dp, number = self._lib, self._dp, port.number

        def open_lane(ip: bytes, udp_port: int) -> tuple[int, int]:  # network order in memory, as C has it
            index = int(lib.dp_lane_open(dp, number, int.from_bytes(ip, "little"), socket.htons(udp_port)))
            if index < -1:
                log.warning("port %d: no memory for a shared-memory lane (%s)", number, os.strerror(-index))
            return (index, int(lib.dp_lane_fd(dp, number, index))) if index >= 0 else (-1, -1)

        def close_lane(index: int) -> None:
            lib.dp_lane_close(dp, number, index)

        return open_lane, close_lane

    # ------------------------------------------------------------- pipeline
    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    @pipeline.setter
    def pipeline(self, pipeline: Pipeline | None) -> None:
        with self.lock:
            if pipeline is None:
                self._lib.dp_set_pipeline(self._dp, None, None, None, None, None)
                bound: object = None
            elif isinstance(pipeline, NativePipeline):
                lib = pipeline.context.lib
                address = lambda fn: ctypes.cast(fn, _VP).value  # noqa: E731
                self._lib.dp_set_pipeline(
                    self._dp,
                    address(lib.p4_process),
                    address(lib.p4_outputs),
                    address(lib.p4_arena),
                    address(lib.p4_error),
                    pipeline.context.ptr,
                )
                bound = pipeline
            else:
                adapter = _PythonPipeline(pipeline)
                self._lib.dp_set_pipeline(
                    self._dp,
                    ctypes.cast(adapter.process, _VP),
                    ctypes.cast(adapter.outputs, _VP),
                    ctypes.cast(adapter.arena_of, _VP),
                    ctypes.cast(adapter.error_of, _VP),
                    None,
                )
                bound = adapter
            self._pipeline, self._bound = pipeline, bound

    # ------------------------------------------------------------- the loop
    def run(self, stop: threading.Event) -> None:
        """Run the native loop until `stop` is set; meanwhile hand PacketIn frames to `packet_in`."""
        if self._lib.dp_start(self._dp) != 0:
            raise OSError("the native packet loop could not start")
        try:
            while not stop.is_set():
                self._packet_ins(wait_ms=200)
                self._report_errors()
        finally:
            self._lib.dp_stop(self._dp)
            self._packet_ins(wait_ms=0)

    def inject(self, port: int, frame: bytes) -> None:
        """Run one frame through the pipeline as if it arrived on `port` (PacketOut)."""
        self._lib.dp_inject(self._dp, port, frame, len(frame))
        self._packet_ins(wait_ms=0)
        self._report_errors()

    def _packet_ins(self, wait_ms: int) -> None:
        with self._deliver:  # one thread at a time, so that PacketIns keep their order
            digest = _U32()
            while True:
                n = self._lib.dp_packet_in(self._dp, self._buffer, len(self._buffer), wait_ms, digest)
                if n < 0:
                    return
                wait_ms = 0
                if digest.value:
                    deliver_digest(self, digest.value - 1, self._buffer.raw[:n])
                    continue
                sink = self.packet_in
                if sink is None:
                    self.stats["dropped_no_controller"] += 1
                else:
                    self.stats["packet_in"] += 1
                    sink(self._buffer.raw[:n])

    def _report_errors(self) -> None:
        message = ctypes.create_string_buffer(256)
        count = int(self._lib.dp_last_error(self._dp, message, len(message)))
        if count > self._errors_seen:
            log.error(
                "the pipeline failed on %d packet(s), dropped; the latest: %s",
                count - self._errors_seen,
                message.value.decode(errors="replace"),
            )
            self._errors_seen = count

    def port_counters(self) -> dict[int, PortCounters]:
        """Each data port's frames and bytes so far, from the C loop (as loop.Dataplane counts them)."""
        if not self._dp:
            return dict(self._final_ports)
        out = {}
        for index in range(len(self.ports)):
            number = int(self._lib.dp_port_number(self._dp, index))
            values = [int(self._lib.dp_port_stat(self._dp, index, k)) for k in range(len(PORT_STATS))]
            out[number] = PortCounters(*values)
        return out

    def close(self) -> None:
        if self._dp:
            self._final_ports = self.port_counters()
            for server in self._lane_servers:
                server.close()
            self._lane_servers.clear()
            self._lib.dp_stop(self._dp)
            self._packet_ins(wait_ms=0)
            self.stats.freeze()
            self._lib.dp_destroy(self._dp)  # flushes and closes captures
            self._dp = None
        for port in self.ports.values():
            port.close()


def _seed_words(seed: int) -> list[int]:
    """random.Random(seed)'s key: |seed| as 32-bit words, least significant first."""
    value = abs(seed)
    words = []
    while value:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
    return words or [0]
