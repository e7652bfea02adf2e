"""A joined rank's link to the controller: heartbeats, the job's events, and resuming after a restart.

Two daemon threads per rank:

- heartbeats every lease/3 keep the rank's lease (docs/controller.md, *Leases*);
- a WatchJob stream hears at once what the controller learns about the job.
  DELETED (an operator deleted it, or a peer went silent and the lease took
  it) fails the call in flight within the engine's wake interval and every
  later call, with the controller's own words ("rank 3 stopped heartbeating
  31.2 s ago"), instead of a vague timeout 10 s later. SWITCH_RESTARTED
  fails the call in flight ("switch restarted") and, before the next call,
  the rank reports how many calls it had begun (ResumeJob); once every
  rank has, they go on together with new keys from the call number the
  controller names. A broken stream is opened again (the controller may be
  restarting); the heartbeat's generation catches an event missed meanwhile.
  RANK_LEFT (a peer called LeaveJob or Communicator.close()) fails, naming
  the rank, every call it had not begun (the one in flight, if so, and
  every later one): those cannot finish without it. A call it had begun
  can: its contribution is in the switch, which replays the result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from hostlib.calls import AllreduceAborted, AllreduceTimeout

log = logging.getLogger("hostlib.controller")

RESUME_POLL = 0.05  # seconds between ResumeJob reports while other ranks have not reported
WATCH_BACKOFF_MAX = 2.0
_GIVE_UP = {
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,  # a daemon older than WatchJob: heartbeats still work
}


@dataclass(frozen=True)
class Resumption:
    """Where a rank goes on after a switch restart: its new key and the first call that runs."""

    generation: int
    key: int
    resume_call: int


class ControllerLink:
    def __init__(
        self,
        channel: grpc.Channel,
        metadata: list[tuple[str, str]],
        job: str,
        rank: int,
        generation: int,
        fail: Callable[[Exception], None],
        calls_begun: Callable[[], int],
        peer_left: Callable[[int, str], None] | None = None,
    ) -> None:
        self.channel = channel
        self.stub = pb_grpc.JobServiceStub(channel)
        self.metadata = metadata
        self.job, self.rank = job, rank
        self.generation = generation  # the one this rank runs
        self._fail = fail  # fails the engine's call in flight and every later one
        self._calls_begun = calls_begun
        self._peer_left = peer_left  # (calls the peer had begun, why): the calls from that number fail
        self._lock = threading.Lock()
        self._restart: tuple[int, int] | None = None  # (generation, calls begun when heard)
        self._gone_message = ""  # set when the job is deleted: nothing to resume then
        self._stop = threading.Event()
        self._watch_call: grpc.Future | None = None
        self._threads: list[threading.Thread] = []

    def start(self, lease: float) -> None:
        for target, name in ((lambda: self._heartbeats(lease / 3), "heartbeat"), (self._watch, "watch")):
            thread = threading.Thread(target=target, name=f"p4reduce-{name}-{self.rank}", daemon=True)
            thread.start()
            self._threads.append(thread)

    # ------------------------------------------------------------------ events
    def _heartbeats(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                reply = self.stub.Heartbeat(
                    pb.HeartbeatRequest(name=self.job, rank=self.rank),
                    timeout=interval,
                    metadata=self.metadata,
                )
            except grpc.RpcError:
                continue  # the next beat retries; the lease is several intervals long
            if reply.generation > self.generation:
                self._restarted(reply.generation, "the switch restarted (heard from a heartbeat)")

    def _watch(self) -> None:
        backoff = 0.1
        request = pb.WatchJobRequest(name=self.job, rank=self.rank)
        while not self._stop.is_set():
            try:
                call = self.stub.WatchJob(request, metadata=self.metadata)
                self._watch_call = call
                for event in call:
                    backoff = 0.1
                    if self._event(event):
                        return
            except grpc.RpcError as error:
                if self._stop.is_set():
                    return
                code = error.code()  # type: ignore[attr-defined]
                if code == grpc.StatusCode.NOT_FOUND:
                    self._gone(f"job {self.job!r} no longer exists on the controller ({error.details()})")  # type: ignore[attr-defined]
                    return
                if code in _GIVE_UP:
                    log.info("rank %d: not watching job %r: %s", self.rank, self.job, error.details())  # type: ignore[attr-defined]
                    return
            self._stop.wait(backoff)
            backoff = min(backoff * 2, WATCH_BACKOFF_MAX)

    def _event(self, event: pb.JobEvent) -> bool:
        """Act on one event; True when the job is gone."""
        if event.kind == pb.JobEvent.DELETED:
            self._gone(event.message)
            return True
        if event.kind == pb.JobEvent.RANK_LEFT:
            if event.rank != self.rank:  # a peer left: no call it had not begun can finish
                if self._peer_left is not None:
                    self._peer_left(event.calls_begun, event.message)
                else:
                    self._fail(AllreduceAborted(event.message))
            return False
        if event.generation > self.generation:
            self._restarted(event.generation, event.message or "the switch restarted")
        return False

    def _gone(self, message: str) -> None:
        self._gone_message = message
        self._fail(AllreduceAborted(message))

    def _restarted(self, generation: int, message: str) -> None:
        """Fail the call in flight, and report how many calls this rank had begun."""
        with self._lock:
            if self._restart is not None and self._restart[0] >= generation:
                return
            self._restart = (generation, self._calls_begun())
        self._fail(AllreduceAborted(f"switch restarted: {message}; this call is lost, the next one runs"))
        self._report()

    def _report(self) -> pb.ResumeJobReply | None:
        restart = self._restart
        if restart is None:
            return None
        generation, begun = restart
        request = pb.ResumeJobRequest(name=self.job, rank=self.rank, generation=generation, calls_begun=begun)
        try:
            return self.stub.ResumeJob(request, timeout=5, metadata=self.metadata)
        except grpc.RpcError as error:
            log.info("rank %d: ResumeJob failed: %s", self.rank, error.details())  # type: ignore[attr-defined]
            return None

    # ------------------------------------------------------------------ resuming
    def pending(self) -> bool:
        return self._restart is not None

    def resume(self, timeout: float) -> Resumption:
        """Wait until every rank has reported (blocks the rank's next call); the new key and first call."""
        deadline = time.monotonic() + timeout
        waiting = "the other ranks"
        while time.monotonic() < deadline:
            if self._gone_message:
                raise AllreduceAborted(self._gone_message)
            reply = self._report()
            if reply is not None:
                restart = self._restart
                if restart is not None and reply.generation > restart[0]:  # restarted again meanwhile
                    with self._lock:
                        self._restart = (reply.generation, restart[1])
                    continue
                if reply.ready:
                    with self._lock:
                        self._restart = None
                        self.generation = reply.generation
                    return Resumption(reply.generation, reply.key, reply.resume_call)
                waiting = reply.waiting_for or waiting
            self._stop.wait(RESUME_POLL)
        raise AllreduceTimeout(
            f"the switch restarted and {waiting} of job {self.job!r} did not report back within {timeout:g} s"
        )

    # ------------------------------------------------------------------ leaving
    def leave(self) -> None:
        """Leave the job and stop both threads."""
        self._stop.set()
        try:
            self.stub.LeaveJob(
                pb.LeaveJobRequest(name=self.job, rank=self.rank, calls_begun=self._calls_begun()),
                timeout=5,
                metadata=self.metadata,
            )
        except grpc.RpcError:
            pass  # the lease reclaims the job if the controller is unreachable now
        if self._watch_call is not None:
            self._watch_call.cancel()
        for thread in self._threads:
            thread.join(timeout=5)
        self.channel.close()
