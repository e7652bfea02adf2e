"""The P4Runtime server under abuse: bounded streams, unstarvable unary RPCs, bounded answers.

Each test states what the P4Runtime specification asks and checks the
server's answer in both conformance modes where they differ
(docs/softswitch.md, "P4Runtime conformance").
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from switch_support import (
    A_SET_PORT,
    C_PKTS,
    DEVICE_ID,
    T_EXACT,
    Server,
    StreamClient,
    batch_details,
    become_primary,
    reflector_config,
    start_server,
    stop_server,
)

from softswitch.p4runtime import details as details_module
from softswitch.p4runtime.arbitration import uint128
from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.details import ALL, DEFAULT_BUDGET
from softswitch.p4runtime.errors import MESSAGE_LIMIT

Code = grpc.StatusCode
Set = p4r.SetForwardingPipelineConfigRequest


def started(conformance: Conformance = Conformance.SPEC, max_streams: int = 16) -> Server:
    return start_server(conformance=conformance, max_streams=max_streams)


def set_pipeline(server: Server, action: int, config: p4r.ForwardingPipelineConfig | None = None) -> None:
    request = Set(device_id=DEVICE_ID, election_id=uint128(10), action=action)  # type: ignore[arg-type]
    if config is not None:
        request.config.CopyFrom(config)
    server.stub.SetForwardingPipelineConfig(request)


def push(server: Server) -> None:
    set_pipeline(server, Set.VERIFY_AND_COMMIT, reflector_config(cookie=1))


def exact(key: int, port: bytes = b"\x01", **fields: object) -> p4r.TableEntry:
    return p4r.TableEntry(
        table_id=T_EXACT,
        match=[
            p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=key.to_bytes(2, "big"))),
            p4r.FieldMatch(field_id=2, exact=p4r.FieldMatch.Exact(value=b"\x01")),
        ],
        action=p4r.TableAction(
            action=p4r.Action(action_id=A_SET_PORT, params=[p4r.Action.Param(param_id=1, value=port)])
        ),
        **fields,  # type: ignore[arg-type]
    )


def insert(entry: p4r.TableEntry) -> p4r.Update:
    return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry))


def write(server: Server, *updates: p4r.Update, election: int = 10) -> None:
    server.stub.Write(
        p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(election), updates=updates), timeout=30
    )


def refusal(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def timed(call: Callable[[], object]) -> float:
    start = time.monotonic()
    call()
    return time.monotonic() - start


@pytest.mark.parametrize("conformance", list(Conformance))
def test_streams_beyond_the_bound_are_refused_and_unary_rpcs_are_never_starved(
    conformance: Conformance,
) -> None:
    """40 idle StreamChannels against a bound of 16: 24 get RESOURCE_EXHAUSTED, and Capabilities,
    Read, Write and a pipeline push all answer at once (the spec: an excess stream is refused)."""
    server = started(conformance)
    clients: list[StreamClient] = []
    try:
        primary = become_primary(server.stub, 10)
        clients.append(primary)
        push(server)
        clients += [StreamClient(server.stub) for _ in range(40)]  # idle: they never arbitrate
        refused, open_ = [], []
        for client in clients[1:]:
            try:
                refused.append(client.recv_error(timeout=0.5).code())
            except queue.Empty:  # the stream is open and idle
                open_.append(client)
        assert refused == [Code.RESOURCE_EXHAUSTED] * 25  # 16 open: the primary and 15 idle ones
        read = p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
        assert timed(lambda: server.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=2)) < 1
        assert timed(lambda: list(server.stub.Read(read, timeout=2))) < 1
        assert timed(lambda: write(server, insert(exact(1)))) < 1
        assert timed(lambda: push(server)) < 2
        open_[0].close()  # an idle stream leaves: its place is free again
        time.sleep(0.2)
        newcomer = StreamClient(server.stub)
        clients.append(newcomer)
        newcomer.arbitrate(5)
        assert newcomer.recv().arbitration.status.code == 6  # a backup: admitted and answered
    finally:
        for client in clients:
            client.close()
        stop_server(server)


def test_the_refusal_names_the_bound() -> None:
    server = started(max_streams=2)
    try:
        clients = [StreamClient(server.stub) for _ in range(3)]
        errors = []  # whichever stream the server reached last
        for client in clients:
            try:
                errors.append(client.recv_error(timeout=1))
            except queue.Empty:
                continue
        [error] = errors
        assert error.code() == Code.RESOURCE_EXHAUSTED
        assert error.details().startswith("2 StreamChannels are open, the most this switch serves")
        for client in clients:
            client.close()
    finally:
        stop_server(server)


def test_a_failed_batch_of_10000_updates_fits_a_clients_default_metadata_limit() -> None:
    """One p4.v1.Error per update would be 360 KB; a default client accepts 8 KiB: the details stop
    after what fits, and the message says how many failed and which failed first."""
    server = started()
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        updates = [insert(exact(key)) for key in range(10_000)]  # t_exact holds 4 entries
        with grpc.insecure_channel(server.address) as channel:  # default options: 8 KiB of metadata
            stub = p4r_grpc.P4RuntimeStub(channel)
            request = p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), updates=updates)
            error = refusal(lambda: stub.Write(request, timeout=60))
        assert error.code() == Code.UNKNOWN, error.details()
        details = batch_details(error)
        assert 50 < len(details) < 10_000
        assert [d.canonical_code for d in details[:4]] == [0, 0, 0, 0]
        assert {d.canonical_code for d in details[4:]} == {Code.RESOURCE_EXHAUSTED.value[0]}
        message = error.details()
        assert message.startswith("9996 of 10000 updates failed; details of the first ")
        assert "the first failure is update 4: RESOURCE_EXHAUSTED" in message
        primary.close()
    finally:
        stop_server(server)


def failed_batch(server: Server, count: int, options: list[tuple[str, int]] | None = None) -> grpc.RpcError:
    """A Write of `count` inserts into t_exact (4 entries fit), over a channel with `options`."""
    updates = [insert(exact(key)) for key in range(count)]
    with grpc.insecure_channel(server.address, options=options) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        request = p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), updates=updates)
        return refusal(lambda: stub.Write(request, timeout=60))


def raised_limit(updates: int) -> list[tuple[str, int]]:
    """What a client must configure to receive one p4.v1.Error per update (the specification's rule of
    thumb, "gRPC Metadata Maximum Size": 8192 + 100 bytes per update)."""
    return [("grpc.max_metadata_size", 8192 + 100 * updates)]


@pytest.mark.parametrize(("conformance", "budget"), [(Conformance.SPEC, ALL), (Conformance.BMV2, None)])
def test_a_client_that_raised_its_metadata_limit_gets_one_error_per_update(
    conformance: Conformance, budget: int | None
) -> None:
    """The specification: exactly one p4.v1.Error per update, OK ones with code OK and nothing else; a switch
    started with --error-details all (and bmv2's answers, by default) sends all 10,000."""
    server = start_server(conformance=conformance, details_budget=budget)
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        error = failed_batch(server, 10_000, raised_limit(10_000))
        assert (error.code(), error.details()) == (Code.UNKNOWN, "9996 of 10000 updates failed")
        details = batch_details(error)
        assert len(details) == 10_000
        assert details[:4] == [p4r.Error()] * 4  # applied: code OK, nothing else
        assert {(d.canonical_code, d.message) for d in details[4:]} == {
            (Code.RESOURCE_EXHAUSTED.value[0], details[4].message)
        }
        assert details[4].message  # each failure with its message
        primary.close()
    finally:
        stop_server(server)


def test_a_batch_whose_errors_fit_gets_them_all_whatever_the_budget() -> None:
    server = started()
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        error = failed_batch(server, 40)  # a default client
        details = batch_details(error)
        assert len(details) == 40 and all(d.message for d in details[4:])
        assert error.details() == "36 of 40 updates failed"
        primary.close()
    finally:
        stop_server(server)


def test_the_default_budget_sends_compact_errors_and_says_how_to_get_them_all() -> None:
    """Beyond what a default client takes, a failure like an earlier one comes with its code alone, and the
    message names the client option and the switch flag that give one error per update."""
    server = started()
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        error = failed_batch(server, 10_000)
        details = batch_details(error)
        assert len(details) > DEFAULT_BUDGET // 40  # ~40 bytes an entry: no message repeated
        assert details[4].message and not any(d.message for d in details[5:])
        assert {d.canonical_code for d in details[4:]} == {Code.RESOURCE_EXHAUSTED.value[0]}
        assert "grpc.max_metadata_size" in error.details() and "--error-details all" in error.details()
        assert len(error.details()) <= details_module.MESSAGE_LIMIT
        primary.close()
    finally:
        stop_server(server)


def test_bmv2s_answer_is_too_big_for_a_default_client() -> None:
    """As simple_switch_grpc: every error, so a client that kept gRPC's default limit hears only its own
    RESOURCE_EXHAUSTED (the specification tells clients to raise the limit)."""
    server = started(Conformance.BMV2)
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        error = failed_batch(server, 10_000)
        assert error.code() == Code.RESOURCE_EXHAUSTED
        primary.close()
    finally:
        stop_server(server)


@pytest.mark.parametrize("conformance", list(Conformance))
def test_an_answer_never_echoes_unbounded_input(conformance: Conformance) -> None:
    server = started(conformance)
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        huge = exact(1)
        huge.match[0].exact.value = b"\x01" * 100_000
        [detail] = batch_details(refusal(lambda: write(server, insert(huge))))
        assert detail.canonical_code != 0 and len(detail.message) <= MESSAGE_LIMIT
        error = refusal(lambda: server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, role="r" * 100_000)))
        assert len(error.details()) <= MESSAGE_LIMIT
        primary.close()
    finally:
        stop_server(server)


