"""`Communicator`: all-reduce numpy arrays through a p4reduce switch.

Two ways in:

* `Communicator.join(controller=..., job=..., rank=..., world_size=...)`
  registers this worker's address with the controller's job API, waits
  until every rank has joined, and keeps the job's lease alive with
  heartbeats from a background thread; `close()` leaves the job.
* `Communicator(JobSpec(...), rank, local_address)` for static labs whose
  switch was provisioned by hand (`p4reduce-ctl provision`).

Calls run one at a time, in the order they were made, on one background
thread (`allreduce` is `allreduce_async(...).wait()`), because all of a job's
workers must make the same sequence of calls: that is what keeps their
set bits and chunk numbers in step.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import grpc
import numpy as np

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.protocol import MAX_WORKERS, UDP_PORT, VALUES_PER_PACKET
from hostlib.engine import AllreduceTimeout, EngineStats, PacketEngine
from hostlib.quantize import check_input
from hostlib.reduction import plan_for

__all__ = ["AllreduceTimeout", "Communicator", "Handle", "JobSpec", "JoinError"]


class JoinError(RuntimeError):
    """The controller refused or could not complete the join (its message says why)."""


@dataclass(frozen=True)
class JobSpec:
    """What a worker needs to aggregate: the job's identity on the switch and the switch's address."""

    job_id: int
    world_size: int
    pool_size: int
    switch_address: tuple[str, int]
    values_per_packet: int = VALUES_PER_PACKET
    name: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.world_size <= MAX_WORKERS:
            raise ValueError(f"world size {self.world_size} is outside 1..{MAX_WORKERS}")
        if self.values_per_packet != VALUES_PER_PACKET:
            raise ValueError(
                f"the job uses {self.values_per_packet} values per packet, this host library "
                f"{VALUES_PER_PACKET}: switch program and host library do not match"
            )

    @classmethod
    def from_description(cls, reply: pb.JobDescription) -> JobSpec:
        """The controller's answer to JoinJob, with the protocol's defaults for fields it left unset."""
        return cls(
            job_id=reply.job_id,
            world_size=reply.world_size,
            pool_size=reply.pool_size,
            switch_address=(reply.switch_ipv4, reply.switch_udp_port or UDP_PORT),
            values_per_packet=reply.values_per_packet or VALUES_PER_PACKET,
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


class Communicator:
    def __init__(
        self,
        job: JobSpec,
        rank: int,
        local_address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        progress_timeout: float = 10.0,
        sock: socket.socket | None = None,
    ) -> None:
        if not 0 <= rank < job.world_size:
            raise ValueError(f"rank {rank} is outside 0..{job.world_size - 1}")
        self.job = job
        self.rank = rank
        self.sock = sock if sock is not None else _bind(local_address)
        self.engine = PacketEngine(
            self.sock, job.switch_address, job.job_id, rank, job.pool_size, progress_timeout
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"p4reduce-rank{rank}")
        self._closed = False
        self._stop_heartbeat = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._controller: pb_grpc.JobServiceStub | None = None
        self._channel: grpc.Channel | None = None
        self._metadata: list[tuple[str, str]] = []

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
        join_timeout: float = 60.0,
        progress_timeout: float = 10.0,
    ) -> Communicator:
        """Join `job` through the controller at `controller` (host:port); blocks until all ranks joined."""
        sock = _bind(address)
        ip, port = sock.getsockname()
        channel = grpc.insecure_channel(controller)
        metadata = [("authorization", f"Bearer {token}")] if token else []
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
        except grpc.RpcError as error:
            sock.close()
            channel.close()
            raise JoinError(_rpc_message(error, controller)) from None
        comm = cls(JobSpec.from_description(reply), rank, progress_timeout=progress_timeout, sock=sock)
        comm._channel, comm._controller, comm._metadata = channel, stub, metadata
        lease = reply.lease_seconds or 30.0
        comm._heartbeat = threading.Thread(
            target=comm._heartbeats, args=(lease / 3,), name=f"p4reduce-heartbeat-{rank}", daemon=True
        )
        comm._heartbeat.start()
        return comm

    def _heartbeats(self, interval: float) -> None:
        assert self._controller is not None
        while not self._stop_heartbeat.wait(interval):
            try:
                self._controller.Heartbeat(
                    pb.HeartbeatRequest(name=self.job.name, rank=self.rank),
                    timeout=interval,
                    metadata=self._metadata,
                )
            except grpc.RpcError:
                continue  # the next beat retries; the lease is several intervals long

    # ------------------------------------------------------------ reducing
    def allreduce_async(self, array: np.ndarray, out: np.ndarray | None = None) -> Handle:
        """Start summing `array` over all ranks; the input is checked (and copied) before this returns."""
        if self._closed:
            raise RuntimeError("the communicator is closed")
        array = np.asarray(array)
        check_input(array)
        if out is not None and (out.shape != array.shape or out.dtype != array.dtype):
            raise ValueError(f"out must have shape {array.shape} and dtype {array.dtype}")
        plan = plan_for(array.reshape(-1), self.job.pool_size, self.job.world_size)

        def run() -> np.ndarray:
            self.engine.run(plan)
            self.engine.stats.tensor_bytes += array.nbytes
            result = plan.result().reshape(array.shape)
            target = out if out is not None else np.empty(array.shape, dtype=array.dtype)
            np.copyto(target, result, casting="unsafe")
            return target

        return Handle(self._executor.submit(run))

    def allreduce(self, array: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The element-wise sum of `array` over all ranks (same shape and dtype)."""
        return self.allreduce_async(array, out).wait()

    def stats(self) -> EngineStats:
        """A snapshot of the counters so far: take one before and one after a call to see what it cost."""
        stats = self.engine.stats
        return dataclasses.replace(stats, rtt_samples=list(stats.rtt_samples))

    # ------------------------------------------------------------ closing
    def close(self) -> None:
        """Wait for queued calls, leave the job (if joined through a controller), release the socket."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True)
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        if self._controller is not None:
            try:
                self._controller.LeaveJob(
                    pb.LeaveJobRequest(name=self.job.name, rank=self.rank), timeout=5, metadata=self._metadata
                )
            except grpc.RpcError:
                pass  # the lease reclaims the job if the controller is unreachable now
        if self._channel is not None:
            self._channel.close()
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
