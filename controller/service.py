"""The JobService of contracts/jobapi.proto, served by `p4reduce-ctl serve` over grpc.aio.

A thin translation layer: every call first becomes a `Caller` (the tokens
and credential it presented, controller/auth.py), requests become
JobRegistry calls, ControllerErrors become gRPC statuses with their
one-line message (never longer than MESSAGE_LIMIT: an error must not echo
a client's unbounded input), jobs become JobDescriptions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.protocol import PROTOCOL_VERSION
from controller.addresses import format_ipv4, format_mac
from controller.auth import Caller, Tokens
from controller.errors import ControllerError
from controller.job import Job, JobEvent
from controller.registry import JobRegistry, JoinAddress

log = logging.getLogger("controller.service")

MESSAGE_LIMIT = 300  # characters of an error message (it travels in metadata)
MAX_REQUEST_BYTES = 64 * 1024  # every job API request is a few hundred bytes
EVENT_KINDS = {
    "watching": pb.JobEvent.WATCHING,
    "deleted": pb.JobEvent.DELETED,
    "switch_restarted": pb.JobEvent.SWITCH_RESTARTED,
    "rank_left": pb.JobEvent.RANK_LEFT,
}
T = TypeVar("T")


def describe(
    job: Job, registry: JobRegistry, rank: int | None = None, credential: str = "", workers: bool = True
) -> pb.JobDescription:
    """The job as workers and operators see it; with `rank`, the reply to that rank's JoinJob (its key)."""
    worker = job.workers.get(rank) if rank is not None else None
    # A rank of a tree sees the job on its own switch; anyone else, on the switch that completes it.
    part = job.part((worker.switch or job.switch) if worker is not None and job.parts else job.root)
    switch = registry.switch_config(part.switch)
    return pb.JobDescription(
        name=job.name,
        job_id=part.job_id,
        world_size=job.world_size,
        base_slot=part.slots.base,
        pool_size=part.slots.size,
        values_per_packet=registry.program(part.switch).values_per_packet,
        switch_ipv4=format_ipv4(switch.agg_ipv4),
        switch_udp_port=switch.agg_udp_port,
        multicast_group=part.group,
        switch_name=part.switch,
        workers=[
            pb.WorkerAddress(
                ipv4=format_ipv4(w.ipv4),
                udp_port=w.udp_port,
                mac=format_mac(w.mac),
                switch_port=w.switch_port,
            )
            for _, w in sorted(job.workers.items())
        ]
        if job.installed and workers
        else [],
        state=job.state,
        lease_seconds=registry.lease_seconds,
        key=worker.key if worker is not None else 0,
        protocol_version=PROTOCOL_VERSION,
        credential=credential,
        generation=job.generation,
        ranks_joined=len(job.present()),
        tenant=job.tenant,
        placement=job.placement,
        tree=[
            pb.TreePart(
                switch_name=p.switch,
                parent=p.parent,
                job_id=p.job_id,
                base_slot=p.slots.base,
                pool_size=p.slots.size,
                multicast_group=p.group,
                uplink_port=p.child_port,
                parent_port=p.parent_port,
                rank_in_parent=p.up_rank,
                ranks=sorted(r for r, w in job.workers.items() if w.switch == p.switch),
            )
            for p in sorted(job.parts.values(), key=lambda p: (p.parent != "", p.switch))
        ],
    )


def bounded(text: str) -> str:
    if len(text) <= MESSAGE_LIMIT:
        return text
    note = f"... ({len(text)} characters)"
    return text[: MESSAGE_LIMIT - len(note)] + note