# (what is sent, the specification's code, simple_switch_grpc's code when it differs)
CASES = {
    "INSERT of an entry marked is_const": (Code.INVALID_ARGUMENT, Code.OK),
    "a counter read at index -1": (Code.INVALID_ARGUMENT, None),
    "a counter write at index -1": (Code.INVALID_ARGUMENT, None),
    "a Write naming a role": (Code.NOT_FOUND, Code.UNIMPLEMENTED),
    "a Read naming a role": (Code.NOT_FOUND, Code.UNIMPLEMENTED),
    "COMMIT with nothing saved": (Code.NOT_FOUND, Code.FAILED_PRECONDITION),
    "COMMIT carrying a config": (Code.INVALID_ARGUMENT, Code.OK),
    "an empty bytestring as an action parameter": (Code.OUT_OF_RANGE, Code.OK),
    "a stream changing its device id": (Code.FAILED_PRECONDITION, None),
    # An id the P4Info does not have: NOT_FOUND (it depends on the pipeline); PI: "Invalid P4 id".
    "a Read of an unknown table id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of an unknown counter id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of the direct counter of an unknown table": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of an unknown register id": (Code.NOT_FOUND, Code.UNIMPLEMENTED),
    "a Read of an unknown meter id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of the direct meter of an unknown table": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of an unknown action profile's members": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of an unknown action profile's groups": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a Read of an unknown value set id": (Code.NOT_FOUND, Code.UNIMPLEMENTED),
    "a Read of an unknown digest id": (Code.NOT_FOUND, None),
    "a DELETE in an unknown table id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a MODIFY of an unknown counter id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "a MODIFY of an unknown register id": (Code.NOT_FOUND, Code.UNIMPLEMENTED),
    "a MODIFY of an unknown meter id": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "an INSERT into an unknown action profile": (Code.NOT_FOUND, Code.INVALID_ARGUMENT),
    "an INSERT of an unknown digest id": (Code.NOT_FOUND, None),
}

