"""The controller's error types: each carries one line a user can act on.

The CLI and the job service turn these into one stderr line (exit status 1)
or a gRPC status; anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

import grpc


class ControllerError(Exception):
    """A failure the user can understand and fix; `str()` is the whole message."""

    status = grpc.StatusCode.FAILED_PRECONDITION


class ConfigError(ControllerError):
    """The topology/config file or a command-line value is wrong."""

    status = grpc.StatusCode.INVALID_ARGUMENT


class SwitchError(ControllerError):
    """The switch is unreachable, refused a request, or another controller is primary.

    The job service answers FAILED_PRECONDITION, not UNAVAILABLE: a client
    must be able to tell "the daemon is down" from "the daemon's switch is".
    """


class JobError(ControllerError):
    """A job request cannot be met; `status` says which gRPC code the service answers with."""

    def __init__(self, message: str, status: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION) -> None:
        super().__init__(message)
        self.status = status


class PoolExhausted(JobError):
    """No contiguous free slot range (or no job id) is large enough for a new job."""

    def __init__(self, message: str) -> None:
        super().__init__(message, grpc.StatusCode.RESOURCE_EXHAUSTED)


class QuotaExceeded(JobError):
    """A tenant's quota refuses the job: never a reason to place it elsewhere (controller/quotas.py)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, grpc.StatusCode.RESOURCE_EXHAUSTED)
