"""`Communicator`: all-reduce numpy arrays through a p4reduce switch.

Two ways in:

* `Communicator.join(controller=..., job=..., rank=..., world_size=...,
  credential=...)` registers this worker's address with the controller's
  job API, waits until every rank has joined, and keeps a link to the
  controller (hostlib/controller_link.py: heartbeats, and the job's events,
  which end a call at once when the job is deleted, a peer goes silent or
  the switch restarts); `close()` leaves the job.
* `Communicator(JobSpec(...), rank, local_address)` for static labs whose
  switch was provisioned by hand (`p4reduce-ctl provision`) or whose runner
  joined on the worker's behalf.

Calls run one at a time, in the order they were made, on one background
thread (`allreduce` is `allreduce_async(...).wait()`): every rank numbers
its calls the same way, and the switch checks that the ranks agree on each
(docs/protocol.md, *Call agreement*).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Self, TypeVar

import grpc
import numpy as np

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import CREDENTIAL, CREDENTIAL_ENV, call_metadata
from contracts.protocol import (
    MAX_USES_PER_CALL,
    MAX_WORKERS,
    PROTOCOL_VERSION,
    SUPPORTED_VALUES_PER_PACKET,
    UDP_PORT,
    payload_bytes,
)
from hostlib.calls import (
    MAX_CALL_ELEMENTS,
    AllreduceAborted,
    AllreduceError,
    Descriptor,
    DType,
    NonFinite,
    Op,
    check_wire_bits,
)
from hostlib.controller_link import ControllerLink
from hostlib.engine import EngineStats, Membership
from hostlib.native import NativePlan, PacketEngine, congestion_control_default, native_plan, refused_plan
from hostlib.scratch import ScratchPool

__all__ = ["Communicator", "Handle", "JobSpec", "JoinError"]

DTYPES = {
    np.dtype(np.int32): DType.INT32,
    np.dtype(np.float32): DType.FLOAT32,
    np.dtype(np.float16): DType.FLOAT16,
}


class JoinError(RuntimeError):
    """The controller refused or could not complete the join (its message says why)."""


@dataclass(frozen=True)
class JobSpec:
    """What a worker needs to aggregate: the job's identity on the switch, its K, the switch's address,
    and this rank's key (from JoinJob's reply, or from whoever provisioned the job)."""

    job_id: int
    world_size: int
    pool_size: int
    switch_address: tuple[str, int]
    values_per_packet: int
    key: int
    name: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.world_size <= MAX_WORKERS:
            raise ValueError(f"world size {self.world_size} is outside 1..{MAX_WORKERS}")
        if self.values_per_packet not in SUPPORTED_VALUES_PER_PACKET:
            raise ValueError(
                f"the job uses {self.values_per_packet} values per packet; this host library supports "
                f"{', '.join(map(str, SUPPORTED_VALUES_PER_PACKET))}"
            )
        if not 0 <= self.key < 2**32:
            raise ValueError(f"key {self.key} is not a 32-bit number")

    @classmethod
    def from_description(cls, reply: pb.JobDescription) -> JobSpec:
        """The controller's answer to JoinJob (for the rank that joined)."""
        if reply.protocol_version and reply.protocol_version != PROTOCOL_VERSION:
            raise JoinError(
                f"the switch speaks p4reduce protocol version {reply.protocol_version}, this host library "
                f"version {PROTOCOL_VERSION}: upgrade one of them"
            )
        return cls(
            job_id=reply.job_id,
            world_size=reply.world_size,
            pool_size=reply.pool_size,
            switch_address=(reply.switch_ipv4, reply.switch_udp_port or UDP_PORT),
            values_per_packet=reply.values_per_packet,
            key=reply.key,
            name=reply.name,
        )


class Handle:
    """An all-reduce in flight; `wait()` returns its result (or raises its error)."""

    def __init__(self, future: Future[np.ndarray]) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> np.ndarray:
        return self._future.result(timeout)

    def add_done_callback(self, callback: Callable[[Handle], None]) -> None:
        """Call `callback(self)` when the all-reduce ends (at once if it has), on the thread that ended it."""
        self._future.add_done_callback(lambda _: callback(self))


