"""The google.rpc.Status of a failed batch Write: one p4.v1.Error per update, or what a client can take.

The specification (Write RPC, "Error Reporting") wants exactly one
`p4.v1.Error` per update, in order, an OK one with code OK and nothing
else. The status travels in the trailing metadata (grpc-status-details-bin),
and a gRPC client takes only `grpc.max_metadata_size` bytes of that (8 KiB
by default; grpcio also has `grpc.absolute_max_metadata_size`, 16 KiB by
default, which follows the first when only the first is raised: between the
two a call fails at random, beyond the second always). A client that gets
more sees RESOURCE_EXHAUSTED and none of the errors. The specification
("gRPC Metadata Maximum Size") makes that the client's to fix, by raising
its channel's limit (its rule of thumb: 8192 + 100 bytes per update of the
largest batch), and PI (simple_switch_grpc) sends every error, whatever the
size. An OK entry is 35 bytes at least, so a 10,000-update batch needs
about 350 KB however compact it is.

So the server has a budget of bytes for the details (`--error-details` of
p4reduce-switch): `ALL` sends every error, as PI does and the specification
asks (the default under Conformance.BMV2); a number of bytes (default
`DEFAULT_BUDGET`, which a client with gRPC's default limit receives) sends
every error whenever they fit, and otherwise compact ones (a failure with
the same code and message as an earlier one repeats only its code) as far
as they fit, with a status message that says how many came, how many
updates failed, which failed first and how to get them all.
"""

from __future__ import annotations

import grpc
from finsy.proto import p4r, rpc_status
from google.protobuf import any_pb2

from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.errors import P4RuntimeError, bounded

ALL = 0  # a budget: every error, whatever the size (PI's answer, the specification's)
# Bytes of details a client with gRPC's default 8 KiB of metadata takes, with the status message (at most
# MESSAGE_LIMIT characters, twice: in grpc-message and in the status) and the other trailers beside them.
DEFAULT_BUDGET = 6 * 1024
MESSAGE_LIMIT = 600
DETAIL_MESSAGE_LIMIT = 120  # characters of an update's message once details are cut to the budget


def default_budget(conformance: Conformance) -> int:
    """The budget the switch starts with: PI's (every error) under BMV2, a default client's otherwise."""
    return ALL if conformance.bmv2 else DEFAULT_BUDGET


def batch_status(errors: list[P4RuntimeError | None], budget: int = DEFAULT_BUDGET) -> rpc_status.Status:
    """The status of a batch in which at least one update failed (None: the update was applied)."""
    failed = [(index, error) for index, error in enumerate(errors) if error is not None]
    message = f"{len(failed)} of {len(errors)} updates failed"
    full = [_packed(error) for error in errors]
    if budget == ALL or sum(_field_size(d) for d in full) <= budget:
        return _status(message, full)
    details = _compact(errors, budget)
    index, first = failed[0]
    first_text = bounded(first.message, DETAIL_MESSAGE_LIMIT)
    message += (
        f"; details of the first {len(details)} updates only, a failure like an earlier one with its code "
        f"alone: more exceed a gRPC client's default 8 KiB of metadata (raise the client's "
        f"grpc.max_metadata_size and start the switch with --error-details all to get one per update); "
        f"the first failure is update {index}: {first.code.name}: {first_text}"
    )
    return _status(bounded(message, MESSAGE_LIMIT), details)


def _compact(errors: list[P4RuntimeError | None], budget: int) -> list[any_pb2.Any]:
    details: list[any_pb2.Any] = []
    seen: set[tuple[grpc.StatusCode, str]] = set()
    size = 0
    for error in errors:
        if error is None:
            packed = _packed(None)
        else:
            repeated = (error.code, error.message) in seen
            seen.add((error.code, error.message))
            text = "" if repeated else bounded(error.message, DETAIL_MESSAGE_LIMIT)
            packed = _pack(p4r.Error(canonical_code=error.code.value[0], message=text))
        size += _field_size(packed)
        if size > budget:
            break
        details.append(packed)
    return details


def _packed(error: P4RuntimeError | None) -> any_pb2.Any:
    """One update's p4.v1.Error: an applied one is code OK and nothing else (the specification's form)."""
    if error is None:
        return _pack(p4r.Error())
    return _pack(p4r.Error(canonical_code=error.code.value[0], message=error.message))


def _pack(error: p4r.Error) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(error)
    return packed


def _field_size(packed: any_pb2.Any) -> int:
    """Bytes the detail adds to the serialized status: the tag, the length and the message."""
    size = packed.ByteSize()
    return 1 + (size.bit_length() + 6) // 7 + size


def _status(message: str, details: list[any_pb2.Any]) -> rpc_status.Status:
    return rpc_status.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message, details=details)
