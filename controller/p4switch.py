"""One P4Runtime session to one switch: connect, win arbitration, push the pipeline, write, read.

finsy's `Switch` does the protocol work (stream, arbitration, P4Info-driven
encoding of names to ids). This class adds what an operator needs around
it: a bounded connect that says *why* it failed, a pipeline push that is
skipped when the switch already runs the same pair of files (the cookie is
finsy's hash of both), and write errors turned into one readable line per
failed update instead of a protobuf dump.

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
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import finsy as fy
import grpc
from finsy.p4client import P4ClientError
from finsy.proto import p4r, p4r_grpc
from google.protobuf import text_format

from controller.device_config import Target, check_device_config
from controller.errors import SwitchError

log = logging.getLogger("controller.switch")

CONNECT_TIMEOUT = 10.0
PUSH_TIMEOUT = 120.0  # a target may compile the program while it answers


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
    ) -> None:
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
        self._switch: fy.Switch | None = None

    @property
    def where(self) -> str:
        return f"switch {self.name}" if self.name == self.address else f"switch {self.name} at {self.address}"

    @property
    def switch(self) -> fy.Switch:
        if self._switch is None:
            raise SwitchError(f"{self.where}: not connected")
        if not self._switch.is_up:
            raise SwitchError(f"{self.where}: the P4Runtime connection was lost (is the switch running?)")
        return self._switch

    @property
    def schema(self) -> fy.P4Schema:
        return self.switch.p4info

    async def __aenter__(self) -> Self:
        pipeline = self._load_pipeline()
        running_cookie = await self._probe()
        # finsy gets the P4Info only: it would push the pipeline itself in a background task whose
        # failure (a device config the switch refuses) surfaces as a bare cancellation; pushing it
        # here, once primary, turns a refusal into the switch's own message.
        options = fy.SwitchOptions(
            p4info=self.p4info_path, device_id=self.device_id, initial_election_id=self.election_id
        )
        switch = fy.Switch(self.name, self.address, options)
        try:
            await asyncio.wait_for(switch.__aenter__(), CONNECT_TIMEOUT)
        except TimeoutError:
            raise SwitchError(f"{self.where}: no P4Runtime session within {CONNECT_TIMEOUT:.0f} s") from None
        except P4ClientError as exc:
            raise SwitchError(f"{self.where}: {describe_client_error(exc)}") from None
        self._switch = switch
        try:
            if self.require_primary and not switch.is_primary:
                raise SwitchError(
                    f"{self.where}: arbitration lost: another controller is primary with election id "
                    f"{switch.primary_id} (ours is {self.election_id}); stop it or use a higher --election-id"
                )
            if pipeline is not None and (self.force_push or running_cookie != pipeline.p4cookie):
                await self._push(pipeline, switch.election_id)
                await self._confirm_push(pipeline)
                self.pushed = True
                log.info("%s: pipeline pushed (%s)", self.where, pipeline.get_pipeline_info())
            elif pipeline is None and running_cookie is None and not switch.p4info.exists:
                raise SwitchError(
                    f"{self.where} has no pipeline; push one with "
                    "`p4reduce-ctl pipeline push` or `p4reduce-ctl provision`"
                )
        except BaseException:
            await self.close()
            raise
        return self

    def _load_pipeline(self) -> fy.P4Schema | None:
        """P4Info + device config as finsy's schema (which also computes the cookie of the pair)."""
        if self.p4info_path is None and self.device_config_path is None:
            return None
        if self.p4info_path is None or self.device_config_path is None:
            raise SwitchError("a pipeline needs both a P4Info file and a device config file")
        for path, what in ((self.p4info_path, "P4Info"), (self.device_config_path, "device config")):
            if not path.is_file():
                raise SwitchError(f"{what} file {path} not found (build it first, e.g. `make build`)")
        try:
            schema = fy.P4Schema(self.p4info_path, self.device_config_path)
        except (text_format.ParseError, UnicodeDecodeError, ValueError) as exc:
            reason = str(exc).splitlines()[0]
            raise SwitchError(
                f"P4Info file {self.p4info_path} is not a P4Info text protobuf: {reason}"
            ) from None
        self.device_kind = check_device_config(self.device_config_path, schema, self.target)
        return schema

    async def _push(self, pipeline: fy.P4Schema, election_id: int) -> None:
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=p4r.Uint128(high=election_id >> 64, low=election_id & (2**64 - 1)),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=pipeline.get_pipeline_config(),
        )
        async with grpc.aio.insecure_channel(self.address) as channel:
            try:
                await p4r_grpc.P4RuntimeStub(channel).SetForwardingPipelineConfig(
                    request, timeout=PUSH_TIMEOUT
                )
            except grpc.aio.AioRpcError as exc:
                raise SwitchError(
                    f"{self.where} refused the pipeline: {exc.code().name}: {exc.details()}"
                ) from None

    async def _confirm_push(self, pipeline: fy.P4Schema) -> None:
        """The switch runs what was pushed: its cookie is ours and it can read a table of the program."""
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = p4r_grpc.P4RuntimeStub(channel)
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
        if self._switch is not None:
            switch, self._switch = self._switch, None
            await switch.__aexit__(None, None, None)

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
        try:
            await self.switch.write([u.marked() for u in updates])
        except P4ClientError as exc:
            raise SwitchError(f"{self.where}: {describe_write_error(exc, updates)}") from None

    async def read(self, query: Any) -> list[Any]:
        """What the switch holds for `query`; an entity asked for by its key and absent is an empty list."""
        try:
            return [entity async for entity in self.switch.read(query)]
        except P4ClientError as exc:
            if exc.code.name == "NOT_FOUND" and addresses_one(query):
                return []  # bmv2's answer for a multicast group or clone session id nobody inserted
            raise SwitchError(f"{self.where}: read failed: {describe_client_error(exc)}") from None


def addresses_one(query: Any) -> bool:
    """Whether a read names one entity by its key (rather than a wildcard)."""
    if isinstance(query, fy.P4MulticastGroupEntry):
        return query.multicast_group_id != 0
    if isinstance(query, fy.P4CloneSessionEntry):
        return query.session_id != 0
    if isinstance(query, fy.P4TableEntry):
        return bool(query.match) or query.is_default_action
    return False


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
