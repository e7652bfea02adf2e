"""SetForwardingPipelineConfig / GetForwardingPipelineConfig / Capabilities."""

from __future__ import annotations

import re

import grpc
import pytest
from finsy.proto import p4r
from switch_support import (
    A_SET_PORT,
    DEVICE_ID,
    R32,
    T_EXACT,
    Server,
    StreamClient,
    become_primary,
    make_p4info,
    reflector_config,
    start_server,
    stop_server,
)

from softswitch.p4runtime.arbitration import uint128
from softswitch.p4runtime.conformance import Conformance

Code = grpc.StatusCode
Set = p4r.SetForwardingPipelineConfigRequest
Get = p4r.GetForwardingPipelineConfigRequest


def set_config(
    server: Server, action: int, config: p4r.ForwardingPipelineConfig | None = None, election: int = 10
) -> None:
    request = Set(device_id=DEVICE_ID, election_id=uint128(election), action=action)  # type: ignore[arg-type]
    if config is not None:
        request.config.CopyFrom(config)
    server.stub.SetForwardingPipelineConfig(request)


def get_config(server: Server, kind: int = Get.ALL) -> p4r.ForwardingPipelineConfig:
    return server.stub.GetForwardingPipelineConfig(Get(device_id=DEVICE_ID, response_type=kind)).config  # type: ignore[arg-type]


def status_of(call) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def test_capabilities_reports_the_api_version(server: Server) -> None:
    assert (
        server.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"
    )  # as bmv2 1.15


def test_without_a_pipeline_reads_writes_and_gets_fail_with_failed_precondition(server: Server) -> None:
    client = become_primary(server.stub, 10)
    error = status_of(lambda: get_config(server))
    assert error.code() == Code.FAILED_PRECONDITION
    assert re.search(r"no .*\bforwarding pipeline config", error.details(), re.I)  # what finsy looks for
    assert (
        status_of(
            lambda: server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10)))
        ).code()
        == Code.FAILED_PRECONDITION
    )
    assert (
        status_of(
            lambda: list(
                server.stub.Read(
                    p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
                )
            )
        ).code()
        == Code.FAILED_PRECONDITION
    )
    client.close()


def test_get_returns_what_was_pushed_by_response_type(server: Server, primary: StreamClient) -> None:
    full = get_config(server)
    assert full.p4info == make_p4info() and full.p4_device_config == b"reflector" and full.cookie.cookie == 7
    cookie = get_config(server, Get.COOKIE_ONLY)
    assert cookie.cookie.cookie == 7 and not cookie.HasField("p4info") and not cookie.p4_device_config
    info = get_config(server, Get.P4INFO_AND_COOKIE)
    assert info.HasField("p4info") and not info.p4_device_config and info.cookie.cookie == 7
    device = get_config(server, Get.DEVICE_CONFIG_AND_COOKIE)
    assert device.p4_device_config == b"reflector" and not device.HasField("p4info")
    assert (
        status_of(lambda: server.stub.GetForwardingPipelineConfig(Get(device_id=DEVICE_ID + 1))).code()
        == Code.NOT_FOUND
    )


def test_verify_checks_without_installing(server: Server) -> None:
    client = become_primary(server.stub, 10)
    set_config(server, Set.VERIFY, reflector_config())
    assert status_of(lambda: get_config(server)).code() == Code.FAILED_PRECONDITION
    bad = reflector_config()
    bad.p4_device_config = b"garbage"
    assert status_of(lambda: set_config(server, Set.VERIFY_AND_COMMIT, bad)).code() == Code.INVALID_ARGUMENT
    assert (
        status_of(
            lambda: set_config(
                server, Set.VERIFY_AND_COMMIT, p4r.ForwardingPipelineConfig(p4_device_config=b"reflector")
            )
        ).code()
        == Code.INVALID_ARGUMENT
    )  # no P4Info
    assert status_of(lambda: get_config(server)).code() == Code.FAILED_PRECONDITION
    client.close()


def test_verify_and_save_then_commit(server: Server) -> None:
    client = become_primary(server.stub, 10)
    assert status_of(lambda: set_config(server, Set.COMMIT)).code() == Code.NOT_FOUND  # nothing saved
    set_config(server, Set.VERIFY_AND_SAVE, reflector_config(cookie=3))
    assert status_of(lambda: get_config(server)).code() == Code.FAILED_PRECONDITION
    # COMMIT realizes the saved config; one carried by the COMMIT itself is a mistake, not a second save.
    error = status_of(lambda: set_config(server, Set.COMMIT, reflector_config(cookie=4)))
    assert error.code() == Code.INVALID_ARGUMENT
    set_config(server, Set.COMMIT)
    assert get_config(server).cookie.cookie == 3
    client.close()