class Communicator:
    def __init__(
        self,
        job: JobSpec,
        rank: int,
        local_address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        progress_timeout: float = 10.0,
        sock: socket.socket | None = None,
        congestion_control: bool | None = None,
    ) -> None:
        """`congestion_control`: ECN and the congestion window (docs/protocol.md, *Congestion*); None
        follows $P4REDUCE_CONGESTION_CONTROL (on unless 0)."""
        if not 0 <= rank < job.world_size:
            raise ValueError(f"rank {rank} is outside 0..{job.world_size - 1}")
        self.job = job
        self.rank = rank
        member = Membership(job.job_id, rank, job.key, job.world_size, job.pool_size, job.values_per_packet)
        self.sock = sock if sock is not None else _bind(local_address)
        self.congestion_control = (
            congestion_control_default() if congestion_control is None else congestion_control
        )
        self.engine = PacketEngine(
            self.sock, job.switch_address, member, progress_timeout, self.congestion_control
        )
        check_path_mtu(self.sock, job.values_per_packet)
        self._progress_timeout = progress_timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"p4reduce-rank{rank}")
        self._closed = False
        self._link: ControllerLink | None = None
        self._lock = threading.Lock()  # the engine and the call count, between a call and the link
        self._calls_begun = 0  # engine calls begun (or skipped) by this rank: the same on every rank
        self._peer_gone: tuple[int, str] | None = None  # a peer left: (its calls begun, why)
        self._resume_at = 0  # calls numbered below it were lost with the switch's state
        self._earlier_stats: list[EngineStats] = []  # of engines replaced after a switch restart
        # the input copies of asynchronous calls, reused by size; callers may draw result buffers from it
        self.scratch = ScratchPool()

    # ------------------------------------------------------------ joining
    @classmethod
    def join(
        cls,
        controller: str,
        job: str,
        rank: int,
        world_size: int,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        token: str = "",
        credential: str | None = None,
        join_timeout: float = 60.0,
        progress_timeout: float = 10.0,
    ) -> Communicator:
        """Join `job` through the controller at `controller` (host:port); blocks until all ranks joined.

        Every rank presents the job's `credential` (default: $P4REDUCE_JOB_CREDENTIAL): the first
        rank's join creates the job with it, the others' join it. `token` is the daemon's access token.
        """
        _check_source_address(address[0])
        if credential is None:
            credential = os.environ.get(CREDENTIAL_ENV, "")
        sock = _bind(address)
        ip, port = sock.getsockname()
        channel = grpc.insecure_channel(controller)
        metadata = call_metadata(token, credential)
        stub = pb_grpc.JobServiceStub(channel)
        request = pb.JoinJobRequest(
            name=job,
            rank=rank,
            world_size=world_size,
            address=pb.WorkerAddress(ipv4=ip, udp_port=port),
            timeout_seconds=join_timeout,
        )
        try:
            reply = stub.JoinJob(request, timeout=join_timeout + 10, metadata=metadata)
            spec = JobSpec.from_description(reply)
        except grpc.RpcError as error:
            sock.close()
            channel.close()
            raise JoinError(_rpc_message(error, controller)) from None
        except (JoinError, ValueError) as error:
            sock.close()
            channel.close()
            raise JoinError(str(error)) from None
        if reply.credential:  # drawn by the controller for the job this join created
            metadata = [*(m for m in metadata if m[0] != CREDENTIAL), (CREDENTIAL, reply.credential)]
        try:
            comm = cls(spec, rank, progress_timeout=progress_timeout, sock=sock)
        except PathMtuError as error:
            sock.close()  # and leave the job it joined, so that its peers are not kept waiting for it
            ControllerLink(channel, metadata, job, rank, reply.generation, lambda _: None, lambda: 0).leave()
            raise JoinError(str(error)) from None
        comm._link = ControllerLink(
            channel,
            metadata,
            job,
            rank,
            reply.generation,
            comm._fail,
            lambda: comm._calls_begun,
            comm._peer_left,
        )
        comm._link.start(reply.lease_seconds or 30.0)
        return comm

    def _fail(self, error: Exception) -> None:
        """The controller says the call in flight cannot finish (see ControllerLink)."""
        with self._lock:
            engine = self.engine
        engine.fail(error)  # type: ignore[arg-type]

    def _peer_left(self, calls_begun: int, message: str) -> None:
        """A peer left after beginning `calls_begun` calls (0: unknown): those can still finish here, its
        contribution being in the switch; the calls from that number on cannot, and fail at once."""
        with self._lock:
            if self._peer_gone is None or calls_begun < self._peer_gone[0]:
                self._peer_gone = (calls_begun, message)
            in_flight, engine = self._calls_begun - 1, self.engine  # the latest call begun (done or not)
        if in_flight >= calls_begun:
            engine.fail(AllreduceAborted(message))

    # ------------------------------------------------------------ reducing
    def allreduce_async(
        self,
        array: np.ndarray,
        out: np.ndarray | None = None,
        *,
        op: Literal["sum", "avg"] = "sum",
        nonfinite: Literal["propagate", "raise"] = "propagate",
        logical_dtype: Literal["bfloat16"] | None = None,
        wire_bits: Literal[16, 32] = 32,
        copy: bool = True,
    ) -> Handle:
        """Start summing (or averaging) `array` over all ranks; the input is copied before this returns,
        so the caller may write `array` at once.

        `copy=False` reads `array` in place while the call runs, sparing a copy of it: the caller
        promises not to write it until the handle is done, which is what torch.distributed asks of an
        asynchronous collective's tensor (hostlib.torch passes it).

        Wrong arguments raise here, and this rank still takes part in the call with a refused
        contribution, so that its peers fail at once instead of waiting for it.

        `logical_dtype="bfloat16"` is for callers whose tensors numpy cannot hold (hostlib.torch): they
        pass bfloat16 as its bit patterns in a uint16 array (the result comes back the same way,
        rounded to nearest even), or widened to float32 (exact; the result is float32 and the caller
        rounds it back). Either way the descriptor names bfloat16, so that a rank calling with real
        float32 is refused as a mismatch.

        `wire_bits=16` sends a float call at 16 bits per value (docs/protocol.md, *Wire formats*): half
        the packets, with an error bound 2^16 times as large (about N^2 / 2^16 of each block's largest
        magnitude instead of N^2 / 2^32); every rank must choose the same, or the call is a mismatch.
        int32 always travels at 32 bits, exactly.
        """
        return self._submit(array, out, op, nonfinite, logical_dtype, wire_bits, copy=copy)

    def _submit(
        self,
        array: np.ndarray,
        out: np.ndarray | None,
        op: str,
        nonfinite: str,
        logical_dtype: str | None,
        wire_bits: int,
        *,
        copy: bool,
    ) -> Handle:
        """Queue one all-reduce. `copy=False` reads `array` in place while the call runs: for callers
        that wait for the result before they can touch it again (allreduce)."""
        if self._closed:
            raise RuntimeError("the communicator is closed")
        array = np.asarray(array)
        try:
            operation = _choice(Op, op, "op")
            mode = _choice(NonFinite, nonfinite, "nonfinite")
            if out is not None and (out.shape != array.shape or out.dtype != array.dtype):
                raise ValueError(f"out must have shape {array.shape} and dtype {array.dtype}")
            dtype = _logical(array.dtype, logical_dtype)
            bits = check_wire_bits(wire_bits, dtype)
        except (TypeError, ValueError):
            self._executor.submit(self._refuse)
            raise
        # An `out` that is the input itself is safe to read in place: each block is read when its DATA
        # is built and written when its RESULT arrives, never read again. One that overlaps it any
        # other way could overwrite a block before it is read, so the input is copied then.
        overlapping = out is not None and np.may_share_memory(array, out) and not _same_memory(array, out)
        copied = copy or overlapping
        flat = self.scratch.copy(array) if copied else np.ascontiguousarray(array.reshape(-1))
        calls = list(self._split(flat, dtype, operation, mode, bits))

        def run() -> np.ndarray:
            try:
                return reduce()
            finally:
                if copied:
                    self.scratch.give(flat)

        def reduce() -> np.ndarray:
            target = out if out is not None else np.empty(array.shape, dtype=array.dtype)
            # The native plans write results straight into a C-contiguous buffer: the target itself
            # unless it is a strided view.
            direct = target.flags.c_contiguous
            destination = target if direct else np.empty(array.shape, dtype=array.dtype)
            view = destination.reshape(-1)
            for done, (start, piece, descriptor) in enumerate(calls):
                section = view[start : start + piece.size]
                plan = native_plan(
                    piece, section, descriptor, self.job.values_per_packet, self.job.world_size
                )
                try:
                    self._run(plan, descriptor)
                except AllreduceError:
                    with self._lock:  # the pieces not sent are calls every rank skips alike
                        self._calls_begun += len(calls) - done - 1
                    raise
                plan.result()  # NonFiniteError under nonfinite="raise"
            if not direct:
                np.copyto(target, destination)
            self.engine.stats.tensor_bytes += array.nbytes
            return target

        return Handle(self._executor.submit(run))

    def allreduce(
        self,
        array: np.ndarray,
        out: np.ndarray | None = None,
        *,
        op: Literal["sum", "avg"] = "sum",
        nonfinite: Literal["propagate", "raise"] = "propagate",
        logical_dtype: Literal["bfloat16"] | None = None,
        wire_bits: Literal[16, 32] = 32,
    ) -> np.ndarray:
        """The element-wise sum (or average) of `array` over all ranks, same shape and dtype.

        A NaN or Inf in any rank's input comes back in its block on every rank (nonfinite="propagate",
        as Gloo and NCCL do), or makes every rank raise NonFiniteError (nonfinite="raise").
        `logical_dtype` and `wire_bits`: see `allreduce_async`.
        """
        # The caller waits for the result, so the input needs no copy: the call reads it in place.
        return self._submit(array, out, op, nonfinite, logical_dtype, wire_bits, copy=False).wait()

    def _split(
        self, flat: np.ndarray, dtype: DType, op: Op, mode: NonFinite, bits: int
    ) -> Iterator[tuple[int, np.ndarray, Descriptor]]:
        """The calls one tensor takes: each within 65536 packets and 2^24 - 1 elements."""
        block = self.job.values_per_packet * (32 // bits)  # elements per packet
        priming = self.job.pool_size // 2 if dtype != DType.INT32 else 0  # at most H priming uses (N <= 4K)
        per_call = min((MAX_USES_PER_CALL - priming) * block, MAX_CALL_ELEMENTS // block * block)
        for start in range(0, flat.size, per_call):
            piece = flat[start : start + per_call]
            yield start, piece, Descriptor(dtype, op, mode, piece.size, bits)

    def _run(self, plan: NativePlan, descriptor: Descriptor) -> None:
        if self._link is not None and self._link.pending():
            self._resume(self._link)
        with self._lock:
            number, engine = self._calls_begun, self.engine
            self._calls_begun += 1
            gone = self._peer_gone
        if gone is not None and number >= gone[0]:
            raise AllreduceAborted(gone[1])
        if number < self._resume_at:
            raise AllreduceAborted(
                f"call #{number} of job {self.job.name!r} was lost when the switch restarted (other ranks "
                "had begun it); the next call runs"
            )
        engine.run(plan, descriptor.encode())

    def _resume(self, link: ControllerLink) -> None:
        """After a switch restart: once every rank reported, a new engine with the new key."""
        resumption = link.resume(self._progress_timeout)
        job = dataclasses.replace(self.job, key=resumption.key)
        member = Membership(
            job.job_id, self.rank, job.key, job.world_size, job.pool_size, job.values_per_packet
        )
        engine = PacketEngine(
            self.sock, job.switch_address, member, self._progress_timeout, self.congestion_control
        )
        with self._lock:
            self._earlier_stats.append(self.engine.stats)
            self.engine.close()
            self.job, self.engine, self._resume_at = job, engine, resumption.resume_call

    def _refuse(self) -> None:
        """Take part in the next call with a refused descriptor; the caller already has its error."""
        try:
            self._run(
                refused_plan(self.job.values_per_packet, self.job.world_size),
                Descriptor(DType.REFUSED, Op.SUM, NonFinite.PROPAGATE, 0),
            )
        except AllreduceError:
            pass

    def stats(self) -> EngineStats:
        """A snapshot of the counters so far: take one before and one after a call to see what it cost."""
        total = dataclasses.replace(self.engine.stats, rtt_samples=list(self.engine.stats.rtt_samples))
        for earlier in self._earlier_stats:  # engines replaced after a switch restart
            for f in dataclasses.fields(EngineStats):
                setattr(total, f.name, getattr(total, f.name) + getattr(earlier, f.name))
        return total

    # ------------------------------------------------------------ closing
    def close(self) -> None:
        """Wait for queued calls, leave the job (if joined through a controller), release the socket."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True)
        if self._link is not None:
            self._link.leave()
        self.engine.close()
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_Choice = TypeVar("_Choice", Op, NonFinite)


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one shape and dtype are the same C-contiguous elements."""
    return (
        a.flags.c_contiguous
        and b.flags.c_contiguous
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def _choice(kind: type[_Choice], value: str, name: str) -> _Choice:
    try:
        return kind[value.upper()]
    except (KeyError, AttributeError):
        options = ", ".join(repr(member.name.lower()) for member in kind)
        raise ValueError(f"{name} must be one of {options}, not {value!r}") from None


def _logical(carried: np.dtype, logical: str | None) -> DType:
    """The dtype a call's descriptor names: the array's own, or bfloat16 carried as its bits or float32."""
    if logical is not None and logical != "bfloat16":
        raise ValueError(f"logical_dtype must be None or 'bfloat16', not {logical!r}")
    if logical is None:
        if carried not in DTYPES:
            names = ", ".join(str(d) for d in DTYPES)
            raise TypeError(
                f"allreduce supports {names} (and bfloat16 as uint16 bits with logical_dtype='bfloat16'); "
                f"got {carried} (cast it first)"
            )
        return DTYPES[carried]
    if carried not in (np.dtype(np.uint16), np.dtype(np.float32)):
        raise TypeError(
            "logical_dtype='bfloat16' takes bfloat16 bit patterns as uint16, or the values widened to "
            f"float32, not {carried}"
        )
    return DType.BFLOAT16


def _check_source_address(ip: str) -> None:
    """The switch checks the source address of every DATA: join from the address it will see."""
    try:
        address = ipaddress.IPv4Address(ip)
    except ValueError:
        raise JoinError(f"{ip!r} is not an IPv4 address to join from") from None
    if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
        raise JoinError(
            f"cannot join from {ip}: the switch checks every packet's source address, so bind to the "
            "address it will see (this host's address on the switch's network, e.g. 10.0.0.1 or 127.0.0.2)"
        )


class PathMtuError(ValueError):
    """The route to the switch cannot carry the job's DATA in one frame."""


IP_MTU = 14  # <linux/in.h>: a connected socket's path MTU (socket does not name it)
IPV4_UDP_HEADERS = 28


def check_path_mtu(sock: socket.socket, values_per_packet: int) -> None:
    """Refuse a route whose MTU is below the job's DATA size: the kernel would fragment every DATA, and the
    switch, which never reassembles, would drop the fragments (silent loss, then a timeout). Where the
    kernel does not tell (not Linux, not connected), nothing is checked."""
    try:
        mtu = sock.getsockopt(socket.IPPROTO_IP, IP_MTU)
    except OSError:
        return
    needed = payload_bytes(values_per_packet) + IPV4_UDP_HEADERS
    if mtu < needed:
        peer = sock.getpeername()
        raise PathMtuError(
            f"the route to the switch {peer[0]}:{peer[1]} has an MTU of {mtu} bytes, but the job's "
            f"{values_per_packet} values per packet make {needed}-byte IPv4 packets: raise the MTU of this "
            f"host's link to the switch (ip link set DEV mtu {needed} or more, on every link of the path), "
            "or run the switch's program compiled for a smaller K (-DVALUES_PER_PACKET)"
        )


def _bind(address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise OSError(
            f"cannot bind the worker socket to {address[0]}:{address[1]}: {error.strerror}"
        ) from None
    return sock


def _rpc_message(error: grpc.RpcError, controller: str) -> str:
    code = error.code()  # type: ignore[attr-defined]
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"controller at {controller} is unreachable (is `p4reduce-ctl serve` running?)"
    return f"controller refused the join: {error.details() or code.name}"  # type: ignore[attr-defined]
