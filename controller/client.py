"""The CLI's side of the job API: a blocking JobService client with the daemon's auth options.

`token` goes as `authorization: Bearer T` (the daemon's access or admin
token), `credential` as `p4reduce-job-credential` (a job's own).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import call_metadata
from controller.errors import ControllerError, JobError

RPC_TIMEOUT = 30.0


class JobClient:
    def __init__(
        self, address: str, token: str = "", tls_ca: Path | None = None, credential: str = ""
    ) -> None:
        self.address = address
        if tls_ca is not None:
            try:
                credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca.read_bytes())
            except OSError as exc:
                raise ControllerError(f"cannot read {tls_ca}: {exc.strerror}") from None
            self._channel = grpc.secure_channel(address, credentials)
        else:
            self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.JobServiceStub(self._channel)
        self._metadata = call_metadata(token, credential)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._channel.close()

    def call(self, method: str, request: Any, timeout: float = RPC_TIMEOUT) -> Any:
        """Call one RPC; a gRPC failure becomes a JobError carrying the daemon's message."""
        try:
            return getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()  # type: ignore[attr-defined]
            details: str = exc.details() or code.name  # type: ignore[attr-defined]
            if code == grpc.StatusCode.UNAVAILABLE:
                details = f"controller at {self.address} is unreachable (is `p4reduce-ctl serve` running?)"
            elif code == grpc.StatusCode.DEADLINE_EXCEEDED and "ranks joined" not in details:
                details = f"controller at {self.address} did not answer within {timeout:g} s"
            raise JobError(details, code) from None

    def create(self, name: str, world_size: int, pool_size: int = 0, switch: str = "") -> pb.JobDescription:
        return self.call(
            "CreateJob",
            pb.CreateJobRequest(name=name, world_size=world_size, pool_size=pool_size, switch_name=switch),
        )

    def delete(self, name: str) -> None:
        self.call("DeleteJob", pb.JobRef(name=name))

    def get(self, name: str) -> pb.JobDescription:
        return self.call("GetJob", pb.JobRef(name=name))

    def list(self) -> list[pb.JobDescription]:
        return list(self.call("ListJobs", pb.Empty()).jobs)

    def tenants(self) -> list[pb.TenantUsage]:
        return list(self.call("ListTenants", pb.Empty()).tenants)

    def counters(self, job: str = "", switch: str = "") -> list[pb.CounterValue]:
        return list(self.call("GetCounters", pb.GetCountersRequest(job=job, switch_name=switch)).counters)
