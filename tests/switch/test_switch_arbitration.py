"""StreamChannel arbitration: who is primary, who is told, what is refused."""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r
from switch_support import DEVICE_ID, Server, StreamClient, become_primary, start_server, stop_server

from softswitch.p4runtime.arbitration import election_id, uint128
from softswitch.p4runtime.conformance import Conformance

OK, ALREADY_EXISTS, NOT_FOUND = 0, 6, 5


def arbitration(client: StreamClient) -> tuple[int, int]:
    reply = client.recv().arbitration
    assert reply.device_id == DEVICE_ID
    return reply.status.code, election_id(reply.election_id)


def test_highest_election_id_is_primary_and_everyone_hears_of_a_new_primary(server: Server) -> None:
    first = StreamClient(server.stub)
    first.arbitrate(5)
    assert arbitration(first) == (OK, 5)
    lower = StreamClient(server.stub)
    lower.arbitrate(3)
    assert arbitration(lower) == (ALREADY_EXISTS, 5)  # only the sender is told: no change of primary
    higher = StreamClient(server.stub)
    higher.arbitrate(1 << 70)  # election ids are 128-bit
    assert arbitration(higher) == (OK, 1 << 70)
    assert arbitration(first) == (ALREADY_EXISTS, 1 << 70)
    assert arbitration(lower) == (ALREADY_EXISTS, 1 << 70)
    for client in (first, lower, higher):
        client.close()


def test_when_the_primary_leaves_a_lower_id_is_not_promoted(server: Server) -> None:
    """The specification's election_id_past: a backup may be a stale controller, so none takes over."""

    def write_refusal(election: int) -> grpc.StatusCode:
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Write(write_request(election))
        return caught.value.code()

    backup = StreamClient(server.stub)
    backup.arbitrate(100)
    assert arbitration(backup) == (OK, 100)
    primary = become_primary(server.stub, 500)
    assert arbitration(backup) == (ALREADY_EXISTS, 500)
    primary.close()
    assert arbitration(backup) == (NOT_FOUND, 500)  # no primary; election_id_past is 500
    assert write_refusal(100) == grpc.StatusCode.PERMISSION_DENIED
    late = StreamClient(server.stub)
    late.arbitrate(200)  # still below 500: a backup, and told there is no primary
    assert arbitration(late) == (NOT_FOUND, 500)
    backup.arbitrate(500)  # at least election_id_past: primary again, and everyone hears of it
    assert arbitration(backup) == (OK, 500)
    assert arbitration(late) == (ALREADY_EXISTS, 500)
    assert write_refusal(500) == grpc.StatusCode.FAILED_PRECONDITION  # past the primary check: no pipeline
    for client in (backup, late):
        client.close()


def test_bmv2_promotes_the_next_highest_when_the_primary_leaves() -> None:
    server = start_server(conformance=Conformance.BMV2)
    try:
        backup = become_primary(server.stub, 100)
        primary = become_primary(server.stub, 500)
        assert arbitration(backup) == (ALREADY_EXISTS, 500)
        primary.close()
        assert arbitration(backup) == (OK, 100)  # what simple_switch_grpc does
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Write(write_request(100))
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # primary; only no pipeline
        backup.close()
    finally:
        stop_server(server)


def test_same_election_id_twice_ends_the_second_stream_with_invalid_argument(server: Server) -> None:
    first = become_primary(server.stub, 9)
    second = StreamClient(server.stub)
    second.arbitrate(9)
    error = second.recv_error()
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "election id" in error.details().lower() and "exists" in error.details()  # finsy's pattern
    first.close()
    second.close()


def test_a_client_may_raise_its_election_id_to_become_primary(server: Server) -> None:
    first = become_primary(server.stub, 20)
    second = StreamClient(server.stub)
    second.arbitrate(10)
    assert arbitration(second) == (ALREADY_EXISTS, 20)
    second.arbitrate(30)
    assert arbitration(second) == (OK, 30)
    assert arbitration(first) == (ALREADY_EXISTS, 30)
    first.close()
    second.close()


def test_wrong_device_id_ends_the_stream_with_not_found(server: Server) -> None:
    client = StreamClient(server.stub)
    client.arbitrate(1, device_id=DEVICE_ID + 1)
    assert client.recv_error().code() == grpc.StatusCode.NOT_FOUND
    client.close()


def test_a_named_role_is_not_found_or_for_bmv2_unimplemented(server: Server) -> None:
    client = StreamClient(server.stub)
    client.arbitrate(1, role="sdn")
    assert client.recv_error().code() == grpc.StatusCode.NOT_FOUND  # the specification: an unknown role
    client.close()
    bmv2 = start_server(conformance=Conformance.BMV2)
    try:
        client = StreamClient(bmv2.stub)
        client.arbitrate(1, role="sdn")
        assert client.recv_error().code() == grpc.StatusCode.UNIMPLEMENTED
        client.close()
    finally:
        stop_server(bmv2)


def test_a_client_without_election_id_is_a_backup_and_alone_there_is_no_primary(server: Server) -> None:
    client = StreamClient(server.stub)
    client.arbitrate(None)
    assert arbitration(client)[0] == NOT_FOUND
    primary = become_primary(server.stub, 4)
    assert arbitration(client) == (ALREADY_EXISTS, 4)
    primary.close()
    client.close()


def write_request(election: int | None) -> p4r.WriteRequest:
    request = p4r.WriteRequest(device_id=DEVICE_ID)
    if election is not None:
        request.election_id.CopyFrom(uint128(election))
    return request


def test_only_the_primary_may_write(server: Server, primary: StreamClient) -> None:
    backup = StreamClient(server.stub)
    backup.arbitrate(3)
    arbitration(backup)
    for election in (3, 11, None):  # a backup's id, an id nobody holds, none at all
        with pytest.raises(grpc.RpcError) as caught:
            server.stub.Write(write_request(election))
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    server.stub.Write(write_request(10))  # the primary's (empty) batch is fine
    backup.close()


def test_a_stale_election_id_is_refused_after_the_primary_changed(
    server: Server, primary: StreamClient
) -> None:
    newer = become_primary(server.stub, 12)
    with pytest.raises(grpc.RpcError) as caught:
        server.stub.Write(write_request(10))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    server.stub.Write(write_request(12))
    newer.close()


def test_reads_need_no_stream(server: Server, primary: StreamClient) -> None:
    replies = list(
        server.stub.Read(
            p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
        )
    )
    assert replies and not any(r.entities for r in replies)
