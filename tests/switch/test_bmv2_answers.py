"""What a P4Runtime client hears from bmv2, and from p4reduce-switch: the reference of issue 20.

bmv2 1.15 (`simple_switch_grpc`, its P4Runtime server is PI) and the
embedded switch were measured with the same program and the same client;
every answer a client can tell apart is pinned here, for three targets:

- `bmv2`: simple_switch_grpc itself, when it and p4c are on PATH;
- `soft-bmv2`: p4reduce-switch `--conformance bmv2`, which must give bmv2's
  answer to every row;
- `soft`: p4reduce-switch as it starts by default, which gives bmv2's
  answer except where the P4Runtime specification requires another
  (`spec=` in a row; docs/softswitch.md, "P4Runtime conformance").

Each switch runs p4reduce.p4 (p4c's JSON for bmv2, p4reduce-p4c's for the
embedded switch) with no CPU port, started as the lab starts it; the test
is its primary client with election id 10. Rows that leave a switch in a
state no other row should see get a switch of their own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import finsy as fy
import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from switch_support import StreamClient, batch_details, free_tcp_port

from softswitch.p4runtime.arbitration import uint128

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's switch command lines (a folder of scripts)
from targets import LAUNCHERS, SwitchSpec, p4c_bmv2  # noqa: E402

Code = grpc.StatusCode
Set = p4r.SetForwardingPipelineConfigRequest
DEVICE_ID, ELECTION = 1, 10
T = TypeVar("T")


# ===================================================================== targets
@pytest.fixture(scope="module", params=["soft", "soft-bmv2", "bmv2"])
def target(request: pytest.FixtureRequest) -> str:
    if request.param == "bmv2":
        missing = [tool for tool in ("simple_switch_grpc", "p4c") if shutil.which(tool) is None]
        if missing:
            pytest.skip(f"bmv2's answers are measured only with {' and '.join(missing)} on PATH")
    return str(request.param)


def expect(target: str, bmv2: T, spec: T | None = None) -> T:
    """bmv2's answer, or the specification's where the default embedded switch keeps it."""
    return spec if target == "soft" and spec is not None else bmv2


@pytest.fixture(scope="module")
def program(target: str, compiled: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Program:
    device_config, p4info = p4c_bmv2(tmp_path_factory.mktemp("p4c")) if target == "bmv2" else compiled
    return Program(fy.P4Schema(p4info), device_config.read_bytes())


@dataclass(frozen=True)
class Program:
    schema: fy.P4Schema
    device_config: bytes

    def config(self, cookie: int = 1) -> p4r.ForwardingPipelineConfig:
        return p4r.ForwardingPipelineConfig(
            p4info=self.schema.p4info,
            p4_device_config=self.device_config,
            cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie),
        )

    def table(self, name: str) -> int:
        return self.schema.tables[name].id

    def action(self, name: str) -> int:
        return self.schema.actions[name].id


@dataclass
class Target:
    """A running switch with a channel to it and its primary client."""

    name: str
    process: subprocess.Popen[bytes]
    channel: grpc.Channel
    stub: p4r_grpc.P4RuntimeStub
    program: Program
    primary: StreamClient | None = None
    election: int = ELECTION  # the test client's: raised when a contender took the switch (spec)

    # ---------------------------------------------------------------- calls
    def push(self, config: p4r.ForwardingPipelineConfig, action: int = Set.VERIFY_AND_COMMIT) -> None:
        self.stub.SetForwardingPipelineConfig(
            Set(device_id=DEVICE_ID, election_id=uint128(self.election), action=action, config=config),
            timeout=60,
        )

    def write(self, *updates: p4r.Update, device_id: int = DEVICE_ID, atomicity: int = 0) -> None:
        request = p4r.WriteRequest(
            device_id=device_id, election_id=uint128(self.election), updates=updates, atomicity=atomicity
        )
        self.stub.Write(request, timeout=10)

    def read(self, *entities: p4r.Entity, device_id: int = DEVICE_ID) -> list[p4r.Entity]:
        request = p4r.ReadRequest(device_id=device_id, entities=entities)
        return [e for reply in self.stub.Read(request, timeout=10) for e in reply.entities]

    def read_partial(self, entity: p4r.Entity) -> tuple[list[p4r.Entity], grpc.RpcError | None]:
        """What a Read streams before it fails, and how it fails."""
        got: list[p4r.Entity] = []
        try:
            for reply in self.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[entity]), timeout=10):
                got.extend(reply.entities)
        except grpc.RpcError as error:
            return got, error
        return got, None


def start(target: str, program: Program, logs: Path) -> Target:
    address = f"127.0.0.1:{free_tcp_port()}"
    spec = SwitchSpec(
        name="switch",
        grpc_address=address,
        device_id=DEVICE_ID,
        log_dir=logs,
        conformance="bmv2" if target == "soft-bmv2" else "spec",
    )
    launch = LAUNCHERS["bmv2" if target == "bmv2" else "soft"](spec)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with launch.console_log.open("ab") as log:
        process = subprocess.Popen(launch.command, stdout=log, stderr=subprocess.STDOUT, env=env)
    channel = grpc.insecure_channel(address)
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{target} exited: {launch.console_log.read_text()}")
        try:
            grpc.channel_ready_future(channel).result(timeout=0.5)
            break
        except grpc.FutureTimeoutError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{target} did not serve P4Runtime within 30 s") from None
    switch = Target(target, process, channel, p4r_grpc.P4RuntimeStub(channel), program)
    switch.primary = arbitrate(switch, ELECTION)
    assert arbitration_reply(switch.primary) == (0, ELECTION)
    return switch


def stop(switch: Target) -> None:
    if switch.primary is not None:
        switch.primary.close()
    switch.channel.close()
    switch.process.terminate()
    try:
        switch.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        switch.process.kill()
        switch.process.wait()


@pytest.fixture(scope="module")
def shared(target: str, program: Program, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One switch for the rows that leave nothing behind, running the program."""
    switch = start(target, program, tmp_path_factory.mktemp(f"{target}-shared"))
    switch.push(program.config())
    yield switch
    stop(switch)


