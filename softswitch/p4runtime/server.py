"""The P4Runtime server of the embedded switch (answers as simple_switch_grpc's does).

Conformance choices, all as PI (the server inside simple_switch_grpc) does
unless noted (docs/softswitch.md has the full table, with PI's answers
that only `Conformance.BMV2` gives):

- A Write applies its updates in order (CONTINUE_ON_ERROR). If any update
  fails the RPC fails with UNKNOWN and `grpc-status-details-bin` carries a
  google.rpc.Status whose details hold one p4.v1.Error per update, in
  order, OK ones with canonical_code 0 alone, as far as `details_budget`
  allows (module `details`). ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC are
  UNIMPLEMENTED.
- Problems with the request as a whole are the RPC's status: not the
  primary (or a stale election id) PERMISSION_DENIED, no pipeline
  FAILED_PRECONDITION, non-default role UNIMPLEMENTED. A failed Read
  answers what it had read before the failure, then the status.
- PacketOut from a backup, or with no CPU port, is dropped silently.
- Where the specification requires it (and PI differs): a wrong device id
  is NOT_FOUND, a config that cannot run is INVALID_ARGUMENT and changes
  nothing, RECONCILE_AND_COMMIT keeps the state that still fits the new
  P4Info (see `reconcile`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc
from finsy.proto import p4i, p4r, p4r_grpc

from softswitch.dataplane.loop import Dataplane
from softswitch.p4runtime.arbitration import Abort, Arbitration, Client, election_id
from softswitch.p4runtime.codec import decode, encode
from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.details import batch_status, default_budget
from softswitch.p4runtime.digests import Digests
from softswitch.p4runtime.entities import EntityStore
from softswitch.p4runtime.errors import (
    NO_PIPELINE,
    NOT_PRIMARY,
    RECONCILE_FAILED,
    UPDATE_BLOCKED,
    P4RuntimeError,
    invalid,
    not_found,
    permission_denied,
    unimplemented,
    unknown,
    unknown_role,
)
from softswitch.p4runtime.reconcile import reconcile
from softswitch.p4runtime.schema import Bits, Schema
from softswitch.runtime import state as st
from softswitch.runtime.build import build_state
from softswitch.runtime.pipeline import Pipeline

API_VERSION = "1.3.0"  # what simple_switch_grpc 1.15 reports; clients choose features by it
READ_CHUNK = 1000
MAX_MESSAGE = 256 * 1024 * 1024
DEFAULT_MAX_STREAMS = 16  # StreamChannels open at once; one more is RESOURCE_EXHAUSTED
UNARY_WORKERS = 8  # threads only unary RPCs use: open streams can never starve them
DIGEST_SWEEP_PERIOD = 0.02  # seconds between checks of digest timeouts (PI: at least 100 ms)

PipelineLoader = Callable[[p4i.P4Info, bytes], Pipeline]
log = logging.getLogger("softswitch.p4runtime")
Action = p4r.SetForwardingPipelineConfigRequest


@dataclass
class Forwarding:
    """A verified pipeline with what the client pushed to get it."""

    config: p4r.ForwardingPipelineConfig
    pipeline: Pipeline | None  # None: a config bmv2 would accept although it cannot run (Conformance.BMV2)
    store: EntityStore


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """P4Runtime for one device: the data plane's pipeline and its state."""

    def __init__(
        self,
        device_id: int,
        dataplane: Dataplane,
        loader: PipelineLoader,
        conformance: Conformance = Conformance.SPEC,
        max_streams: int = DEFAULT_MAX_STREAMS,
        details_budget: int | None = None,
    ) -> None:
        """`details_budget`: bytes of a failed batch's per-update errors (module `details`; 0: all of
        them, as PI sends them; None: the conformance mode's default)."""
        if max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, not {max_streams}")
        if details_budget is not None and details_budget < 0:
            raise ValueError(f"details_budget must be 0 (all) or a number of bytes, not {details_budget}")
        self.details_budget = default_budget(conformance) if details_budget is None else details_budget
        self.device_id = device_id
        self.max_streams = max_streams
        self._streams = threading.BoundedSemaphore(max_streams)
        self.dataplane = dataplane
        self.loader = loader
        self.conformance = conformance
        self.arbitration = Arbitration(device_id, conformance)
        # PI makes a device of every id a client names; only ours ever has a pipeline (Conformance.BMV2).
        self._other_devices: dict[int, Arbitration] = {}
        self.current: Forwarding | None = None
        self.saved: Forwarding | None = None
        self._update_blocked = False  # PI after a failed RECONCILE_AND_COMMIT, until it restarts
        self._config_lock = threading.Lock()
        dataplane.packet_in = self._packet_in
        dataplane.digest = self._digest
        self._sweeper: threading.Thread | None = None  # sends timed digest lists while any is configured
        self._sweeper_lock = threading.Lock()

    # ----------------------------------------------------------- pipeline
    def install(self, config: p4r.ForwardingPipelineConfig) -> None:
        """Verify and commit a pipeline (the daemon's program given on the command line)."""
        with self._config_lock:
            self._commit(self._verify(config), reconcile_state=False)

    def _verify(self, config: p4r.ForwardingPipelineConfig) -> Forwarding:
        if not config.HasField("p4info"):
            raise invalid("the forwarding pipeline config has no P4Info")
        schema = Schema.from_p4info(config.p4info)
        try:
            pipeline = self.loader(config.p4info, config.p4_device_config)
        except P4RuntimeError:
            raise
        except Exception as error:  # the loader's own validation, whatever it raises
            raise invalid(f"invalid device config: {error}") from None
        digests = Digests(config.p4info)
        return Forwarding(
            config, pipeline, EntityStore(schema, pipeline.state, self.conformance, digests=digests)
        )

    def _verify_as_target(self, config: p4r.ForwardingPipelineConfig) -> Forwarding:
        """`_verify`, except that under Conformance.BMV2 a config that cannot run is accepted, as PI does.

        PI hands the device config to bmv2 without checking it; the pipeline
        it keeps has the pushed P4Info (or none) and a target that fails
        every table and counter operation.
        """
        try:
            return self._verify(config)
        except P4RuntimeError as error:
            if not self.conformance.bmv2:
                raise
            log.warning("accepting a config that cannot run, as bmv2 does: %s", error.message)
        try:
            schema = Schema.from_p4info(config.p4info)
            store = EntityStore(schema, build_state(config.p4info, {}, {}), self.conformance, broken=True)
        except Exception:  # a P4Info this target cannot even index: a pipeline without objects
            store = EntityStore(Schema(), st.RuntimeState(), self.conformance, broken=True)
        return Forwarding(config, None, store)

    def _commit(self, new: Forwarding, reconcile_state: bool) -> None:
        with self.dataplane.lock:
            if reconcile_state and self.current is not None:
                for note in reconcile(self.current.store, new.store):
                    log.info("reconcile: %s", note)
            self.dataplane.pipeline = new.pipeline
            self.current = new
        log.info("pipeline committed: %s", _describe(new.config))

    def SetForwardingPipelineConfig(  # noqa: N802 - gRPC method name
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        with _status(context):
            self._check_device(request.device_id, request)
            self._check_role(request.role, request.role_id)
            self._check_primary(request)
            with self._config_lock:
                action = request.action
                if self._update_blocked and action != Action.VERIFY and action != Action.COMMIT:
                    raise unknown(UPDATE_BLOCKED)
                if action == Action.VERIFY:
                    self._verify_as_target(request.config)
                elif action == Action.VERIFY_AND_SAVE:
                    self.saved = self._verify_as_target(request.config)
                elif action in (Action.VERIFY_AND_COMMIT, Action.RECONCILE_AND_COMMIT):
                    new = self._verify_as_target(request.config)
                    if action == Action.RECONCILE_AND_COMMIT:
                        self._check_reconcilable()
                    self._commit(new, reconcile_state=action == Action.RECONCILE_AND_COMMIT)
                    self.saved = None
                elif action == Action.COMMIT:
                    self._check_commit(request)
                    assert self.saved is not None
                    self._commit(self.saved, reconcile_state=False)
                    self.saved = None
                else:
                    raise invalid(
                        "action must be VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT "
                        "or RECONCILE_AND_COMMIT"
                    )
        return p4r.SetForwardingPipelineConfigResponse()

    def _check_commit(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        """COMMIT realizes the config VERIFY_AND_SAVE saved: it carries none and needs one saved.

        The specification: a config in the request is INVALID_ARGUMENT, nothing saved NOT_FOUND.
        Under Conformance.BMV2 a config in the request is ignored and nothing saved is
        FAILED_PRECONDITION, as this server answered before it followed the specification here.
        """
        if request.HasField("config") and not self.conformance.bmv2:
            raise invalid("COMMIT carries no config: it commits the one saved by VERIFY_AND_SAVE")
        if self.saved is None:
            code = grpc.StatusCode.FAILED_PRECONDITION if self.conformance.bmv2 else grpc.StatusCode.NOT_FOUND
            raise P4RuntimeError(code, "COMMIT without a config saved by VERIFY_AND_SAVE")

    def _check_reconcilable(self) -> None:
        """PI replays every counter cell as an INSERT, which it refuses; it is stuck until restarted."""
        if self.conformance.bmv2 and self.current is not None and self.current.store.schema.counters:
            self._update_blocked = True
            log.warning("RECONCILE_AND_COMMIT failed as bmv2's does; pipeline pushes fail until a restart")
            raise unknown(RECONCILE_FAILED)

    def GetForwardingPipelineConfig(  # noqa: N802 - gRPC method name
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        with _status(context):
            self._check_device(request.device_id)
            config = self._forwarding().config
            kind = request.response_type
            out = p4r.ForwardingPipelineConfig()
            if config.HasField("cookie"):
                out.cookie.CopyFrom(config.cookie)
            Kind = p4r.GetForwardingPipelineConfigRequest
            if kind in (Kind.ALL, Kind.P4INFO_AND_COOKIE):
                out.p4info.CopyFrom(config.p4info)
            if kind in (Kind.ALL, Kind.DEVICE_CONFIG_AND_COOKIE):
                out.p4_device_config = config.p4_device_config
            if kind not in Kind.ResponseType.values():
                raise invalid(f"unknown response_type {kind}")
            return p4r.GetForwardingPipelineConfigResponse(config=out)
        return p4r.GetForwardingPipelineConfigResponse()  # not reached: _status aborted

    def Capabilities(  # noqa: N802 - gRPC method name
        self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # -------------------------------------------------------- write / read
    def Write(  # noqa: N802 - gRPC method name
        self, request: p4r.WriteRequest, context: grpc.ServicerContext
    ) -> p4r.WriteResponse:
        with _status(context):
            self._check_device(request.device_id, request)
            self._check_role(request.role, request.role_id)
            self._check_primary(request)
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise unimplemented("only CONTINUE_ON_ERROR atomicity is supported")
            errors: list[P4RuntimeError | None] = []
            # The config lock keeps a concurrent pipeline change from losing this batch.
            with self._config_lock, self.dataplane.lock:
                store = self._forwarding().store
                for update in request.updates:
                    try:
                        store.write(update)
                        errors.append(None)
                    except P4RuntimeError as error:
                        errors.append(error)
            if any(u.entity.HasField("digest_entry") for u in request.updates) and store.digests.timed():
                self._start_sweeper()
            failed = [e for e in errors if e is not None]
            if failed:
                for error in failed:
                    log.info("write refused: %s %s", error.code.name, error.message)
                _abort_batch(context, errors, self.details_budget)
        return p4r.WriteResponse()

    def Read(  # noqa: N802 - gRPC method name
        self, request: p4r.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4r.ReadResponse]:
        entities: list[p4r.Entity] = []
        failure: P4RuntimeError | None = None
        with _status(context):
            self._check_device(request.device_id)
            self._check_role(request.role, 0)
            store = self._forwarding().store
            with self.dataplane.lock:
                try:
                    for entity in request.entities:
                        for found in store.read(entity):
                            entities.append(found)
                except P4RuntimeError as error:
                    failure = error  # PI answers what it read before the failure, then the status
        if not entities and failure is None:
            yield p4r.ReadResponse()
        for start in range(0, len(entities), READ_CHUNK):
            yield p4r.ReadResponse(entities=entities[start : start + READ_CHUNK])
        if failure is not None:
            context.abort(failure.code, failure.message)

    # ------------------------------------------------------------- stream
    def StreamChannel(  # noqa: N802 - gRPC method name
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        if not self._streams.acquire(blocking=False):
            log.warning("refused a StreamChannel: %d are open, the most this switch serves", self.max_streams)
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.max_streams} StreamChannels are open, the most this switch serves "
                "(p4reduce-switch --max-streams): close one first",
            )
        try:
            yield from self._stream(request_iterator, context)
        finally:
            self._streams.release()

    def _stream(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        client = Client()
        context.add_callback(lambda: client.send(None))
        reader = threading.Thread(
            target=self._read_stream, args=(client, request_iterator), name="p4rt-stream", daemon=True
        )
        reader.start()
        try:
            while True:
                item = client.outbox.get()
                if item is None:
                    return
                if isinstance(item, Abort):
                    context.abort(item.code, item.message)
                yield item
        finally:
            if client.arbitration is not None:
                client.arbitration.remove(client)

    def _read_stream(self, client: Client, requests: Iterator[p4r.StreamMessageRequest]) -> None:
        try:
            for request in requests:
                which = request.WhichOneof("update")
                if which == "arbitration":
                    self._arbitrate(client, request.arbitration)
                elif which == "packet":
                    self._packet_out(client, request.packet)
                elif which == "digest_ack":
                    self._digest_ack(client, request.digest_ack)
                else:
                    client.send(
                        _stream_error(
                            grpc.StatusCode.UNIMPLEMENTED,
                            f"stream message {which or '(empty)'} is not supported",
                        )
                    )
        except P4RuntimeError as error:
            client.send(Abort(error.code, error.message))
            return
        except grpc.RpcError:
            pass  # the client went away
        except Exception:  # a server bug must end this stream, not leave it hanging
            log.exception("StreamChannel request handling failed")
            client.send(Abort(grpc.StatusCode.INTERNAL, "internal error; see the switch log"))
            return
        client.send(None)

    def _arbitrate(self, client: Client, msg: p4r.MasterArbitrationUpdate) -> None:
        if client.arbitration is None:
            client.arbitration = self._device_arbitration(msg.device_id)
        elif msg.device_id != client.arbitration.device_id:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "Invalid device id")
        client.arbitration.update(client, msg)

    def _device_arbitration(self, device_id: int) -> Arbitration:
        if device_id == self.device_id:
            return self.arbitration
        if not self.conformance.bmv2:
            raise self._no_device(device_id)
        return self._other_devices.setdefault(device_id, Arbitration(device_id, self.conformance))

    def _packet_out(self, client: Client, packet: p4r.PacketOut) -> None:
        # PI drops a PacketOut from a backup, or with nowhere to go, without a word.
        if self.arbitration.primary() is not client:
            self.dataplane.stats["dropped_packet_out_not_primary"] += 1
            return
        if self.dataplane.cpu_port is None:
            self.dataplane.stats["dropped_packet_out_no_cpu_port"] += 1
            return
        fields = self.current.store.schema.packet_out if self.current is not None else ()
        try:
            header = _packet_out_header(fields, packet.metadata)
        except P4RuntimeError as refused:
            message = _stream_error(refused.code, refused.message)
            message.error.packet_out.packet_out.CopyFrom(packet)
            client.send(message)
            return
        self.dataplane.inject(self.dataplane.cpu_port, header + packet.payload)

    def _packet_in(self, frame: bytes) -> None:
        primary = self.arbitration.primary()
        if primary is None:
            self.dataplane.stats["dropped_packet_in_no_primary"] += 1
            return
        forwarding = self.current
        fields = forwarding.store.schema.packet_in if forwarding is not None else ()
        packet = p4r.PacketIn(payload=frame)
        if fields:
            width = sum(f.width for f in fields)
            size = (width + 7) // 8
            if len(frame) < size:
                self.dataplane.stats["dropped_packet_in_short"] += 1
                return
            value = int.from_bytes(frame[:size], "big") >> (size * 8 - width)
            shift = width
            for field in fields:
                shift -= field.width
                packet.metadata.append(
                    p4r.PacketMetadata(
                        metadata_id=field.id, value=encode((value >> shift) & ((1 << field.width) - 1))
                    )
                )
            packet.payload = frame[size:]
        if not primary.send(p4r.StreamMessageResponse(packet=packet)):
            self.dataplane.stats["dropped_packet_in_slow_client"] += 1

    # ------------------------------------------------------------ digests
    def _digest(self, index: int, data: bytes) -> None:
        """A digest message from the data plane (the packet loop's thread)."""
        forwarding = self.current
        if forwarding is None:
            return
        for message in forwarding.store.digests.learn(index, data):
            self._send_digest(message)

    def _send_digest(self, message: p4r.DigestList) -> None:
        # PI sends to the primary; with none, the list is lost (its samples stay cached until they expire).
        primary = self.arbitration.primary()
        if primary is None:
            self.dataplane.stats["dropped_digest_no_primary"] += 1
        elif not primary.send(p4r.StreamMessageResponse(digest=message)):
            self.dataplane.stats["dropped_digest_slow_client"] += 1

    def _digest_ack(self, client: Client, ack: p4r.DigestListAck) -> None:
        forwarding = self.current
        if forwarding is not None and self.arbitration.primary() is client:  # PI ignores others' acks
            forwarding.store.digests.ack(ack.digest_id, ack.list_id)

    def _start_sweeper(self) -> None:
        with self._sweeper_lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_digests, name="p4rt-digests", daemon=True)
                self._sweeper.start()

    def _sweep_digests(self) -> None:
        """Send lists whose max_timeout_ns passed and expire unacknowledged ones, while any has a timeout."""
        while True:
            time.sleep(DIGEST_SWEEP_PERIOD)
            forwarding = self.current
            with self._sweeper_lock:
                if forwarding is None or not forwarding.store.digests.timed():
                    self._sweeper = None
                    return
            for message in forwarding.store.digests.sweep():
                self._send_digest(message)

    # ------------------------------------------------------------- checks
    def _check_device(
        self, device_id: int, request: p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest | None = None
    ) -> None:
        """The specification's NOT_FOUND for a device id that is not ours; PI's answers under BMV2.

        PI makes a device of any id and answers as that device would: no
        pipeline (FAILED_PRECONDITION) to a read, "Not primary" to a write
        whose election id is not its primary's.
        """
        if device_id == self.device_id:
            return
        if not self.conformance.bmv2:
            raise self._no_device(device_id)
        other = self._other_devices.get(device_id) or Arbitration(device_id, self.conformance)
        if request is not None:
            requested = election_id(request.election_id) if request.HasField("election_id") else None
            if not other.is_primary(requested):
                raise permission_denied(NOT_PRIMARY)
        raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)

    def _no_device(self, device_id: int) -> P4RuntimeError:
        return not_found(f"device id {device_id} does not exist (this is device {self.device_id})")

    def _check_role(self, role: str, role_id: int) -> None:
        if role or role_id:
            raise unknown_role(self.conformance)

    def _check_primary(self, request: p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest) -> None:
        requested = election_id(request.election_id) if request.HasField("election_id") else None
        if not self.arbitration.is_primary(requested):
            raise permission_denied(NOT_PRIMARY)

    def _forwarding(self) -> Forwarding:
        current = self.current
        if current is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        return current


def serve(service: P4RuntimeService, address: str, unary_workers: int = UNARY_WORKERS) -> grpc.Server:
    """Start a gRPC server for the service; raises OSError when the address cannot be bound.

    A StreamChannel holds one of the pool's threads while it is open, so the
    pool has one thread per stream the service admits plus `unary_workers`
    that only unary RPCs (Write, Read, pipeline config) can take.
    """
    workers = service.max_streams + unary_workers
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.so_reuseport", 0),
        ],
    )
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen on {address} (in use, or not an address of this host)")
    server.start()
    return server