NO_SUCH_ID = 0x7FFFFF  # with any kind's prefix byte: no object of the test P4Info has it
UNKNOWN_TABLE = p4r.TableEntry(table_id=0x02000000 | NO_SUCH_ID)
READ_ENTITIES = {  # the entity each "a Read of ..." case reads
    "a Read of an unknown table id": p4r.Entity(table_entry=UNKNOWN_TABLE),
    "a Read of an unknown counter id": p4r.Entity(
        counter_entry=p4r.CounterEntry(counter_id=0x12000000 | NO_SUCH_ID)
    ),
    "a Read of the direct counter of an unknown table": p4r.Entity(
        direct_counter_entry=p4r.DirectCounterEntry(table_entry=UNKNOWN_TABLE)
    ),
    "a Read of an unknown register id": p4r.Entity(
        register_entry=p4r.RegisterEntry(register_id=0x16000000 | NO_SUCH_ID)
    ),
    "a Read of an unknown meter id": p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=0x15000000 | NO_SUCH_ID)),
    "a Read of the direct meter of an unknown table": p4r.Entity(
        direct_meter_entry=p4r.DirectMeterEntry(table_entry=UNKNOWN_TABLE)
    ),
    "a Read of an unknown action profile's members": p4r.Entity(
        action_profile_member=p4r.ActionProfileMember(action_profile_id=0x11000000 | NO_SUCH_ID)
    ),
    "a Read of an unknown action profile's groups": p4r.Entity(
        action_profile_group=p4r.ActionProfileGroup(action_profile_id=0x11000000 | NO_SUCH_ID)
    ),
    "a Read of an unknown value set id": p4r.Entity(
        value_set_entry=p4r.ValueSetEntry(value_set_id=0x03000000 | NO_SUCH_ID)
    ),
    "a Read of an unknown digest id": p4r.Entity(
        digest_entry=p4r.DigestEntry(digest_id=0x18000000 | NO_SUCH_ID)
    ),
}
_U = p4r.Update
WRITE_UPDATES = {  # the update each unknown-id write case sends: the entity of a read case, or its own
    name: _U(type=kind, entity=READ_ENTITIES[read]) if isinstance(read, str) else _U(type=kind, entity=read)
    for name, kind, read in (
        ("a DELETE in an unknown table id", _U.DELETE, "a Read of an unknown table id"),
        ("a MODIFY of an unknown counter id", _U.MODIFY, "a Read of an unknown counter id"),
        ("a MODIFY of an unknown register id", _U.MODIFY, "a Read of an unknown register id"),
        ("a MODIFY of an unknown meter id", _U.MODIFY, "a Read of an unknown meter id"),
        ("an INSERT of an unknown digest id", _U.INSERT, "a Read of an unknown digest id"),
        (
            "an INSERT into an unknown action profile",
            _U.INSERT,
            p4r.Entity(
                action_profile_member=p4r.ActionProfileMember(
                    action_profile_id=0x11000000 | NO_SUCH_ID, member_id=1
                )
            ),
        ),
    )
}