@pytest.fixture
def fresh(target: str, program: Program, tmp_path: Path) -> Iterator[Target]:
    """A switch of this row's own, with no pipeline yet."""
    switch = start(target, program, tmp_path)
    yield switch
    stop(switch)


# ===================================================================== messages
def arbitrate(switch: Target, election: int, device_id: int = DEVICE_ID) -> StreamClient:
    client = StreamClient(switch.stub)
    client.arbitrate(election, device_id)
    return client


@contextlib.contextmanager
def contender(switch: Target, election: int, device_id: int = DEVICE_ID) -> Iterator[StreamClient]:
    """Another client; when it leaves, the test's client is primary again before the next row goes on.

    bmv2 promotes the test's client by itself; the specification's rule (election_id_past) keeps a
    lower id from becoming primary again, so there the test's client claims the switch with a higher one.
    """
    client = arbitrate(switch, election, device_id)
    try:
        yield client
    finally:
        client.close()
        if election > switch.election and device_id == DEVICE_ID and switch.primary is not None:
            if switch.name == "soft":
                switch.election = election + 100
                switch.primary.arbitrate(switch.election)
            while arbitration_reply(switch.primary) != (0, switch.election):
                pass


def arbitration_reply(client: StreamClient) -> tuple[int, int]:
    """(status code, primary's election id) of the next arbitration message."""
    while True:
        reply = client.recv()
        if reply.HasField("arbitration"):
            update = reply.arbitration
            return update.status.code, (update.election_id.high << 64) | update.election_id.low


def next_message(client: StreamClient) -> str:
    """Which kind of message a stream sends next (arbitration, error, packet ...)."""
    return str(client.recv().WhichOneof("update"))


def update(kind: int, **entity: object) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))  # type: ignore[arg-type]


def l2_entry(program: Program, mac: bytes, port: bytes | None = None) -> p4r.TableEntry:
    entry = p4r.TableEntry(
        table_id=program.table("MyIngress.l2_forward"),
        match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=mac))],
    )
    if port is not None:
        param = p4r.Action.Param(param_id=1, value=port)
        entry.action.action.CopyFrom(
            p4r.Action(action_id=program.action("MyIngress.forward"), params=[param])
        )
    return entry


