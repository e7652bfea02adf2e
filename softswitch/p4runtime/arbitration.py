"""Primary/backup election among the StreamChannel clients of the default role.

The rules follow P4Runtime and PI (the server inside simple_switch_grpc):
a client without an election id is a backup that can never become primary;
two connected clients cannot share an election id (INVALID_ARGUMENT). When
the primary changes every client is told, otherwise only the client that
sent the update; the answer carries the primary's election id and the
status OK ("Is primary"), ALREADY_EXISTS ("Is backup") or NOT_FOUND (there
is no primary).

Who is primary differs where PI breaks the specification:

- the specification (Conformance.SPEC) keeps `election_id_past`, the
  highest election id a primary ever had: a client becomes primary only
  with an id at least that high, and when the primary leaves nobody takes
  its place until a client sends such an id (a backup with a lower one is
  not promoted: it might be a stale controller). NOT_FOUND answers carry
  `election_id_past`;
- PI (Conformance.BMV2) makes the connected client with the highest
  election id primary, so a backup is promoted when the primary leaves;
  NOT_FOUND answers carry the highest id ever seen.

An update that repeats the client's election id changes nothing. A backup
gets no answer (specification and PI agree); the primary's repeat is, by
the specification, an advisory to every client, while PI answers nothing
at all (Conformance.BMV2).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4r, rpc_code, rpc_status

from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.errors import invalid, unknown_role

OUTBOX_SIZE = 4096


def election_id(msg: p4r.Uint128) -> int:
    return (msg.high << 64) | msg.low


def uint128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


@dataclass(frozen=True, slots=True)
class Abort:
    """Put into an outbox: end that client's stream with this status."""

    code: grpc.StatusCode
    message: str


@dataclass(eq=False)
class Client:
    """One StreamChannel: its election id and the messages waiting to be sent to it."""

    election_id: int | None = None
    arbitrated: bool = False
    arbitration: Arbitration | None = None  # of the device its first update named
    outbox: queue.Queue[p4r.StreamMessageResponse | Abort | None] = field(
        default_factory=lambda: queue.Queue(OUTBOX_SIZE)
    )

    def send(self, message: p4r.StreamMessageResponse | Abort | None) -> bool:
        """Queue a message; False when the client is too slow and it was dropped."""
        try:
            self.outbox.put_nowait(message)
        except queue.Full:
            return False
        return True


class Arbitration:
    """The set of arbitrated clients of one device and who is primary."""

    def __init__(self, device_id: int, conformance: Conformance = Conformance.SPEC) -> None:
        self.device_id = device_id
        self.conformance = conformance
        self._lock = threading.Lock()
        self._clients: list[Client] = []
        self._highest_seen = 0
        self._past: int | None = None  # election_id_past: the highest id a primary ever had (SPEC)

    def primary(self) -> Client | None:
        with self._lock:
            return self._primary()

    def _primary(self) -> Client | None:
        candidates = [c for c in self._clients if c.election_id is not None]
        highest = max(candidates, key=lambda c: c.election_id or 0, default=None)
        if self.conformance.bmv2 or highest is None:
            return highest
        return highest if highest.election_id == self._past else None

    def _elect(self, new_id: int | None) -> None:
        """The specification's rule: an id at least election_id_past makes its client the primary."""
        if new_id is not None and (self._past is None or new_id >= self._past):
            self._past = new_id

    def update(self, client: Client, msg: p4r.MasterArbitrationUpdate) -> None:
        """Handle a client's MasterArbitrationUpdate for this device; raises to end its stream."""
        if msg.HasField("role") and (msg.role.name or msg.role.id):
            raise unknown_role(self.conformance)
        new_id = election_id(msg.election_id) if msg.HasField("election_id") else None
        with self._lock:
            if new_id is not None and any(c.election_id == new_id for c in self._clients if c is not client):
                raise invalid(f"Election id {new_id} already exists (used by another client)")
            before = self._primary()
            if client.arbitrated and new_id == client.election_id:
                if before is client and not self.conformance.bmv2:
                    for other in self._clients:  # the advisory of the specification's rule 2.5.1
                        other.send(self._message(other, before))
                return
            client.election_id = new_id
            client.arbitrated = True
            if client not in self._clients:
                self._clients.append(client)
            if new_id is not None:
                self._highest_seen = max(self._highest_seen, new_id)
            self._elect(new_id)
            self._notify(before, client)

    def remove(self, client: Client) -> None:
        """A stream ended: forget the client, tell the others if the primary changed."""
        with self._lock:
            if client not in self._clients:
                return
            before = self._primary()
            self._clients.remove(client)
            self._notify(before, None)

    def is_primary(self, request_election_id: int | None) -> bool:
        """May a Write/SetForwardingPipelineConfig with this election id go ahead?

        Like PI, a request without an election id is accepted while no client
        is connected at all (handy for debugging with plain gRPC tools).
        """
        with self._lock:
            primary = self._primary()
            if primary is None:
                return not self._clients and not request_election_id
            return request_election_id == primary.election_id

    def _notify(self, before: Client | None, sender: Client | None) -> None:
        primary = self._primary()
        targets = self._clients if primary is not before else [c for c in self._clients if c is sender]
        for client in targets:
            client.send(self._message(client, primary))

    def _message(self, client: Client, primary: Client | None) -> p4r.StreamMessageResponse:
        if primary is None:
            status = rpc_status.Status(code=rpc_code.NOT_FOUND, message="no primary")
            eid = self._highest_seen if self.conformance.bmv2 else self._past or 0
        elif primary is client:
            status = rpc_status.Status(code=rpc_code.OK, message="Is primary")
            eid = primary.election_id or 0
        else:
            status = rpc_status.Status(code=rpc_code.ALREADY_EXISTS, message="Is backup")
            eid = primary.election_id or 0
        update = p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=uint128(eid), status=status
        )
        return p4r.StreamMessageResponse(arbitration=update)
