"""StreamChannel arbitration: who is primary, who is told, what is refused."""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r
from switch_support import DEVICE_ID, Server, StreamClient, become_primary

from softswitch.p4runtime.arbitration import election_id, uint128

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
    higher.close()
    # The primary left: the next highest takes over and everyone is told.
    assert arbitration(first) == (OK, 5)
    assert arbitration(lower) == (ALREADY_EXISTS, 5)
    for client in (first, lower):
        client.close()


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


def test_a_named_role_is_unimplemented(server: Server) -> None:
    client = StreamClient(server.stub)
    client.arbitrate(1, role="sdn")
    assert client.recv_error().code() == grpc.StatusCode.UNIMPLEMENTED
    client.close()


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
