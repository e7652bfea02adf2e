"""The one exception type the P4Runtime server turns into a gRPC status.

Every validation step raises `P4RuntimeError` with the canonical code the
P4Runtime specification prescribes; the server decides whether it becomes
the RPC's status (top-level problems) or one `p4.v1.Error` among the
per-update details of a batch Write (as PI / simple_switch_grpc does).
"""

from __future__ import annotations

import grpc

from softswitch.runtime.state import StateError


class P4RuntimeError(Exception):
    """A request the server refuses, with its canonical gRPC status code."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_state(cls, error: StateError) -> P4RuntimeError:
        """Translate the runtime state's error (it names codes as strings)."""
        code = getattr(grpc.StatusCode, error.code, grpc.StatusCode.UNKNOWN)
        return cls(code, str(error))


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def out_of_range(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, message)


def already_exists(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, message)


def permission_denied(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, message)