class JobService(pb_grpc.JobServiceServicer):
    def __init__(self, registry: JobRegistry, tokens: Tokens | None = None) -> None:
        self.registry = registry
        self.tokens = tokens or Tokens()

    async def _answer(self, context: grpc.aio.ServicerContext, call: Callable[[Caller], Awaitable[T]]) -> T:
        """Run `call` for this call's caller; a ControllerError becomes the call's status."""
        try:
            caller = self.tokens.caller(context.invocation_metadata() or (), context.peer())
            return await call(caller)
        except ControllerError as exc:
            log.info("%s: %s", context.peer(), bounded(str(exc)))
            await context.abort(exc.status, bounded(str(exc)))
            raise AssertionError("abort returned") from None

    async def CreateJob(
        self, request: pb.CreateJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.JobDescription:
        async def run(caller: Caller) -> pb.JobDescription:
            self.registry.quotas.check_creator(caller.tenant, caller.admin)
            job, drawn = await self.registry.create(
                request.name, request.world_size, request.pool_size, request.switch_name,
                credential=caller.credential, tenant=caller.tenant,
            )  # fmt: skip
            return describe(job, self.registry, credential=drawn)

        return await self._answer(context, run)

    async def JoinJob(
        self, request: pb.JoinJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.JobDescription:
        async def run(caller: Caller) -> pb.JobDescription:
            a = request.address
            address = JoinAddress(a.ipv4, a.udp_port, a.mac, a.switch_port)
            job, drawn = await self.registry.join(
                request.name, request.rank, request.world_size, address, caller, request.timeout_seconds
            )
            return describe(job, self.registry, request.rank, credential=drawn)

        return await self._answer(context, run)

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        async def run(caller: Caller) -> pb.HeartbeatReply:
            lease, generation = self.registry.heartbeat(request.name, request.rank, caller)
            return pb.HeartbeatReply(lease_seconds=lease, generation=generation)

        return await self._answer(context, run)

    async def LeaveJob(self, request: pb.LeaveJobRequest, context: grpc.aio.ServicerContext) -> pb.Empty:
        async def run(caller: Caller) -> pb.Empty:
            await self.registry.leave(request.name, request.rank, caller, request.calls_begun)
            return pb.Empty()

        return await self._answer(context, run)

    async def DeleteJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext) -> pb.Empty:
        async def run(caller: Caller) -> pb.Empty:
            await self.registry.delete(request.name, caller)
            return pb.Empty()

        return await self._answer(context, run)

    async def GetJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext) -> pb.JobDescription:
        async def run(caller: Caller) -> pb.JobDescription:
            return describe(self.registry.get(request.name, caller), self.registry)

        return await self._answer(context, run)

    async def ListJobs(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> pb.ListJobsReply:
        """Every job for the operator (admin token, or no admin token configured); else the caller's."""

        async def run(caller: Caller) -> pb.ListJobsReply:
            operator = caller.admin or not self.tokens.admin
            jobs = self.registry.jobs(None if operator else caller)
            return pb.ListJobsReply(jobs=[describe(j, self.registry) for j in jobs])

        return await self._answer(context, run)

    async def GetCounters(
        self, request: pb.GetCountersRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCountersReply:
        async def run(caller: Caller) -> pb.GetCountersReply:
            if not request.job:
                self.tokens.operator(caller, "the counters of a whole switch")
            values = await self.registry.read_counters(caller, request.job, request.switch_name)
            return pb.GetCountersReply(
                counters=[
                    pb.CounterValue(
                        counter=v.counter, index=v.index, label=v.label, packets=v.packets, bytes=v.bytes
                    )
                    for v in values
                ]
            )

        return await self._answer(context, run)

    async def WatchJob(
        self, request: pb.WatchJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.JobEvent]:
        try:
            caller = self.tokens.caller(context.invocation_metadata() or (), context.peer())
            events = self.registry.watch(request.name, request.rank, caller)
            async for event in events:
                yield _event(event)
        except ControllerError as exc:
            await context.abort(exc.status, bounded(str(exc)))
        except asyncio.CancelledError:
            return  # the rank went away, or the daemon is stopping: nothing to report

    async def ResumeJob(
        self, request: pb.ResumeJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResumeJobReply:
        async def run(caller: Caller) -> pb.ResumeJobReply:
            ready, generation, key, resume_call, waiting = self.registry.resume(
                request.name, request.rank, request.generation, request.calls_begun, caller
            )
            return pb.ResumeJobReply(
                ready=ready,
                generation=generation,
                key=key,
                resume_call=resume_call,
                waiting_for=", ".join(f"rank {r}" for r in waiting),
            )

        return await self._answer(context, run)

    async def ListTenants(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> pb.ListTenantsReply:
        """Every tenant's quotas and usage for the operator; a tenant sees its own row."""

        async def run(caller: Caller) -> pb.ListTenantsReply:
            if not caller.tenant:
                self.tokens.operator(caller, "every tenant's usage")
            rows = self.registry.quotas.usage(self.registry.jobs())
            return pb.ListTenantsReply(
                tenants=[
                    pb.TenantUsage(
                        name=u.tenant.name,
                        jobs=u.jobs,
                        max_jobs=u.tenant.max_jobs or 0,
                        max_slots=u.tenant.max_slots or 0,
                        limited_jobs=u.tenant.max_jobs is not None,
                        limited_slots=u.tenant.max_slots is not None,
                        slots=[pb.SwitchSlots(switch_name=k, slots=v) for k, v in u.slots.items()],
                    )
                    for u in rows
                    if not caller.tenant or u.tenant.name == caller.tenant
                ]
            )

        return await self._answer(context, run)


def _event(event: JobEvent) -> pb.JobEvent:
    return pb.JobEvent(
        kind=EVENT_KINDS[event.kind],
        message=event.message,
        generation=event.generation,
        rank=event.rank,
        calls_begun=event.calls_begun,
    )


def server_options(keepalive: float = 0.0, keepalive_timeout: float = 5.0) -> list[tuple[str, Any]]:
    """Bounded requests, and no SO_REUSEPORT: a second daemon on the same address must fail.

    With `keepalive` (seconds; 0: none) the server pings every client connection that often and closes
    one whose ping is not answered within `keepalive_timeout`: a rank cut off without its TCP connection
    closing then loses its WatchJob stream, and the disconnect grace, not the lease, names it. A
    WatchJob stream sends no data for long stretches, hence no cap on pings without data.
    """
    options: list[tuple[str, Any]] = [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
    ]
    if keepalive > 0:
        options += [
            ("grpc.keepalive_time_ms", max(1, round(keepalive * 1000))),
            ("grpc.keepalive_timeout_ms", max(1, round(keepalive_timeout * 1000))),
            # gRPC 1.6x+ times the ping itself out by this one (default 60 s), not by the one above
            ("grpc.http2.ping_timeout_ms", max(1, round(keepalive_timeout * 1000))),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    return options