def group(gid: int, *replicas: p4r.Replica) -> p4r.Entity:
    entry = p4r.MulticastGroupEntry(multicast_group_id=gid, replicas=replicas)
    return p4r.Entity(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry=entry)
    )


def clone_session(sid: int) -> p4r.Entity:
    entry = p4r.CloneSessionEntry(session_id=sid)
    return p4r.Entity(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(clone_session_entry=entry)
    )


def failure(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def per_update(call: Callable[[], object]) -> list[tuple[Code, str]]:
    """The (code, message) of every update of a batch Write that must fail as a whole with UNKNOWN."""
    error = failure(call)
    assert error.code() == Code.UNKNOWN, error
    codes = {c.value[0]: c for c in Code}
    return [(codes[d.canonical_code], d.message) for d in batch_details(error)]


def counter(program: Program) -> tuple[int, int]:
    """(id, size) of the program's first indexed counter."""
    first = next(iter(program.schema.counters))
    return first.id, first.size


# ================================================================ the differences
def test_reading_a_multicast_group_or_clone_session_nobody_inserted_is_not_found(shared: Target) -> None:
    error = failure(lambda: shared.read(group(77)))
    assert (error.code(), error.details()) == (Code.NOT_FOUND, "Multicast group does not exist")
    error = failure(lambda: shared.read(clone_session(77)))
    assert (error.code(), error.details()) == (Code.NOT_FOUND, "Clone session id does not exist")


def test_reading_a_table_entry_nobody_inserted_answers_nothing(shared: Target) -> None:
    entry = l2_entry(shared.program, b"\x02\x00\x00\x00\x00\x77")
    assert shared.read(p4r.Entity(table_entry=entry)) == []


def test_a_device_config_that_cannot_run(target: str, fresh: Target) -> None:
    """bmv2 takes anything and fails later; the specification wants the push refused."""
    program = fresh.program
    pushes = {
        "bogus JSON": p4r.ForwardingPipelineConfig(
            p4info=program.schema.p4info, p4_device_config=b'{"x": 1}'
        ),
        "empty config": p4r.ForwardingPipelineConfig(),
        "no P4Info": p4r.ForwardingPipelineConfig(p4_device_config=program.device_config),
    }
    answers = {}
    for what, config in pushes.items():
        try:
            fresh.push(config)
            answers[what] = Code.OK
        except grpc.RpcError as error:
            answers[what] = error.code()
    assert answers == dict.fromkeys(pushes, expect(target, bmv2=Code.OK, spec=Code.INVALID_ARGUMENT))
    if target == "soft":
        return
    fresh.push(pushes["bogus JSON"])  # the P4Info is right, the program is not
    table = p4r.Entity(table_entry=p4r.TableEntry(table_id=program.table("MyIngress.l2_forward")))
    error = failure(lambda: fresh.read(table))
    assert (error.code(), error.details()) == (Code.UNKNOWN, "Error when reading table entries from target")
    insert = update(p4r.Update.INSERT, table_entry=l2_entry(program, b"\x02\x00\x00\x00\x00\x01", b"\x01"))
    assert per_update(lambda: fresh.write(insert)) == [
        (Code.UNKNOWN, "Error when adding match entry to target")
    ]


def test_reconcile_and_commit_with_this_program(target: str, fresh: Target) -> None:
    program = fresh.program
    fresh.push(program.config())
    kept = l2_entry(program, b"\x02\x00\x00\x00\x00\x01", b"\x01")
    fresh.write(update(p4r.Update.INSERT, table_entry=kept))
    if target == "soft":  # the specification: state kept
        fresh.push(program.config(cookie=2), Set.RECONCILE_AND_COMMIT)
        assert len(fresh.read(p4r.Entity(table_entry=kept))) == 1
        fresh.push(program.config(cookie=3))
        return
    # bmv2 replays every counter cell as an INSERT, which it refuses, and is stuck until restarted.
    error = failure(lambda: fresh.push(program.config(cookie=2), Set.RECONCILE_AND_COMMIT))
    assert (error.code(), error.details()) == (Code.UNKNOWN, "Error when reconciling config")
    error = failure(lambda: fresh.push(program.config(cookie=3)))
    assert (error.code(), error.details()) == (Code.UNKNOWN, "Error in first phase of device update")


def test_registers(target: str, shared: Target) -> None:
    register = next(iter(shared.program.schema.registers))
    entity = p4r.RegisterEntry(register_id=register.id, index=p4r.Index(index=0))
    if target == "soft":  # an extension of the embedded switch that no p4reduce component uses
        [read] = shared.read(p4r.Entity(register_entry=entity))
        assert read.register_entry.data.bitstring == b"\x00"
        return
    error = failure(lambda: shared.read(p4r.Entity(register_entry=entity)))
    assert (error.code(), error.details()) == (Code.UNIMPLEMENTED, "Register reads are not supported yet")
    entity.data.bitstring = b"\x00"
    write = update(p4r.Update.MODIFY, register_entry=entity)
    assert per_update(lambda: shared.write(write)) == [
        (Code.UNIMPLEMENTED, "Register writes are not supported yet")
    ]


def test_a_digest_entry_read_of_every_digest(target: str, shared: Target) -> None:
    everything = p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=0))
    if target == "soft":  # the specification: id 0 reads every configured digest (none here)
        assert shared.read(everything) == []
        return
    error = failure(lambda: shared.read(everything))
    assert (error.code(), error.details()) == (
        Code.UNIMPLEMENTED,
        "digest_id must be set when reading DigestEntry",
    )


