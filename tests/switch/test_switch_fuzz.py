"""Garbage in, a defined status out: malformed requests never crash the server.

A crash inside a gRPC handler surfaces as UNKNOWN *without* per-update
details; a refused batch is UNKNOWN *with* exactly one p4.v1.Error per
update. So every reply below must be OK, a request-level code, or a batch
error with the right number of details.
"""

from __future__ import annotations

import random

import grpc
from finsy.proto import p4d, p4r
from switch_support import (
    A_DROP,
    A_SET_PORT,
    C_BOTH,
    DEVICE_ID,
    R32,
    T_EXACT,
    T_LPM,
    T_TERNARY,
    Server,
    StreamClient,
    batch_details,
)

from softswitch.p4runtime.arbitration import uint128

ROUNDS = 300
REQUEST_LEVEL = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED}


def junk(rng: random.Random) -> bytes:
    return rng.choice([b"", b"\x00", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))])


def random_match(rng: random.Random) -> p4r.FieldMatch:
    fm = p4r.FieldMatch(field_id=rng.choice([0, 1, 2, 3, 4, 99]))
    kind = rng.choice(["exact", "lpm", "ternary", "range", "optional", None])
    if kind == "exact":
        fm.exact.value = junk(rng)
    elif kind == "lpm":
        fm.lpm.value, fm.lpm.prefix_len = junk(rng), rng.randrange(-3, 40)
    elif kind == "ternary":
        fm.ternary.value, fm.ternary.mask = junk(rng), junk(rng)
    elif kind == "range":
        fm.range.low, fm.range.high = junk(rng), junk(rng)
    elif kind == "optional":
        fm.optional.value = junk(rng)
    return fm


def random_entity(rng: random.Random) -> p4r.Entity:
    kind = rng.randrange(6)
    if kind <= 2:
        entry = p4r.TableEntry(
            table_id=rng.choice([0, T_EXACT, T_LPM, T_TERNARY, 5]),
            priority=rng.choice([0, 0, 1, -5, 1 << 30]),
            is_default_action=rng.random() < 0.2,
            match=[random_match(rng) for _ in range(rng.randrange(4))],
        )
        if rng.random() < 0.8:
            entry.action.action.action_id = rng.choice([A_SET_PORT, A_DROP, 0, 12])
            for _ in range(rng.randrange(3)):
                entry.action.action.params.append(
                    p4r.Action.Param(param_id=rng.randrange(4), value=junk(rng))
                )
        if rng.random() < 0.2:
            entry.counter_data.packet_count = rng.randrange(-2, 5)
        return p4r.Entity(table_entry=entry)
    if kind == 3:
        group = p4r.MulticastGroupEntry(multicast_group_id=rng.choice([0, 1, 2, 70000]))
        for _ in range(rng.randrange(4)):
            replica = p4r.Replica(instance=rng.choice([0, 1, 1 << 20]))
            if rng.random() < 0.5:
                replica.port = junk(rng)
            else:
                replica.egress_port = rng.randrange(4)
            group.replicas.append(replica)
        return p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(multicast_group_entry=group)
        )
    if kind == 4:
        register = p4r.RegisterEntry(register_id=rng.choice([0, R32, 7]))
        if rng.random() < 0.7:
            register.index.index = rng.randrange(-2, 10)
        if rng.random() < 0.8:
            register.data.CopyFrom(p4d.P4Data(bitstring=junk(rng)))
        return p4r.Entity(register_entry=register)
    counter = p4r.CounterEntry(counter_id=rng.choice([0, C_BOTH, 3]))
    if rng.random() < 0.7:
        counter.index.index = rng.randrange(-2, 6)
    return p4r.Entity(counter_entry=counter)


def test_random_writes_and_reads_get_defined_answers(server: Server, primary: StreamClient) -> None:
    rng = random.Random(20261122)
    outcomes: set[str] = set()
    for _ in range(ROUNDS):
        updates = [
            p4r.Update(type=rng.randrange(5), entity=random_entity(rng)) for _ in range(rng.randrange(1, 5))
        ]
        try:
            server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), updates=updates))
            outcomes.add("ok")
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNKNOWN:
                assert len(batch_details(error)) == len(updates), error.details()
                outcomes.add("batch")
            else:
                raise AssertionError(f"unexpected {error.code()}: {error.details()}") from None
        try:
            list(server.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[random_entity(rng)])))
            outcomes.add("read ok")
        except grpc.RpcError as error:
            assert error.code() in REQUEST_LEVEL | {
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.OUT_OF_RANGE,
            }, error.details()
            outcomes.add("read refused")
    assert outcomes == {"ok", "batch", "read ok", "read refused"}  # the generator reached every path


def test_undecodable_bytes_are_not_a_crash(server: Server, primary: StreamClient) -> None:
    rng = random.Random(7)
    raw_write = server.channel.unary_unary("/p4.v1.P4Runtime/Write")
    for _ in range(50):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))
        try:
            raw_write(blob)
        except grpc.RpcError as error:
            # Either protobuf could not parse it (INTERNAL from grpc) or a defined P4Runtime refusal.
            assert error.code() in {
                grpc.StatusCode.INTERNAL,
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.UNKNOWN,
                grpc.StatusCode.UNIMPLEMENTED,
            }, error
            if error.code() == grpc.StatusCode.UNKNOWN:
                batch_details(error)
    assert server.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version