# ======================================================================= helpers
class _status:  # noqa: N801 - used as a statement: `with _status(context):`
    """Turn a P4RuntimeError raised inside the block into the RPC's status."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        self.context = context

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, error: BaseException | None, tb: object) -> bool:
        if isinstance(error, P4RuntimeError):
            self.context.abort(error.code, error.message)
        return False


def _abort_batch(context: grpc.ServicerContext, errors: list[P4RuntimeError | None], budget: int) -> None:
    status = batch_status(errors, budget)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(grpc.StatusCode.UNKNOWN, status.message)


def _stream_error(code: grpc.StatusCode, message: str) -> p4r.StreamMessageResponse:
    return p4r.StreamMessageResponse(error=p4r.StreamError(canonical_code=code.value[0], message=message))


def _packet_out_header(fields: tuple[Bits, ...], metadata: list[p4r.PacketMetadata]) -> bytes:
    """The packet_out header bytes the program parses in front of the payload."""
    if not fields:
        if metadata:
            raise invalid("PacketOut has metadata but the program declares no packet_out header")
        return b""
    given = {}
    for item in metadata:
        if item.metadata_id in given:
            raise invalid(f"PacketOut metadata id {item.metadata_id} given twice")
        given[item.metadata_id] = item.value
    value = 0
    width = 0
    for field in fields:
        if field.id not in given:
            raise invalid(f"PacketOut metadata {field.name} (id {field.id}) is missing")
        value = (value << field.width) | decode(given.pop(field.id), field.width, f"PacketOut {field.name}")
        width += field.width
    if given:
        raise invalid(f"PacketOut metadata ids {sorted(given)} are unknown")
    size = (width + 7) // 8
    return (value << (size * 8 - width)).to_bytes(size, "big")


def _describe(config: p4r.ForwardingPipelineConfig) -> str:
    info = config.p4info
    name = info.pkg_info.name or "program"
    cookie = f", cookie {config.cookie.cookie:#x}" if config.HasField("cookie") else ""
    return f"{name} ({len(info.tables)} tables, {len(info.registers)} registers{cookie})"
