"""The one exception type the P4Runtime server turns into a gRPC status, and PI's wording.

Every validation step raises `P4RuntimeError` with the canonical code the
P4Runtime specification prescribes; the server decides whether it becomes
the RPC's status (top-level problems) or one `p4.v1.Error` among the
per-update details of a batch Write (as PI / simple_switch_grpc does).
Where PI has a fixed message for an answer a client may act on, the server
uses the same words (the constants below), so logs and error handling
written against bmv2 read the same here.
"""

from __future__ import annotations

import grpc

from softswitch.p4runtime.conformance import Conformance
from softswitch.runtime.state import StateError

NO_PIPELINE = "No forwarding pipeline config set for this device"
NOT_PRIMARY = "Not primary"
INVALID_P4_ID = "Invalid P4 id"
NO_MULTICAST_GROUP = "Multicast group does not exist"
NO_CLONE_SESSION = "Clone session id does not exist"
NO_DIRECT_COUNTER_TABLE = "Missing table_entry field in DirectCounterEntry"
# Answers of PI that only Conformance.BMV2 gives (docs/softswitch.md, "P4Runtime conformance").
TOO_WIDE = "Bytestring provided does not fit within {width} bits"
COUNTER_WILDCARD_WRITE = "Wildcard write is not supported for indirect counters yet"
REGISTER_READS = "Register reads are not supported yet"
DIGEST_WILDCARD_READ = "digest_id must be set when reading DigestEntry"
REGISTER_WRITES = "Register writes are not supported yet"
TABLE_READ_FAILED = "Error when reading table entries from target"
COUNTER_READ_FAILED = "Error when reading counter from target"
TABLE_WRITE_FAILED = {
    "INSERT": "Error when adding match entry to target",
    "MODIFY": "Error when modifying match entry in target",
    "DELETE": "Error when deleting match entry in target",
}
RECONCILE_FAILED = "Error when reconciling config"
UPDATE_BLOCKED = "Error in first phase of device update"


MESSAGE_LIMIT = 300  # characters of an error message: it travels in gRPC metadata (8 KiB by default)


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text`, cut to `limit` characters with a note of how long it was: a client's input echoed in
    an error must never make the answer too large for the client to receive."""
    if len(text) <= limit:
        return text
    note = f"... ({len(text)} characters)"
    return text[: limit - len(note)] + note


class P4RuntimeError(Exception):
    """A request the server refuses, with its canonical gRPC status code and a bounded message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        message = bounded(message)
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


def unknown(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNKNOWN, message)


def unknown_id(what: str, object_id: int, conformance: Conformance) -> P4RuntimeError:
    """An id of a P4 object (table, counter, register, meter, action profile, ...) the P4Info lacks.

    Whether an id exists depends on the pipeline the switch runs, not on the
    request alone, so the specification's code is NOT_FOUND (its rule for a
    `device_id` or `role` that does not exist, and gRPC's: INVALID_ARGUMENT
    is for arguments wrong "regardless of the state of the system"); the
    message starts with PI's words so logs read the same. PI answers
    INVALID_ARGUMENT "Invalid P4 id" (Conformance.BMV2).
    """
    if conformance.bmv2:
        return invalid(INVALID_P4_ID)
    return not_found(f"{INVALID_P4_ID}: the P4Info has no {what} with id {object_id:#x}")


def unknown_role(conformance: Conformance) -> P4RuntimeError:
    """A named role: this target knows only the default one.

    The specification answers a role the server does not know with NOT_FOUND;
    PI refuses roles as a feature it lacks (UNIMPLEMENTED).
    """
    if conformance.bmv2:
        return unimplemented("only the default role is supported (leave role unset)")
    return not_found("unknown role: this switch has only the default role (leave role unset)")
