"""One P4Runtime session to one switch: connect, win arbitration, push the pipeline, write, read.

The session holds the StreamChannel itself and uses finsy for what is
generic (P4Info-driven encoding of names to ids, the cookie of a pipeline,
error details). Owning the stream is what lets the controller keep its
configured election id (finsy's arbitrator raises it to the highest id the
switch reports, so a daemon that once yielded to `--election-id 20` came
back as 20 at once and refused the next such command as a duplicate; it
raises its id only by the policy of module `mastership`, after a wait),
notice at once that the stream is gone (`lost`) or that another controller
took the switch, and never start finsy's gNMI client
(its warnings leaked into every log). Around the protocol it adds what an
operator needs: a bounded connect that says *why* it failed, a pipeline
push that is skipped when the switch already runs the same pair of files
(the cookie is finsy's hash of both), and write errors turned into one
readable line per failed update instead of a protobuf dump.

It works with both answers a switch may give where bmv2 and the P4Runtime
specification differ (docs/softswitch.md): an entity read by its key that
does not exist is absent, whether the switch says NOT_FOUND (bmv2, for a
multicast group) or answers nothing; a device config is checked before it
is pushed (bmv2 accepts any bytes) and the push is confirmed by reading
back the cookie and one table (bmv2 fails reads after accepting a config it
cannot run). It pushes with VERIFY_AND_COMMIT only: bmv2 fails
RECONCILE_AND_COMMIT with counters in the program and refuses every push
after that until it restarts. finsy sends one arbitration update per
stream and waits for its answer only when it sends a new election id (bmv2
answers nothing to a repeated one). Registers are never read or written
(bmv2 implements neither).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import finsy as fy
import grpc
from finsy import p4entity
from finsy.p4client import P4ClientError
from finsy.proto import U128, p4r, p4r_grpc, rpc_code

from controller.device_config import Target, check_device_config
from controller.errors import SwitchError
from controller.mastership import LinkStats, Mastership, MastershipSettings, Policy
from controller.p4info import controller_view, read_p4info

log = logging.getLogger("controller.switch")

CONNECT_TIMEOUT = 10.0
PUSH_TIMEOUT = 120.0  # a target may compile the program while it answers
RPC_TIMEOUT = 30.0
CHANNEL_OPTIONS = [
    ("grpc.max_metadata_size", 64 * 1024),  # a failed batch's details (bmv2 sends them all)
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),  # reads of big tables, device configs
]


@dataclass(frozen=True)
class Update:
    """One write: a finsy entity with its operation ('+' insert, '~' modify, '-' delete) and a label."""

    op: str
    entity: Any
    label: str

    def marked(self) -> Any:
        return {"+": lambda e: +e, "~": lambda e: ~e, "-": lambda e: -e}[self.op](self.entity)


_VERB = {"+": "insert", "~": "modify", "-": "delete"}


class SwitchSession:
    """An open, primary P4Runtime session; use as `async with SwitchSession(...) as s`."""

    def __init__(
        self,
        name: str,
        address: str,
        *,
        device_id: int = 1,
        election_id: int = 10,
        p4info: Path | None = None,
        device_config: Path | None = None,
        force_push: bool = False,
        require_primary: bool = True,
        target: Target | None = None,
        mastership: MastershipSettings | None = None,
        stats: LinkStats | None = None,
    ) -> None:
        """`mastership`: what to do when another controller takes the switch (default: yield, as a
        one-shot command does); `stats`: the link's figures, shared by the sessions of one keeper."""
        self.name = name
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.p4info_path = p4info
        self.device_config_path = device_config
        self.force_push = force_push
        self.require_primary = require_primary  # False: a backup session that only reads
        self.target = target  # None: whichever kind the device config is (the push confirms it runs)
        self.pushed = False  # True when this session installed the pipeline
        self.device_kind: Target | None = None  # what the device config file is, once checked
        self.mastership = Mastership(
            self.where, election_id, mastership or MastershipSettings(), stats or LinkStats()
        )
        self.one_shot = mastership is None  # a CLI command (--election-id), not the daemon (its config)
        self.lost = asyncio.Event()  # set when the stream ends: the switch restarted, or the link broke
        self.lost_at = 0.0  # time.monotonic() when it ended
        self._schema: fy.P4Schema | None = None
        self._channel: grpc.aio.Channel | None = None
        self._stub: p4r_grpc.P4RuntimeStub | None = None
        self._stream: Any = None  # grpc.aio.StreamStreamCall
        self._watcher: asyncio.Task[None] | None = None
        self._reclaimer: asyncio.Task[None] | None = None
        self._arbitrated = asyncio.Event()  # set by every arbitration update the stream brings

    @property
    def stats(self) -> LinkStats:
        return self.mastership.stats

    @property
    def is_primary(self) -> bool:
        return self.mastership.stats.is_primary

    @property
    def primary_id(self) -> int | None:
        """The other primary's election id as the switch last told (None: none, or we are primary)."""
        return self.mastership.primary_id

    @property
    def where(self) -> str:
        return f"switch {self.name}" if self.name == self.address else f"switch {self.name} at {self.address}"

    @property
    def is_up(self) -> bool:
        return self._stub is not None and not self.lost.is_set()

    def _live_stub(self) -> p4r_grpc.P4RuntimeStub:
        if self.lost.is_set():
            ago = time.monotonic() - self.lost_at
            raise SwitchError(
                f"{self.where}: the P4Runtime connection was lost {ago:.1f} s ago (a running daemon "
                "reconnects by itself once the switch answers again)"
            )
        if self._stub is None:
            raise SwitchError(f"{self.where}: not connected")
        return self._stub

    @property
    def schema(self) -> fy.P4Schema:
        if self._schema is None:
            raise SwitchError(f"{self.where}: not connected")
        return self._schema

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def open(self) -> None:
        """Connect, arbitrate with the configured election id, push the pipeline when it differs."""
        pipeline = self._load_pipeline()
        running_cookie = await self._probe()
        self._channel = grpc.aio.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        try:
            if self.require_primary:  # a session that only reads needs no stream (and takes no id)
                await self._arbitrate()
                if not self.is_primary:
                    raise SwitchError(self._not_primary())
            if pipeline is not None and (self.force_push or running_cookie != pipeline.p4cookie):
                await self._push(pipeline)
                await self._confirm_push(pipeline)
                self.pushed = True
                log.info("%s: pipeline pushed (%s)", self.where, pipeline.get_pipeline_info())
            self._schema = self._names(pipeline if pipeline is not None else await self._running_schema())
            if self._stream is not None:
                self._watcher = asyncio.create_task(self._watch(), name=f"p4runtime-stream-{self.name}")
                if self.mastership.settings.policy is Policy.RECLAIM:
                    self._reclaimer = asyncio.create_task(self._reclaim(), name=f"mastership-{self.name}")
        except BaseException:
            await self.close()
            raise

    def _not_primary(self) -> str:
        return (
            f"{self.where}: arbitration lost: another controller is primary with election id "
            f"{self.primary_id} (ours is {self.election_id}): a running `p4reduce-ctl serve`? Stop it "
            "first, or take the switch with a higher --election-id (the P4Runtime rule election_id_past "
            "then keeps the other controller from taking it back until it uses a higher id too)"
        )

    async def _arbitrate(self) -> None:
        """One MasterArbitrationUpdate with our election id, and the switch's answer to it."""
        assert self._stub is not None
        self._stream = self._stub.StreamChannel()
        update = p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=U128.encode(self.election_id)
        )
        try:
            await self._stream.write(p4r.StreamMessageRequest(arbitration=update))
            async with asyncio.timeout(CONNECT_TIMEOUT):  # not wait_for: see _reclaim
                reply = await self._next_arbitration()
        except TimeoutError:
            raise SwitchError(f"{self.where}: no arbitration answer within {CONNECT_TIMEOUT:.0f} s") from None
        except grpc.aio.AioRpcError as exc:
            raise SwitchError(f"{self.where}: {describe_stream_error(exc, self.election_id)}") from None
        self._take(reply)
        reclaim = self.mastership.reclaim_with()
        if reply.status.code == rpc_code.NOT_FOUND and self.mastership.settings.policy is Policy.RECLAIM:
            log.warning("%s: nobody is primary and the switch takes no election id below %d "
                        "(election_id_past): arbitrating with %d (controller.mastership: reclaim)",
                        self.where, reclaim, reclaim)  # fmt: skip
            self.election_id = reclaim
            update.election_id.CopyFrom(U128.encode(reclaim))
            try:
                await self._stream.write(p4r.StreamMessageRequest(arbitration=update))
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reply = await self._next_arbitration()
            except (TimeoutError, grpc.aio.AioRpcError):
                raise SwitchError(
                    f"{self.where}: no answer to arbitration with election id {reclaim}"
                ) from None
            self._take(reply)
        if reply.status.code == rpc_code.NOT_FOUND:
            past = self.mastership.past_id
            remedy = (
                f"give --election-id {past} or higher"
                if self.one_shot
                else f"configure controller.election_id >= {past}, or controller.mastership: reclaim"
            )
            raise SwitchError(
                f"{self.where} has no primary and will take none below election id {past} (the P4Runtime "
                f"rule election_id_past: a controller with {past} held it before); ours is "
                f"{self.election_id}: {remedy}, or restart the switch"
            )

    async def _next_arbitration(self) -> p4r.MasterArbitrationUpdate:
        while True:
            message = await self._stream.read()
            if message is grpc.aio.EOF:
                raise SwitchError(f"{self.where} closed the P4Runtime stream during arbitration")
            if message.HasField("arbitration"):
                return message.arbitration

    def _take(self, update: p4r.MasterArbitrationUpdate) -> None:
        """Who is primary, from an arbitration message of the switch."""
        self.mastership.take(update, self.election_id, announce=self._watcher is not None)
        self._arbitrated.set()

    async def _reclaim(self) -> None:
        """controller.mastership reclaim: take the switch back by the specification's rule once nobody
        has been primary for the retry period (module `mastership`)."""
        while True:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the inner result when the task
            # is cancelled just as the event is set (gh-86296), and this loop would then outlive close(),
            # whose `await task` waits for it for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.mastership.wait_seconds()):
                    await self._arbitrated.wait()
            self._arbitrated.clear()
            election = self.mastership.due()
            if election is None or self._stream is None:
                continue
            retry, past = self.mastership.settings.retry_seconds, self.mastership.past_id
            log.warning("%s: nobody has been primary for %g s: taking the switch back with election id %d "
                        "(election_id_past %d; controller.mastership: reclaim)",
                        self.where, retry, election, past)  # fmt: skip
            self.election_id = election
            self.mastership.orphaned_at = time.monotonic()  # again only after another period without answer
            update = p4r.MasterArbitrationUpdate(device_id=self.device_id, election_id=U128.encode(election))
            try:
                await self._stream.write(p4r.StreamMessageRequest(arbitration=update))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                return  # the stream ended: the watcher reports it and the keeper reconnects

    async def _watch(self) -> None:
        """Read the stream until it ends; then `lost` tells whoever keeps this switch."""
        try:
            while True:
                message = await self._stream.read()
                if message is grpc.aio.EOF:
                    break
                if message.HasField("arbitration"):
                    self._take(message.arbitration)
                elif message.HasField("error"):
                    log.warning("%s: stream error %s", self.where, message.error.message)
        except grpc.aio.AioRpcError as exc:
            log.debug("%s: stream ended: %s", self.where, exc.code().name)
        except asyncio.CancelledError:
            return  # closed by us
        self.lost_at = time.monotonic()
        self.mastership.stats.is_primary = False
        self.lost.set()
        log.warning("%s: the P4Runtime connection was lost", self.where)

    async def _running_schema(self) -> fy.P4Schema:
        """The P4Info the switch runs (commands given no P4Info file)."""
        request = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        )
        try:
            reply = await self._live_stub().GetForwardingPipelineConfig(request, timeout=RPC_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise SwitchError(
                    f"{self.where} has no pipeline; push one with "
                    "`p4reduce-ctl pipeline push` or `p4reduce-ctl provision`"
                ) from None
            raise SwitchError(f"{self.where}: {exc.code().name}: {exc.details()}") from None
        return fy.P4Schema(reply.config.p4info)

    @staticmethod
    def _names(pipeline: fy.P4Schema) -> fy.P4Schema:
        """The schema the controller encodes its names with: the pipeline's own, or for the Tofino compiler's
        P4Info form its view (module `p4info`); the switch is always given the pipeline as compiled."""
        view = controller_view(pipeline.p4info)
        return pipeline if view is pipeline.p4info else fy.P4Schema(view)

    def _load_pipeline(self) -> fy.P4Schema | None:
        """P4Info + device config as finsy's schema (which also computes the cookie of the pair)."""
        if self.p4info_path is None and self.device_config_path is None:
            return None
        if self.p4info_path is None or self.device_config_path is None:
            raise SwitchError("a pipeline needs both a P4Info file and a device config file")
        for path, what in ((self.p4info_path, "P4Info"), (self.device_config_path, "device config")):
            if not path.is_file():
                raise SwitchError(f"{what} file {path} not found (build it first, e.g. `make build`)")
        schema = fy.P4Schema(read_p4info(self.p4info_path), self.device_config_path)
        self.device_kind = check_device_config(self.device_config_path, schema, self.target)
        return schema

    async def _push(self, pipeline: fy.P4Schema) -> None:
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=U128.encode(self.election_id),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=pipeline.get_pipeline_config(),
        )
        try:
            await self._live_stub().SetForwardingPipelineConfig(request, timeout=PUSH_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            raise SwitchError(
                f"{self.where} refused the pipeline: {exc.code().name}: {exc.details()}"
            ) from None

    async def _confirm_push(self, pipeline: fy.P4Schema) -> None:
        """The switch runs what was pushed: its cookie is ours and it can read a table of the program."""
        stub = self._live_stub()
        try:
            reply = await stub.GetForwardingPipelineConfig(
                p4r.GetForwardingPipelineConfigRequest(
                    device_id=self.device_id,
                    response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY,
                ),
                timeout=CONNECT_TIMEOUT,
            )
            cookie = reply.config.cookie.cookie if reply.config.HasField("cookie") else None
            if cookie != pipeline.p4cookie:
                raise SwitchError(
                    f"{self.where} accepted the pipeline but runs another one (cookie {cookie} is not "
                    f"{pipeline.p4cookie}): is another controller pushing to it?"
                )
            tables = list(pipeline.tables)
            if tables:
                entity = p4r.Entity(table_entry=p4r.TableEntry(table_id=tables[0].id))
                read = p4r.ReadRequest(device_id=self.device_id, entities=[entity])
                async for _ in stub.Read(read, timeout=CONNECT_TIMEOUT):
                    pass
        except grpc.aio.AioRpcError as exc:
            kind = f" is {self.device_kind.device_config}" if self.device_kind is not None else ""
            raise SwitchError(
                f"{self.where} accepted the pipeline but cannot use it ({exc.code().name}: "
                f"{exc.details()}); device config {self.device_config_path}{kind}: "
                "is that what this switch runs?"
            ) from None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for task in (self._reclaimer, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reclaimer = self._watcher = None
        self.mastership.stats.is_primary = False  # a closed session holds nothing
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._channel is not None:
            channel, self._channel, self._stub = self._channel, None, None
            await channel.close()

    async def _probe(self) -> int | None:
        """The cookie of the running pipeline (None without one); also proves the switch answers."""
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = p4r_grpc.P4RuntimeStub(channel)
            request = p4r.GetForwardingPipelineConfigRequest(
                device_id=self.device_id,
                response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY,
            )
            try:
                reply = await stub.GetForwardingPipelineConfig(request, timeout=CONNECT_TIMEOUT)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                    return None  # no pipeline yet
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise SwitchError(f"{self.where} is unreachable (is the switch running?)") from None
                raise SwitchError(f"{self.where}: {exc.code().name}: {exc.details()}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    async def write(self, updates: Sequence[Update]) -> None:
        """One batched WriteRequest; a failure names every update the switch refused."""
        if not updates:
            return
        self.stats.writes_total += 1
        try:
            await self._write(updates)
        except SwitchError:
            self.stats.write_errors_total += 1
            raise

    async def _write(self, updates: Sequence[Update]) -> None:
        stub = self._live_stub()
        if self._stream is not None and not self.is_primary:  # the switch would refuse it: say who holds it
            raise SwitchError(self.mastership.refusal(self.election_id))
        request = p4r.WriteRequest(
            device_id=self.device_id,
            election_id=U128.encode(self.election_id),
            updates=p4entity.encode_updates([u.marked() for u in updates], self.schema),
        )
        try:
            await stub.Write(request, timeout=RPC_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            error = P4ClientError(exc, "Write", msg=request, schema=self.schema)
            raise SwitchError(f"{self.where}: {describe_write_error(error, updates)}") from None

    async def read(self, query: Any) -> list[Any]:
        """What the switch holds for `query`; an entity asked for by its key and absent is an empty list."""
        stub = self._live_stub()
        request = p4r.ReadRequest(
            device_id=self.device_id, entities=p4entity.encode_entities([query], self.schema)
        )
        try:
            return [
                p4entity.decode_entity(entity, self.schema)
                async for reply in stub.Read(request, timeout=RPC_TIMEOUT)
                for entity in reply.entities
            ]
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND and addresses_one(query):
                return []  # bmv2's answer for a multicast group or clone session id nobody inserted
            error = P4ClientError(exc, "Read")
            raise SwitchError(f"{self.where}: read failed: {describe_client_error(error)}") from None


def addresses_one(query: Any) -> bool:
    """Whether a read names one entity by its key (rather than a wildcard)."""
    if isinstance(query, fy.P4MulticastGroupEntry):
        return query.multicast_group_id != 0
    if isinstance(query, fy.P4CloneSessionEntry):
        return query.session_id != 0
    if isinstance(query, fy.P4TableEntry):
        return bool(query.match) or query.is_default_action
    return False


def describe_stream_error(exc: grpc.aio.AioRpcError, election_id: int) -> str:
    """Why the switch ended our StreamChannel before it answered our arbitration."""
    code = exc.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return "unreachable (is the switch running?)"
    if code == grpc.StatusCode.INVALID_ARGUMENT and "exists" in (exc.details() or ""):
        return (
            f"election id {election_id} is held by another connected controller (the P4Runtime "
            "rule: ids are unique): give this one another --election-id"
        )
    return f"{code.name}: {exc.details()}"


def describe_client_error(exc: P4ClientError) -> str:
    code = exc.code.name
    if code == "UNAVAILABLE":
        return "unreachable (is the switch running?)"
    if code == "PERMISSION_DENIED":
        return f"not the primary controller any more ({exc.message})"
    return f"{code}: {exc.message}"


def describe_write_error(exc: P4ClientError, updates: Sequence[Update]) -> str:
    if not exc.details:
        return f"write of {len(updates)} update(s) failed: {describe_client_error(exc)}"
    failed = []
    for index, error in sorted(exc.details.items()):
        label = f"{_VERB[updates[index].op]} {updates[index].label}" if index < len(updates) else f"#{index}"
        failed.append(f"{label}: {error.canonical_code.name} {error.message}".rstrip())
    return f"refused {len(failed)} of {len(updates)} update(s): " + "; ".join(failed)