def attempt(case: str, server: Server) -> Code:
    """Send `case` to a server with the test pipeline and an empty table; the code it answers."""
    counter = p4r.CounterEntry(counter_id=C_PKTS, index=p4r.Index(index=-1))
    actions: dict[str, Callable[[], object]] = {
        "INSERT of an entry marked is_const": lambda: write(server, insert(exact(1, is_const=True))),
        "a counter read at index -1": lambda: list(
            server.stub.Read(
                p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(counter_entry=counter)])
            )
        ),
        "a counter write at index -1": lambda: write(
            server, p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(counter_entry=counter))
        ),
        "a Write naming a role": lambda: server.stub.Write(
            p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), role="sdn")
        ),
        "a Read naming a role": lambda: list(
            server.stub.Read(
                p4r.ReadRequest(
                    device_id=DEVICE_ID, role="sdn", entities=[p4r.Entity(table_entry=p4r.TableEntry())]
                )
            )
        ),
        "COMMIT with nothing saved": lambda: set_pipeline(server, Set.COMMIT),
        "COMMIT carrying a config": lambda: (
            set_pipeline(server, Set.VERIFY_AND_SAVE, reflector_config(cookie=2)),
            set_pipeline(server, Set.COMMIT, reflector_config(cookie=3)),
        ),
        "an empty bytestring as an action parameter": lambda: write(server, insert(exact(2, port=b""))),
    }
    if case == "a stream changing its device id":
        client = StreamClient(server.stub)
        client.arbitrate(5)
        client.recv()
        client.arbitrate(5, device_id=DEVICE_ID + 1)
        code = client.recv_error().code()
        client.close()
        return code
    for name, entity in READ_ENTITIES.items():
        actions[name] = lambda entity=entity: list(
            server.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[entity]))
        )
    for name, one in WRITE_UPDATES.items():
        actions[name] = lambda one=one: write(server, one)
    try:
        actions[case]()
    except grpc.RpcError as error:
        if error.code() == Code.UNKNOWN:  # a batch: the update's own code
            [detail] = batch_details(error)
            return next(c for c in Code if c.value[0] == detail.canonical_code)
        return error.code()
    return Code.OK


@pytest.mark.parametrize("conformance", list(Conformance))
@pytest.mark.parametrize("case", list(CASES))
def test_error_codes_as_the_specification_says_and_as_bmv2_answers(
    case: str, conformance: Conformance
) -> None:
    spec, bmv2 = CASES[case]
    server = started(conformance)
    try:
        primary = become_primary(server.stub, 10)
        push(server)
        expected = bmv2 if conformance.bmv2 and bmv2 is not None else spec
        assert attempt(case, server) == expected
        primary.close()
    finally:
        stop_server(server)