def test_a_counter_write_without_index_resets_all_or_is_unimplemented(target: str, shared: Target) -> None:
    counter_id, _ = counter(shared.program)
    reset = update(
        p4r.Update.MODIFY, counter_entry=p4r.CounterEntry(counter_id=counter_id, data=p4r.CounterData())
    )
    if target == "soft":  # the specification: an unset index is every index
        shared.write(reset)
        return
    assert per_update(lambda: shared.write(reset)) == [
        (Code.UNIMPLEMENTED, "Wildcard write is not supported for indirect counters yet")
    ]


def test_the_same_arbitration_message_again(target: str, shared: Target) -> None:
    election = shared.election + 10
    with contender(shared, election) as client:
        assert arbitration_reply(client) == (0, election)  # primary
        client.arbitrate(election)  # again, unchanged
        client.arbitrate(election + 1)  # a change: answered by every target
        if target == "soft":  # the specification: the primary's repeat is an advisory to every client
            assert arbitration_reply(client) == (0, election)
        assert arbitration_reply(client) == (0, election + 1)


def test_a_value_wider_than_its_field(target: str, shared: Target) -> None:
    too_wide = l2_entry(shared.program, b"\x01\x02\x00\x00\x00\x00\x01", b"\x01")  # 49 bits for bit<48>
    [(code, message)] = per_update(lambda: shared.write(update(p4r.Update.INSERT, table_entry=too_wide)))
    assert code == expect(target, bmv2=Code.INVALID_ARGUMENT, spec=Code.OUT_OF_RANGE)
    if code == Code.INVALID_ARGUMENT:
        assert message == "Bytestring provided does not fit within 48 bits"


def test_unknown_table_and_counter_ids(target: str, shared: Target) -> None:
    for entity, what, object_id in (
        (p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02FFFFFF)), "table", 0x02FFFFFF),
        (p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=0x12FFFFFF)), "counter", 0x12FFFFFF),
    ):
        error = failure(lambda entity=entity: shared.read(entity))
        # The specification: whether an id exists depends on the pipeline, so NOT_FOUND.
        spec = (Code.NOT_FOUND, f"Invalid P4 id: the P4Info has no {what} with id {object_id:#x}")
        assert (error.code(), error.details()) == expect(
            target, bmv2=(Code.INVALID_ARGUMENT, "Invalid P4 id"), spec=spec
        )


