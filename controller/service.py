"""The JobService of contracts/jobapi.proto, served by `p4reduce-ctl serve` over grpc.aio.

A thin translation layer: requests become JobRegistry calls, ControllerErrors
become gRPC statuses with their one-line message, jobs become JobDescriptions.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.protocol import PROTOCOL_VERSION
from controller.addresses import format_ipv4, format_mac
from controller.errors import ControllerError
from controller.job import Job
from controller.registry import JobRegistry, JoinAddress

log = logging.getLogger("controller.service")


def describe(job: Job, registry: JobRegistry, rank: int | None = None) -> pb.JobDescription:
    """The job as workers and operators see it; with `rank`, the reply to that rank's JoinJob (its key)."""
    switch = registry.switch_config(job.switch)
    worker = job.workers.get(rank) if rank is not None else None
    return pb.JobDescription(
        name=job.name,
        job_id=job.job_id,
        world_size=job.world_size,
        base_slot=job.slots.base,
        pool_size=job.slots.size,
        values_per_packet=registry.program(job.switch).values_per_packet,
        switch_ipv4=format_ipv4(switch.agg_ipv4),
        switch_udp_port=switch.agg_udp_port,
        multicast_group=job.group,
        switch_name=job.switch,
        workers=[
            pb.WorkerAddress(
                ipv4=format_ipv4(w.ipv4),
                udp_port=w.udp_port,
                mac=format_mac(w.mac),
                switch_port=w.switch_port,
            )
            for _, w in sorted(job.workers.items())
        ]
        if job.installed
        else [],
        state=job.state,
        lease_seconds=registry.lease_seconds,
        key=worker.key if worker is not None else 0,
        protocol_version=PROTOCOL_VERSION,
    )


async def _answer(context: grpc.aio.ServicerContext, call: Awaitable[Any]) -> Any:
    try:
        return await call
    except ControllerError as exc:
        log.info("%s", exc)
        await context.abort(exc.status, str(exc))


class JobService(pb_grpc.JobServiceServicer):
    def __init__(self, registry: JobRegistry) -> None:
        self.registry = registry

    async def CreateJob(
        self, request: pb.CreateJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.JobDescription:
        async def run() -> pb.JobDescription:
            job = await self.registry.create(
                request.name, request.world_size, request.pool_size, request.switch_name
            )
            return describe(job, self.registry)

        return await _answer(context, run())

    async def JoinJob(
        self, request: pb.JoinJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.JobDescription:
        async def run() -> pb.JobDescription:
            a = request.address
            address = JoinAddress(a.ipv4, a.udp_port, a.mac, a.switch_port)
            job = await self.registry.join(
                request.name, request.rank, request.world_size, address, request.timeout_seconds
            )
            return describe(job, self.registry, request.rank)

        return await _answer(context, run())

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        async def run() -> pb.HeartbeatReply:
            return pb.HeartbeatReply(lease_seconds=self.registry.heartbeat(request.name, request.rank))

        return await _answer(context, run())

    async def LeaveJob(self, request: pb.LeaveJobRequest, context: grpc.aio.ServicerContext) -> pb.Empty:
        async def run() -> pb.Empty:
            await self.registry.leave(request.name, request.rank)
            return pb.Empty()

        return await _answer(context, run())

    async def DeleteJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext) -> pb.Empty:
        async def run() -> pb.Empty:
            await self.registry.delete(request.name)
            return pb.Empty()

        return await _answer(context, run())

    async def GetJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext) -> pb.JobDescription:
        async def run() -> pb.JobDescription:
            return describe(self.registry.get(request.name), self.registry)

        return await _answer(context, run())

    async def ListJobs(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> pb.ListJobsReply:
        return pb.ListJobsReply(jobs=[describe(j, self.registry) for j in self.registry.jobs()])

    async def GetCounters(
        self, request: pb.GetCountersRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCountersReply:
        async def run() -> pb.GetCountersReply:
            values = await self.registry.read_counters(request.job, request.switch_name)
            return pb.GetCountersReply(
                counters=[
                    pb.CounterValue(
                        counter=v.counter, index=v.index, label=v.label, packets=v.packets, bytes=v.bytes
                    )
                    for v in values
                ]
            )

        return await _answer(context, run())


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuse every call without `authorization: Bearer <token>` metadata."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}"

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        metadata = dict(handler_call_details.invocation_metadata or ())
        if metadata.get("authorization") == self._expected:
            return await continuation(handler_call_details)

        async def refuse(request: object, context: grpc.aio.ServicerContext) -> None:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token (authorization: Bearer T)"
            )

        return grpc.unary_unary_rpc_method_handler(refuse)