def test_bmv2_answers_commit_without_a_saved_config_and_ignores_a_config_in_it() -> None:
    server = start_server(conformance=Conformance.BMV2)
    try:
        client = become_primary(server.stub, 10)
        assert status_of(lambda: set_config(server, Set.COMMIT)).code() == Code.FAILED_PRECONDITION
        set_config(server, Set.VERIFY_AND_SAVE, reflector_config(cookie=3))
        set_config(server, Set.COMMIT, reflector_config(cookie=4))
        assert get_config(server).cookie.cookie == 3
        client.close()
    finally:
        stop_server(server)


def test_only_the_primary_sets_the_pipeline(server: Server, primary: StreamClient) -> None:
    assert (
        status_of(lambda: set_config(server, Set.VERIFY_AND_COMMIT, reflector_config(), election=9)).code()
        == Code.PERMISSION_DENIED
    )
    request = Set(
        device_id=DEVICE_ID + 1,
        election_id=uint128(10),
        action=Set.VERIFY_AND_COMMIT,
        config=reflector_config(),
    )
    assert status_of(lambda: server.stub.SetForwardingPipelineConfig(request)).code() == Code.NOT_FOUND


def install_state(server: Server) -> None:
    entry = p4r.TableEntry(
        table_id=T_EXACT,
        match=[
            p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x01")),
            p4r.FieldMatch(field_id=2, exact=p4r.FieldMatch.Exact(value=b"\x02")),
        ],
        action=p4r.TableAction(
            action=p4r.Action(action_id=A_SET_PORT, params=[p4r.Action.Param(param_id=1, value=b"\x03")])
        ),
    )
    group = p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(
            multicast_group_id=2, replicas=[p4r.Replica(egress_port=1)]
        )
    )
    register = p4r.RegisterEntry(register_id=R32, index=p4r.Index(index=1))
    register.data.bitstring = b"\x2a"
    server.stub.Write(
        p4r.WriteRequest(
            device_id=DEVICE_ID,
            election_id=uint128(10),
            updates=[
                p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry)),
                p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(packet_replication_engine_entry=group)),
                p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(register_entry=register)),
            ],
        )
    )


def snapshot(server: Server) -> tuple[int, int, bytes]:
    def count(**entity: object) -> list[p4r.Entity]:
        replies = server.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(**entity)]))  # type: ignore[arg-type]
        return [e for r in replies for e in r.entities]

    tables = count(table_entry=p4r.TableEntry())
    groups = count(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            multicast_group_entry=p4r.MulticastGroupEntry()
        )
    )
    [reg] = count(register_entry=p4r.RegisterEntry(register_id=R32, index=p4r.Index(index=1)))
    return len(tables), len(groups), reg.register_entry.data.bitstring


def test_verify_and_commit_starts_from_a_clean_state(server: Server, primary: StreamClient) -> None:
    install_state(server)
    assert snapshot(server) == (1, 1, b"\x2a")
    set_config(server, Set.VERIFY_AND_COMMIT, reflector_config())
    assert snapshot(server) == (0, 0, b"\x00")


def test_reconcile_and_commit_keeps_what_still_fits(server: Server, primary: StreamClient) -> None:
    install_state(server)
    set_config(server, Set.RECONCILE_AND_COMMIT, reflector_config(cookie=8))
    assert snapshot(server) == (1, 1, b"\x2a")
    assert get_config(server, Get.COOKIE_ONLY).cookie.cookie == 8
    # A new P4Info whose t_exact lost its key drops that table's entries, keeps the rest.
    changed = reflector_config()
    del changed.p4info.tables[0].match_fields[1]
    set_config(server, Set.RECONCILE_AND_COMMIT, changed)
    assert snapshot(server) == (0, 1, b"\x2a")


def test_a_refused_config_changes_nothing(server: Server, primary: StreamClient) -> None:
    install_state(server)
    bad = reflector_config(cookie=99)
    bad.p4_device_config = b"garbage"
    for action in (Set.VERIFY_AND_COMMIT, Set.RECONCILE_AND_COMMIT):
        assert status_of(lambda a=action: set_config(server, a, bad)).code() == Code.INVALID_ARGUMENT
    assert snapshot(server) == (1, 1, b"\x2a")
    assert get_config(server, Get.COOKIE_ONLY).cookie.cookie == 7