def test_a_counter_index_beyond_the_counter(target: str, shared: Target) -> None:
    counter_id, size = counter(shared.program)
    entity = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id, index=p4r.Index(index=size)))
    got, error = shared.read_partial(entity)
    assert error is not None
    if target == "soft":  # the specification's rule for an index beyond the array
        assert (error.code(), got) == (Code.OUT_OF_RANGE, [])
        return
    assert error.code() == Code.UNKNOWN
    [partial] = got  # the entity PI was filling in, without data
    assert partial.counter_entry.counter_id == counter_id and not partial.counter_entry.HasField("data")


def test_an_empty_bytestring_as_a_match_value(target: str, shared: Target) -> None:
    entry = l2_entry(shared.program, b"", b"\x01")
    if target == "soft":  # P4Runtime "Bytestrings": always refused, OUT_OF_RANGE
        [(code, _)] = per_update(lambda: shared.write(update(p4r.Update.INSERT, table_entry=entry)))
        assert code == Code.OUT_OF_RANGE
        return
    shared.write(update(p4r.Update.INSERT, table_entry=entry))
    try:
        [read] = shared.read(p4r.Entity(table_entry=l2_entry(shared.program, b"\x00")))
        assert read.table_entry.match[0].exact.value == b"\x00"  # stored as zero
    finally:
        shared.write(update(p4r.Update.DELETE, table_entry=l2_entry(shared.program, b"\x00")))


def test_a_wrong_device_id(target: str, shared: Target) -> None:
    table = p4r.Entity(table_entry=p4r.TableEntry())
    read = failure(lambda: shared.read(table, device_id=99))
    write = failure(lambda: shared.write(device_id=99))
    with contender(shared, 30, device_id=99) as client:
        if target == "soft":  # the specification: an unknown device is NOT_FOUND, also on the stream
            assert (read.code(), write.code()) == (Code.NOT_FOUND, Code.NOT_FOUND)
            assert client.recv_error().code() == Code.NOT_FOUND
            return
        assert (read.code(), read.details()) == (
            Code.FAILED_PRECONDITION,
            "No forwarding pipeline config set for this device",
        )
        assert write.code() == Code.PERMISSION_DENIED
        assert arbitration_reply(client) == (0, 30)  # bmv2 makes a device of any id


def test_a_direct_counter_read_without_a_table_entry(shared: Target) -> None:
    error = failure(lambda: shared.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry())))
    assert (error.code(), error.details()) == (
        Code.INVALID_ARGUMENT,
        "Missing table_entry field in DirectCounterEntry",
    )


def test_multicast_groups_read_back_newest_first_with_ports_as_written(shared: Target) -> None:
    groups = [
        group(11, p4r.Replica(egress_port=1, instance=0)),
        group(
            12,
            p4r.Replica(egress_port=1, instance=0),
            p4r.Replica(egress_port=2, instance=1),
            p4r.Replica(port=b"\x00\x03", instance=2),
        ),
        group(13, p4r.Replica(egress_port=4, instance=0)),
    ]
    pre = [e.packet_replication_engine_entry for e in groups]
    shared.write(*(update(p4r.Update.INSERT, packet_replication_engine_entry=entry) for entry in pre))
    try:
        read = [e.packet_replication_engine_entry.multicast_group_entry for e in shared.read(group(0))]
        assert [g.multicast_group_id for g in read if g.multicast_group_id in (11, 12, 13)] == [13, 12, 11]
        [twelve] = [g for g in read if g.multicast_group_id == 12]
        assert list(twelve.replicas) == [
            p4r.Replica(port=b"\x00\x03", instance=2),
            p4r.Replica(egress_port=2, instance=1),
            p4r.Replica(egress_port=1, instance=0),
        ]
    finally:
        shared.write(*(update(p4r.Update.DELETE, packet_replication_engine_entry=entry) for entry in pre))


def test_capabilities(shared: Target) -> None:
    assert shared.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"


