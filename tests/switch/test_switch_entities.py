"""Write and Read of P4Runtime entities: the server's contract with every client.

Errors follow simple_switch_grpc (bmv2 + PI): a batch with a refused update
fails with UNKNOWN and one p4.v1.Error per update, in order.
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4d, p4r
from switch_support import (
    A_DROP,
    A_NOACTION,
    A_SET_PORT,
    A_TABLE_ONLY,
    C_BOTH,
    C_PKTS,
    DEVICE_ID,
    R8,
    R32,
    T_CONST,
    T_EXACT,
    T_LPM,
    T_TERNARY,
    Server,
    StreamClient,
    batch_details,
)

from softswitch.p4runtime.arbitration import uint128

Code = grpc.StatusCode
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


# ------------------------------------------------------------------ builders
def exact(fid: int, value: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact(value=value))


def action(aid: int, *params: bytes) -> p4r.TableAction:
    return p4r.TableAction(
        action=p4r.Action(
            action_id=aid,
            params=[p4r.Action.Param(param_id=i, value=v) for i, v in enumerate(params, start=1)],
        )
    )


def exact_entry(
    f16: bytes = b"\x00\x07", f9: bytes = b"\x01", act: p4r.TableAction | None = None, **extra: object
) -> p4r.TableEntry:
    entry = p4r.TableEntry(table_id=T_EXACT, match=[exact(1, f16), exact(2, f9)], **extra)  # type: ignore[arg-type]
    if act is not None:
        entry.action.CopyFrom(act)
    return entry


def update(kind: int, **entity: object) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))  # type: ignore[arg-type]


def write(server: Server, *updates: p4r.Update, atomicity: int = 0) -> None:
    server.stub.Write(
        p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), updates=updates, atomicity=atomicity)
    )  # type: ignore[arg-type]


def write_codes(server: Server, *updates: p4r.Update) -> list[Code]:
    """The per-update codes of a batch that must fail."""
    with pytest.raises(grpc.RpcError) as caught:
        write(server, *updates)
    assert caught.value.code() == Code.UNKNOWN
    details = batch_details(caught.value)
    assert len(details) == len(updates)
    by_number = {c.value[0]: c for c in Code}
    return [by_number[d.canonical_code] for d in details]


def write_code(server: Server, one: p4r.Update) -> Code:
    return write_codes(server, one)[0]


def read(server: Server, **entity: object) -> list[p4r.Entity]:
    replies = server.stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(**entity)]))  # type: ignore[arg-type]
    return [e for r in replies for e in r.entities]


def read_error(server: Server, **entity: object) -> Code:
    with pytest.raises(grpc.RpcError) as caught:
        read(server, **entity)
    return caught.value.code()


# ------------------------------------------------------------- table entries
def test_entry_written_with_padded_bytes_reads_back_canonical(server: Server, primary: StreamClient) -> None:
    write(
        server,
        update(
            INSERT, table_entry=exact_entry(b"\x00\x00\x07", b"\x00\x01", action(A_SET_PORT, b"\x00\x00\x03"))
        ),
    )
    [entity] = read(server, table_entry=p4r.TableEntry(table_id=T_EXACT))
    entry = entity.table_entry
    assert [m.exact.value for m in entry.match] == [b"\x07", b"\x01"]
    assert entry.action.action.params[0].value == b"\x03"
    # Zero is one 0x00 byte.
    write(
        server, update(INSERT, table_entry=exact_entry(b"\x00\x00", b"\x00", action(A_SET_PORT, b"\x00\x00")))
    )
    zero = [
        e.table_entry
        for e in read(server, table_entry=p4r.TableEntry(table_id=T_EXACT))
        if e.table_entry.match[0].exact.value == b"\x00"
    ]
    assert zero[0].match[1].exact.value == b"\x00" and zero[0].action.action.params[0].value == b"\x00"


def test_values_wider_than_the_field_are_out_of_range(server: Server, primary: StreamClient) -> None:
    assert (
        write_code(
            server, update(INSERT, table_entry=exact_entry(b"\x01\x00\x00", act=action(A_SET_PORT, b"\x01")))
        )
        == Code.OUT_OF_RANGE
    )
    assert (
        write_code(
            server, update(INSERT, table_entry=exact_entry(f9=b"\x02\x00", act=action(A_SET_PORT, b"\x01")))
        )
        == Code.OUT_OF_RANGE
    )  # 512 > bit<9>
    assert (
        write_code(server, update(INSERT, table_entry=exact_entry(act=action(A_SET_PORT, b"\x02\x00"))))
        == Code.OUT_OF_RANGE
    )


def test_batch_reports_one_error_per_update_in_order(server: Server, primary: StreamClient) -> None:
    good = exact_entry(act=action(A_SET_PORT, b"\x01"))
    codes = write_codes(
        server,
        update(INSERT, table_entry=good),
        update(INSERT, table_entry=good),  # duplicate
        update(MODIFY, table_entry=exact_entry(b"\x00\x09", act=action(A_DROP))),  # no such entry
        update(INSERT, table_entry=exact_entry(b"\x00\x08", act=action(A_DROP))),
        update(DELETE, table_entry=p4r.TableEntry(table_id=999)),  # no such table (PI: "Invalid P4 id")
    )
    assert codes == [Code.OK, Code.ALREADY_EXISTS, Code.NOT_FOUND, Code.OK, Code.NOT_FOUND]
    # CONTINUE_ON_ERROR: the good updates were applied.
    assert len(read(server, table_entry=p4r.TableEntry(table_id=T_EXACT))) == 2


def test_modify_and_delete(server: Server, primary: StreamClient) -> None:
    write(server, update(INSERT, table_entry=exact_entry(act=action(A_SET_PORT, b"\x01"))))
    write(server, update(MODIFY, table_entry=exact_entry(act=action(A_SET_PORT, b"\x05"), metadata=b"m")))
    [entity] = read(server, table_entry=p4r.TableEntry(table_id=T_EXACT))
    assert entity.table_entry.action.action.params[0].value == b"\x05"
    assert entity.table_entry.metadata == b"m"
    write(server, update(DELETE, table_entry=exact_entry()))
    assert read(server, table_entry=p4r.TableEntry(table_id=T_EXACT)) == []
    assert write_code(server, update(DELETE, table_entry=exact_entry())) == Code.NOT_FOUND


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (
            p4r.TableEntry(table_id=T_EXACT, match=[exact(1, b"\x01")], action=action(A_DROP)),
            Code.INVALID_ARGUMENT,
        ),
        (
            p4r.TableEntry(
                table_id=T_EXACT,
                match=[exact(1, b"\x01"), exact(1, b"\x01"), exact(2, b"\x01")],
                action=action(A_DROP),
            ),
            Code.INVALID_ARGUMENT,
        ),
        (
            p4r.TableEntry(
                table_id=T_EXACT, match=[exact(1, b"\x01"), exact(9, b"\x01")], action=action(A_DROP)
            ),
            Code.INVALID_ARGUMENT,
        ),
        (
            p4r.TableEntry(table_id=T_EXACT, match=[exact(1, b""), exact(2, b"\x01")], action=action(A_DROP)),
            Code.OUT_OF_RANGE,  # P4Runtime "Bytestrings": an empty one is always refused, OUT_OF_RANGE
        ),
        (
            p4r.TableEntry(
                table_id=T_EXACT,
                match=[
                    exact(1, b"\x01"),
                    p4r.FieldMatch(field_id=2, lpm=p4r.FieldMatch.LPM(value=b"\x01", prefix_len=9)),
                ],
                action=action(A_DROP),
            ),
            Code.INVALID_ARGUMENT,
        ),
        (exact_entry(act=action(A_SET_PORT)), Code.INVALID_ARGUMENT),  # missing param
        (exact_entry(act=action(A_SET_PORT, b"\x01", b"\x01")), Code.INVALID_ARGUMENT),  # extra param
        (exact_entry(act=action(777)), Code.INVALID_ARGUMENT),  # not an action of the table
        (exact_entry(act=action(A_NOACTION)), Code.INVALID_ARGUMENT),  # default-only action in an entry
        (exact_entry(), Code.INVALID_ARGUMENT),  # no action
        (exact_entry(act=action(A_DROP), priority=5), Code.INVALID_ARGUMENT),  # exact table takes no priority
        (exact_entry(act=p4r.TableAction(action_profile_member_id=1)), Code.UNIMPLEMENTED),
        (exact_entry(act=action(A_DROP), idle_timeout_ns=100), Code.UNIMPLEMENTED),
        (p4r.TableEntry(table_id=999), Code.NOT_FOUND),  # no such table (PI: "Invalid P4 id")
        (
            p4r.TableEntry(table_id=T_CONST, match=[exact(1, b"\x01")], action=action(A_DROP)),
            Code.PERMISSION_DENIED,
        ),
    ],
    ids=[
        "exact-missing",
        "duplicate-field",
        "unknown-field",
        "empty-bytes",
        "wrong-kind",
        "param-missing",
        "param-extra",
        "foreign-action",
        "default-only",
        "no-action",
        "priority",
        "profile",
        "idle-timeout",
        "unknown-table",
        "const-table",
    ],
)
def test_malformed_table_entries_are_refused(
    server: Server, primary: StreamClient, entry: p4r.TableEntry, code: Code
) -> None:
    assert write_code(server, update(INSERT, table_entry=entry)) == code
    assert read(server, table_entry=p4r.TableEntry()) == []


def lpm(value: bytes, plen: int) -> p4r.TableEntry:
    return p4r.TableEntry(
        table_id=T_LPM,
        match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=value, prefix_len=plen))],
        action=action(A_SET_PORT, b"\x02"),
    )


def test_lpm_rules(server: Server, primary: StreamClient) -> None:
    assert (
        write_code(server, update(INSERT, table_entry=lpm(b"\x0a\x00\x00\x00", 0))) == Code.INVALID_ARGUMENT
    )
    assert (
        write_code(server, update(INSERT, table_entry=lpm(b"\x0a\x00\x00\x01", 24))) == Code.INVALID_ARGUMENT
    )
    assert (
        write_code(server, update(INSERT, table_entry=lpm(b"\x0a\x00\x00\x00", 33))) == Code.INVALID_ARGUMENT
    )
    write(server, update(INSERT, table_entry=lpm(b"\x0a\x01\x00\x00", 16)))
    [entity] = read(server, table_entry=p4r.TableEntry(table_id=T_LPM))
    assert entity.table_entry.match[0].lpm.value == b"\x0a\x01\x00\x00"
    assert entity.table_entry.match[0].lpm.prefix_len == 16


def ternary_entry(priority: int = 10, **fields: p4r.FieldMatch) -> p4r.TableEntry:
    return p4r.TableEntry(
        table_id=T_TERNARY, priority=priority, match=list(fields.values()), action=action(A_SET_PORT, b"\x01")
    )


def ternary(value: bytes, mask: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(value=value, mask=mask))


def range_(low: bytes, high: bytes) -> p4r.FieldMatch:
    return p4r.FieldMatch(field_id=2, range=p4r.FieldMatch.Range(low=low, high=high))


def test_ternary_range_optional_rules(server: Server, primary: StreamClient) -> None:
    bad = [
        ternary_entry(priority=0, t=ternary(b"\x01", b"\xff")),  # priority required
        ternary_entry(t=ternary(b"\x01", b"\x00")),  # mask 0: omit the field instead
        ternary_entry(t=ternary(b"\x03", b"\x01")),  # value outside the mask
        ternary_entry(r=range_(b"\x05", b"\x04")),  # low > high
        ternary_entry(r=range_(b"\x00", b"\xff\xff")),  # full range: omit the field
    ]
    assert write_codes(server, *[update(INSERT, table_entry=e) for e in bad]) == [Code.INVALID_ARGUMENT] * 5
    optional = p4r.FieldMatch(field_id=3, optional=p4r.FieldMatch.Optional(value=b"\x00\x07"))
    write(
        server,
        update(
            INSERT,
            table_entry=ternary_entry(
                t=ternary(b"\x00\x10", b"\xf0"), r=range_(b"\x00\x01", b"\x00\x10"), o=optional
            ),
        ),
    )
    write(
        server, update(INSERT, table_entry=ternary_entry(priority=3))
    )  # all wildcards: fine with a priority
    entries = sorted(
        (e.table_entry for e in read(server, table_entry=p4r.TableEntry(table_id=T_TERNARY))),
        key=lambda e: e.priority,
    )
    assert [e.priority for e in entries] == [3, 10]
    assert list(entries[0].match) == []
    t, r, o = entries[1].match
    assert (t.ternary.value, t.ternary.mask) == (b"\x10", b"\xf0")
    assert (r.range.low, r.range.high) == (b"\x01", b"\x10")
    assert o.optional.value == b"\x07"
    # Same match, other priority: a different entry; read filtered by priority.
    assert [
        e.table_entry.priority
        for e in read(server, table_entry=p4r.TableEntry(table_id=T_TERNARY, priority=3))
    ] == [3]


def test_table_full_is_resource_exhausted(server: Server, primary: StreamClient) -> None:
    updates = [update(INSERT, table_entry=exact_entry(bytes([0, i]), act=action(A_DROP))) for i in range(5)]
    assert write_codes(server, *updates) == [Code.OK] * 4 + [Code.RESOURCE_EXHAUSTED]


def test_default_action(server: Server, primary: StreamClient) -> None:
    def default() -> p4r.TableEntry:
        [entity] = read(server, table_entry=p4r.TableEntry(table_id=T_EXACT, is_default_action=True))
        return entity.table_entry

    assert default().action.action.action_id == A_NOACTION and default().is_default_action
    write(
        server,
        update(
            MODIFY,
            table_entry=p4r.TableEntry(
                table_id=T_EXACT, is_default_action=True, action=action(A_SET_PORT, b"\x04")
            ),
        ),
    )
    assert default().action.action.params[0].value == b"\x04"
    # Wildcard reads never include the default entry.
    assert read(server, table_entry=p4r.TableEntry(table_id=T_EXACT)) == []
    # MODIFY without an action restores the program's default.
    write(server, update(MODIFY, table_entry=p4r.TableEntry(table_id=T_EXACT, is_default_action=True)))
    assert default().action.action.action_id == A_NOACTION
    codes = write_codes(
        server,
        update(
            INSERT,
            table_entry=p4r.TableEntry(table_id=T_EXACT, is_default_action=True, action=action(A_DROP)),
        ),
        update(
            MODIFY,
            table_entry=p4r.TableEntry(
                table_id=T_EXACT, is_default_action=True, action=action(A_TABLE_ONLY, b"\x01", b"\x01")
            ),
        ),
        update(
            MODIFY,
            table_entry=p4r.TableEntry(
                table_id=T_EXACT, is_default_action=True, match=[exact(1, b"\x01")], action=action(A_DROP)
            ),
        ),
        update(
            MODIFY,
            table_entry=p4r.TableEntry(table_id=T_CONST, is_default_action=True, action=action(A_DROP)),
        ),
    )
    assert codes == [
        Code.INVALID_ARGUMENT,
        Code.INVALID_ARGUMENT,
        Code.INVALID_ARGUMENT,
        Code.PERMISSION_DENIED,
    ]


def test_read_wildcards_and_read_by_key(server: Server, primary: StreamClient) -> None:
    write(
        server,
        update(INSERT, table_entry=exact_entry(b"\x00\x01", act=action(A_DROP))),
        update(INSERT, table_entry=exact_entry(b"\x00\x02", act=action(A_DROP))),
        update(INSERT, table_entry=lpm(b"\x0a\x00\x00\x00", 8)),
    )
    assert len(read(server, table_entry=p4r.TableEntry())) == 3
    [one] = read(server, table_entry=exact_entry(b"\x00\x02"))
    assert one.table_entry.match[0].exact.value == b"\x02"
    assert read(server, table_entry=exact_entry(b"\x00\x03")) == []  # a key nobody inserted: nothing, as PI
    assert read_error(server, table_entry=p4r.TableEntry(table_id=999)) == Code.NOT_FOUND  # no such table
    assert read_error(server, table_entry=p4r.TableEntry(match=[exact(1, b"\x01")])) == Code.INVALID_ARGUMENT


def test_direct_counters(server: Server, primary: StreamClient) -> None:
    write(
        server,
        update(
            INSERT,
            table_entry=exact_entry(
                act=action(A_DROP), counter_data=p4r.CounterData(packet_count=5, byte_count=50)
            ),
        ),
    )
    [plain] = read(server, table_entry=p4r.TableEntry(table_id=T_EXACT))
    assert not plain.table_entry.HasField("counter_data")  # only when asked for
    [with_data] = read(server, table_entry=p4r.TableEntry(table_id=T_EXACT, counter_data=p4r.CounterData()))
    assert (
        with_data.table_entry.counter_data.packet_count,
        with_data.table_entry.counter_data.byte_count,
    ) == (5, 50)
    write(
        server,
        update(
            MODIFY,
            direct_counter_entry=p4r.DirectCounterEntry(
                table_entry=exact_entry(), data=p4r.CounterData(packet_count=1, byte_count=2)
            ),
        ),
    )
    [direct] = read(
        server, direct_counter_entry=p4r.DirectCounterEntry(table_entry=p4r.TableEntry(table_id=T_EXACT))
    )
    assert (direct.direct_counter_entry.data.packet_count, direct.direct_counter_entry.data.byte_count) == (
        1,
        2,
    )
    assert direct.direct_counter_entry.table_entry.match[0].exact.value == b"\x07"
    assert (
        read_error(
            server, direct_counter_entry=p4r.DirectCounterEntry(table_entry=p4r.TableEntry(table_id=T_LPM))
        )
        == Code.INVALID_ARGUMENT
    )


# --------------------------------------------------------------- multicast
def group(gid: int, *replicas: tuple[int, int], port_bytes: bool = False) -> p4r.PacketReplicationEngineEntry:
    items = [
        p4r.Replica(port=port.to_bytes(2, "big"), instance=rid)
        if port_bytes
        else p4r.Replica(egress_port=port, instance=rid)
        for port, rid in replicas
    ]
    return p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=gid, replicas=items)
    )


def read_groups(server: Server, gid: int = 0) -> list[tuple[int, list[tuple[int | bytes, int]]]]:
    """Groups in the order the server answers: (id, [(egress_port or port bytes, instance)])."""
    entities = read(server, packet_replication_engine_entry=group(gid))
    return [
        (
            e.packet_replication_engine_entry.multicast_group_entry.multicast_group_id,
            [
                (r.port if r.WhichOneof("port_kind") == "port" else r.egress_port, r.instance)
                for r in e.packet_replication_engine_entry.multicast_group_entry.replicas
            ],
        )
        for e in entities
    ]


def test_multicast_groups(server: Server, primary: StreamClient) -> None:
    write(
        server,
        update(INSERT, packet_replication_engine_entry=group(1, (1, 0), (2, 0), (1, 1))),
        update(INSERT, packet_replication_engine_entry=group(7, (3, 5), port_bytes=True)),
    )
    # As PI: the newest group first, replicas by instance (newest first) then port; ports read back
    # in the form they were written.
    assert read_groups(server) == [(7, [(b"\x00\x03", 5)]), (1, [(1, 1), (1, 0), (2, 0)])]
    assert read_groups(server, 7) == [(7, [(b"\x00\x03", 5)])]
    write(server, update(MODIFY, packet_replication_engine_entry=group(7, (4, 6))))
    write(server, update(DELETE, packet_replication_engine_entry=group(1)))
    assert read_groups(server) == [(7, [(4, 6)])]
    assert read_error(server, packet_replication_engine_entry=group(1)) == Code.NOT_FOUND  # by id: must exist
    codes = write_codes(
        server,
        update(INSERT, packet_replication_engine_entry=group(7, (1, 0))),
        update(MODIFY, packet_replication_engine_entry=group(8, (1, 0))),
        update(INSERT, packet_replication_engine_entry=group(0, (1, 0))),
        update(INSERT, packet_replication_engine_entry=group(9, (1, 0), (1, 0))),
        update(INSERT, packet_replication_engine_entry=group(70000, (1, 0))),
    )
    assert codes == [
        Code.ALREADY_EXISTS,
        Code.NOT_FOUND,
        Code.INVALID_ARGUMENT,
        Code.INVALID_ARGUMENT,
        Code.OUT_OF_RANGE,
    ]


def test_clone_sessions(server: Server, primary: StreamClient) -> None:
    session = p4r.PacketReplicationEngineEntry(
        clone_session_entry=p4r.CloneSessionEntry(
            session_id=5, replicas=[p4r.Replica(egress_port=3, instance=1)]
        )
    )
    write(server, update(INSERT, packet_replication_engine_entry=session))
    [entity] = read(
        server,
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=p4r.CloneSessionEntry()
        ),
    )
    assert entity.packet_replication_engine_entry.clone_session_entry == session.clone_session_entry


# ------------------------------------------------------ counters, registers
def test_indexed_counters(server: Server, primary: StreamClient) -> None:
    everything = read(server, counter_entry=p4r.CounterEntry())
    assert len(everything) == 8 + 4
    write(
        server,
        update(
            MODIFY,
            counter_entry=p4r.CounterEntry(
                counter_id=C_BOTH,
                index=p4r.Index(index=2),
                data=p4r.CounterData(packet_count=3, byte_count=300),
            ),
        ),
    )
    [one] = read(server, counter_entry=p4r.CounterEntry(counter_id=C_BOTH, index=p4r.Index(index=2)))
    assert (one.counter_entry.data.packet_count, one.counter_entry.data.byte_count) == (3, 300)
    # A packets-only counter reports no bytes.
    write(
        server,
        update(
            MODIFY,
            counter_entry=p4r.CounterEntry(
                counter_id=C_PKTS, data=p4r.CounterData(packet_count=9, byte_count=99)
            ),
        ),
    )
    packets_only = read(server, counter_entry=p4r.CounterEntry(counter_id=C_PKTS))
    assert [(e.counter_entry.data.packet_count, e.counter_entry.data.byte_count) for e in packets_only] == [
        (9, 0)
    ] * 8
    codes = write_codes(
        server,
        update(MODIFY, counter_entry=p4r.CounterEntry(counter_id=C_BOTH, index=p4r.Index(index=4))),
        update(INSERT, counter_entry=p4r.CounterEntry(counter_id=C_BOTH, index=p4r.Index(index=0))),
        update(MODIFY, counter_entry=p4r.CounterEntry(counter_id=12345)),  # no such counter
        update(MODIFY, counter_entry=p4r.CounterEntry(counter_id=C_BOTH, index=p4r.Index(index=-1))),
    )
    assert codes == [Code.OUT_OF_RANGE, Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.INVALID_ARGUMENT]


def register_entry(rid: int, index: int | None, value: bytes | None = None) -> p4r.RegisterEntry:
    entry = p4r.RegisterEntry(register_id=rid)
    if index is not None:
        entry.index.index = index
    if value is not None:
        entry.data.bitstring = value
    return entry


def register_values(server: Server, rid: int) -> list[bytes]:
    return [e.register_entry.data.bitstring for e in read(server, register_entry=register_entry(rid, None))]


def test_registers_write_one_index_or_all(server: Server, primary: StreamClient) -> None:
    assert register_values(server, R8) == [b"\x00"] * 4
    write(server, update(MODIFY, register_entry=register_entry(R32, 3, b"\x00\x00\x01\x00")))
    assert register_values(server, R32) == [b"\x00"] * 3 + [b"\x01\x00"] + [b"\x00"] * 4
    write(server, update(MODIFY, register_entry=register_entry(R32, None, b"\x05")))
    assert register_values(server, R32) == [b"\x05"] * 8
    write(server, update(MODIFY, register_entry=register_entry(R32, None, b"\x00")))  # reset
    assert register_values(server, R32) == [b"\x00"] * 8
    assert len(read(server, register_entry=p4r.RegisterEntry())) == 8 + 4
    codes = write_codes(
        server,
        update(MODIFY, register_entry=register_entry(R8, 0, b"\x01\x00")),
        update(MODIFY, register_entry=register_entry(R8, 4, b"\x01")),
        update(MODIFY, register_entry=register_entry(R8, 0)),
        update(INSERT, register_entry=register_entry(R8, 0, b"\x01")),
        update(MODIFY, register_entry=p4r.RegisterEntry(register_id=R8, data=p4d.P4Data(bool=True))),
    )
    assert codes == [
        Code.OUT_OF_RANGE,
        Code.OUT_OF_RANGE,
        Code.INVALID_ARGUMENT,
        Code.INVALID_ARGUMENT,
        Code.INVALID_ARGUMENT,
    ]
    assert read_error(server, register_entry=register_entry(R8, 9)) == Code.OUT_OF_RANGE


# ---------------------------------------------------------- whole requests
def test_request_level_errors(server: Server, primary: StreamClient) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        write(server, update(INSERT, table_entry=exact_entry(act=action(A_DROP))), atomicity=1)
    assert caught.value.code() == Code.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as caught:
        server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID + 1, election_id=uint128(10)))
    assert caught.value.code() == Code.NOT_FOUND
    with pytest.raises(grpc.RpcError) as caught:
        server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), role="other"))
    assert caught.value.code() == Code.NOT_FOUND  # an unknown role (only the default one exists)
    codes = write_codes(
        server,
        p4r.Update(type=INSERT),
        p4r.Update(entity=p4r.Entity(table_entry=exact_entry(act=action(A_DROP)))),
        update(INSERT, meter_entry=p4r.MeterEntry(meter_id=1)),  # the P4Info has no meter 1
        update(INSERT, meter_entry=p4r.MeterEntry(meter_id=0)),  # no id: meters are unimplemented
    )
    assert codes == [Code.INVALID_ARGUMENT, Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.UNIMPLEMENTED]