def test_packet_out_with_no_cpu_port_or_from_a_backup_is_accepted_silently(shared: Target) -> None:
    assert shared.primary is not None
    with contender(shared, 5) as backup:
        assert arbitration_reply(backup)[0] == 6  # ALREADY_EXISTS: a backup
        backup.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"\x00" * 20)))
        shared.primary.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"\x00" * 20)))
        backup.arbitrate(6)  # the next thing the backup hears is this answer, not an error
        assert next_message(backup) == "arbitration"
    taking = shared.election + 40
    with contender(shared, taking) as taker:  # and the primary's next message is losing its place
        assert arbitration_reply(taker) == (0, taking)
        assert next_message(shared.primary) == "arbitration"


def test_primary_backup_and_promotion(target: str, shared: Target) -> None:
    base = shared.election
    with contender(shared, base + 25) as middle:
        assert arbitration_reply(middle) == (0, base + 25)
        high = arbitrate(shared, base + 30)
        try:
            assert arbitration_reply(high) == (0, base + 30)
            assert arbitration_reply(middle) == (6, base + 30)  # told it is a backup now
        finally:
            high.close()
        if target == "soft":  # the specification's election_id_past: a lower id is never promoted
            assert arbitration_reply(middle) == (5, base + 30)  # NOT_FOUND: no primary
        else:  # bmv2 promotes the backup with the highest id when the primary leaves
            assert arbitration_reply(middle) == (0, base + 25)


# ================================================================ the same on both
def test_writes_and_pushes_need_the_primary_election_id(shared: Target) -> None:
    request = p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(9))
    assert failure(lambda: shared.stub.Write(request)).code() == Code.PERMISSION_DENIED
    push = Set(device_id=DEVICE_ID, election_id=uint128(9), action=Set.VERIFY, config=shared.program.config())
    assert failure(lambda: shared.stub.SetForwardingPipelineConfig(push)).code() == Code.PERMISSION_DENIED


def test_a_failed_batch_is_unknown_with_one_error_per_update_and_keeps_the_good_ones(shared: Target) -> None:
    program = shared.program
    good = l2_entry(program, b"\x02\x00\x00\x00\x00\x10", b"\x01")
    absent = l2_entry(program, b"\x02\x00\x00\x00\x00\x11", b"\x01")
    try:
        codes = [
            code
            for code, _ in per_update(
                lambda: shared.write(
                    update(p4r.Update.INSERT, table_entry=good),
                    update(p4r.Update.INSERT, table_entry=good),
                    update(p4r.Update.MODIFY, table_entry=absent),
                    update(p4r.Update.DELETE, table_entry=absent),
                )
            )
        ]
        assert codes == [Code.OK, Code.ALREADY_EXISTS, Code.NOT_FOUND, Code.NOT_FOUND]
        assert len(shared.read(p4r.Entity(table_entry=good))) == 1
    finally:
        shared.write(update(p4r.Update.DELETE, table_entry=good))


def test_default_entries_are_read_and_modified(shared: Target) -> None:
    table = shared.program.table("MyIngress.l2_forward")
    [entry] = shared.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table, is_default_action=True)))
    assert entry.table_entry.is_default_action and entry.table_entry.action.action.action_id
    shared.write(update(p4r.Update.MODIFY, table_entry=entry.table_entry))


def test_zero_padded_bytestrings_read_back_in_their_shortest_form(shared: Target) -> None:
    program = shared.program
    padded = l2_entry(program, b"\x00\x00\x00\x00\x00\x00\x00\x21", b"\x00\x03")
    shared.write(update(p4r.Update.INSERT, table_entry=padded))
    try:
        [read] = shared.read(p4r.Entity(table_entry=l2_entry(program, b"\x21")))
        assert read.table_entry.match[0].exact.value == b"\x21"
        assert read.table_entry.action.action.params[0].value == b"\x03"
    finally:
        shared.write(update(p4r.Update.DELETE, table_entry=l2_entry(program, b"\x21")))


def test_atomic_batches_are_unimplemented(shared: Target) -> None:
    for atomicity in (p4r.WriteRequest.ROLLBACK_ON_ERROR, p4r.WriteRequest.DATAPLANE_ATOMIC):
        error = failure(lambda atomicity=atomicity: shared.write(atomicity=atomicity))
        assert error.code() == Code.UNIMPLEMENTED
