"""P4Runtime entities <-> runtime state: validation, writes and reads.

One `EntityStore` serves one loaded pipeline. Writes validate the whole
update against the P4Info first (ids, match kinds, widths, priorities,
action scopes) and only then change the state, so a refused update never
leaves a half-applied change. Reads answer with canonical bytestrings.
Callers hold the data-plane lock around every call: the packet loop must
never see a table in the middle of an update.

Answers follow PI (simple_switch_grpc) where a client can tell them apart:
a table entry read by a key nobody inserted is simply absent while a
multicast group or clone session read by an id nobody inserted is
NOT_FOUND, multicast groups read back newest first with their replicas in
PI's order and their ports in the form they were written. An id the P4Info does not have, of any kind of
object, is NOT_FOUND as the specification has it (`errors.unknown_id`).
`Conformance.BMV2` adds PI's answers that break the specification (module
`conformance`; there an unknown id is INVALID_ARGUMENT "Invalid P4 id"); a
`broken` store is the pipeline PI keeps after accepting a device config its
target cannot run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeVar

from finsy.proto import p4d, p4i, p4r

from softswitch.p4runtime.codec import decode, encode
from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.digests import Digests
from softswitch.p4runtime.errors import (
    COUNTER_READ_FAILED,
    COUNTER_WILDCARD_WRITE,
    DIGEST_WILDCARD_READ,
    NO_CLONE_SESSION,
    NO_DIRECT_COUNTER_TABLE,
    NO_MULTICAST_GROUP,
    REGISTER_READS,
    REGISTER_WRITES,
    TABLE_READ_FAILED,
    TABLE_WRITE_FAILED,
    P4RuntimeError,
    already_exists,
    invalid,
    not_found,
    out_of_range,
    permission_denied,
    unimplemented,
    unknown,
    unknown_id,
)
from softswitch.p4runtime.schema import DEFAULT_ONLY, TABLE_ONLY, ActionInfo, Bits, Schema, TableInfo
from softswitch.runtime import state as st

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
_UPDATE_NAMES = {INSERT: "INSERT", MODIFY: "MODIFY", DELETE: "DELETE"}
MAX_GROUP_ID = 0xFFFF  # v1model mcast_grp and clone session ids are bit<16>
MAX_INSTANCE = 0xFFFF  # v1model egress_rid is bit<16>
MAX_PORT_WIDTH = 32
T = TypeVar("T")
Decode = Callable[[bytes, int, str], int]
# Entity kinds the target does not support: the P4 object kind their id names, and how to get that id.
_UNSUPPORTED: dict[str, tuple[str, Callable[[p4r.Entity], int]]] = {
    "action_profile_member": ("action profile", lambda e: e.action_profile_member.action_profile_id),
    "action_profile_group": ("action profile", lambda e: e.action_profile_group.action_profile_id),
    "meter_entry": ("meter", lambda e: e.meter_entry.meter_id),
    "direct_meter_entry": ("table", lambda e: e.direct_meter_entry.table_entry.table_id),
    "value_set_entry": ("value set", lambda e: e.value_set_entry.value_set_id),
}


def _state_call(fn: Callable[..., T], *args: object) -> T:
    try:
        return fn(*args)
    except st.StateError as error:
        raise P4RuntimeError.from_state(error) from None


class EntityStore:
    """Reads and writes the P4Runtime entities of one pipeline."""

    def __init__(
        self,
        schema: Schema,
        state: st.RuntimeState,
        conformance: Conformance = Conformance.SPEC,
        *,
        broken: bool = False,
        digests: Digests | None = None,
    ) -> None:
        schema.check_state(state)
        self.schema = schema
        self.state = state
        self.digests = digests if digests is not None else Digests(p4i.P4Info())
        self.conformance = conformance
        self.broken = broken  # PI accepted a config its target could not load: tables and counters fail
        self.decode: Decode = partial(decode, lenient=conformance.bmv2)

    # ================================================================ writes
    def write(self, update: p4r.Update) -> None:
        """Apply one update or raise P4RuntimeError (nothing changed)."""
        kind = update.type
        if kind not in _UPDATE_NAMES:
            raise invalid("update type must be INSERT, MODIFY or DELETE")
        which = update.entity.WhichOneof("entity")
        if which == "table_entry":
            self._write_table_entry(kind, update.entity.table_entry)
        elif which == "packet_replication_engine_entry":
            self._write_pre(kind, update.entity.packet_replication_engine_entry)
        elif which == "counter_entry":
            self._write_counter(kind, update.entity.counter_entry)
        elif which == "direct_counter_entry":
            self._write_direct_counter(kind, update.entity.direct_counter_entry)
        elif which == "register_entry":
            self._write_register(kind, update.entity.register_entry)
        elif which == "digest_entry":
            self.digests.write(kind, update.entity.digest_entry)
        elif which is None:
            raise invalid("update has no entity")
        else:
            raise self._unsupported(which, update.entity)

    def _unsupported(self, which: str, entity: p4r.Entity) -> P4RuntimeError:
        """The answer to a kind of entity this target never holds: an id the P4Info does not have is
        unknown (as for supported kinds, and as PI checks it first); a real object is UNIMPLEMENTED."""
        what, id_of = _UNSUPPORTED.get(which, ("", lambda e: 0))
        object_id = id_of(entity)
        known = {
            "table": self.schema.tables,
            "meter": self.schema.meters,
            "action profile": self.schema.action_profiles,
            "value set": self.schema.value_sets,
        }.get(what, {})
        pi_checks = what != "value set"  # PI refuses value sets before it looks at the id
        if object_id and object_id not in known and (pi_checks or not self.conformance.bmv2):
            return unknown_id(what, object_id, self.conformance)
        return unimplemented(f"{which} is not supported by this target")

    # ---------------------------------------------------------------- tables
    def _table(self, table_id: int) -> tuple[TableInfo, st.Table]:
        info = self.schema.tables.get(table_id)
        if info is None:
            raise unknown_id("table", table_id, self.conformance)
        return info, self.state.tables[table_id]

    def _write_table_entry(self, kind: int, msg: p4r.TableEntry) -> None:
        info, table = self._table(msg.table_id)
        if self.broken:
            raise unknown(TABLE_WRITE_FAILED[_UPDATE_NAMES[kind]])
        if info.is_const:
            raise permission_denied(f"table {info.name} is const")
        if msg.is_const and not self.conformance.bmv2:
            raise invalid(f"table {info.name}: is_const is read-only (only the program makes const entries)")
        if msg.HasField("meter_config") or msg.HasField("meter_counter_data"):
            raise unimplemented(f"table {info.name}: meters are not supported")
        if msg.idle_timeout_ns:
            raise unimplemented(f"table {info.name}: idle timeouts are not supported")
        if msg.is_default_action:
            self._write_default_action(kind, info, table, msg)
            return
        match = self.parse_match(info, msg)
        priority = self._priority(info, msg)
        if kind == DELETE:
            _state_call(table.delete, match, priority)
            return
        if not msg.HasField("action"):
            raise invalid(f"table {info.name}: {_UPDATE_NAMES[kind]} needs an action")
        action = self._parse_action(info, msg.action, default=False)
        counter = self._counter_data(info, msg)
        if kind == INSERT:
            entry = st.Entry(match=match, priority=priority, action=action, metadata=msg.metadata)
            _state_call(table.insert, entry)
        else:
            entry = _state_call(table.modify, match, priority, action, msg.metadata)
        if counter is not None:
            entry.packets, entry.bytes = counter

    def _write_default_action(self, kind: int, info: TableInfo, table: st.Table, msg: p4r.TableEntry) -> None:
        if kind != MODIFY:
            raise invalid(f"table {info.name}: the default entry can only be modified")
        if msg.match or msg.priority:
            raise invalid(f"table {info.name}: the default entry has no match fields and no priority")
        if info.const_default_action_id:
            raise permission_denied(f"table {info.name}: the default action is const")
        counter = self._counter_data(info, msg)
        if msg.HasField("action"):
            table.default_action = self._parse_action(info, msg.action, default=True)
        else:
            table.default_action = table.initial_default_action
        if counter is not None:
            table.default_packets, table.default_bytes = counter

    def _counter_data(self, info: TableInfo, msg: p4r.TableEntry) -> tuple[int, int] | None:
        if not msg.HasField("counter_data"):
            return None
        if not info.direct_counter_id:
            raise invalid(f"table {info.name} has no direct counter")
        return _counts(msg.counter_data)

    def parse_match(self, info: TableInfo, msg: p4r.TableEntry) -> tuple[st.FieldMatch, ...]:
        """The state's key tuple for a P4Runtime match (validated per the spec)."""
        positions = {f.id: i for i, f in enumerate(info.fields)}
        values: list[st.FieldMatch] = [None] * len(info.fields)
        seen: set[int] = set()
        for fm in msg.match:
            index = positions.get(fm.field_id)
            if index is None:
                raise invalid(f"table {info.name}: unknown match field id {fm.field_id}")
            if fm.field_id in seen:
                raise invalid(f"table {info.name}: match field id {fm.field_id} given twice")
            seen.add(fm.field_id)
            values[index] = _parse_field(info, info.fields[index], fm, self.decode)
        for field, value in zip(info.fields, values, strict=True):
            if value is None and field.kind == st.EXACT:
                raise invalid(f"table {info.name}: exact match field {field.name} is missing")
        return tuple(values)

    @staticmethod
    def _priority(info: TableInfo, msg: p4r.TableEntry) -> int:
        if info.needs_priority:
            if msg.priority <= 0:
                raise invalid(f"table {info.name}: entries need a priority > 0 (ternary/range/optional key)")
        elif msg.priority != 0:
            raise invalid(f"table {info.name}: priority must be 0 for a table without ternary/range/optional")
        return msg.priority

    def _parse_action(self, info: TableInfo, msg: p4r.TableAction, default: bool) -> st.ActionCall:
        which = msg.WhichOneof("type")
        if which is None:
            raise invalid(f"table {info.name}: action is empty")
        if which != "action":
            raise unimplemented(f"table {info.name}: action profiles are not supported")
        action_id = msg.action.action_id
        scope = info.action_scopes.get(action_id)
        if scope is None:
            raise invalid(f"table {info.name}: action id {action_id} is not an action of this table")
        action = self.schema.actions[action_id]
        if default and scope == TABLE_ONLY:
            raise invalid(f"table {info.name}: action {action.name} cannot be a default action")
        if not default and scope == DEFAULT_ONLY:
            raise invalid(f"table {info.name}: action {action.name} is default-only")
        return st.ActionCall(action_id, self._parse_params(action, msg.action.params))

    def _parse_params(self, action: ActionInfo, params: list[p4r.Action.Param]) -> tuple[int, ...]:
        positions = action.param_ids()
        args: list[int | None] = [None] * len(action.params)
        for param in params:
            index = positions.get(param.param_id)
            if index is None:
                raise invalid(f"action {action.name}: unknown param id {param.param_id}")
            if args[index] is not None:
                raise invalid(f"action {action.name}: param id {param.param_id} given twice")
            spec = action.params[index]
            args[index] = self.decode(param.value, spec.width, f"action {action.name} param {spec.name}")
        if len(params) != len(action.params):
            raise invalid(f"action {action.name}: expected {len(action.params)} params, got {len(params)}")
        return tuple(a for a in args if a is not None)

    # ------------------------------------------------------------------- PRE
    def _write_pre(self, kind: int, msg: p4r.PacketReplicationEngineEntry) -> None:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            group = msg.multicast_group_entry
            if group.metadata:
                raise unimplemented("multicast group metadata is not supported")
            _write_replication(
                self.state.pre.groups, "multicast group", group.multicast_group_id, group.replicas, kind
            )
        elif which == "clone_session_entry":
            session = msg.clone_session_entry
            if session.class_of_service or session.packet_length_bytes:
                raise unimplemented("clone sessions support neither class_of_service nor truncation")
            _write_replication(
                self.state.pre.clone_sessions, "clone session", session.session_id, session.replicas, kind
            )
        else:
            raise invalid("packet replication engine entry is empty")

    # -------------------------------------------------------------- counters
    def _write_counter(self, kind: int, msg: p4r.CounterEntry) -> None:
        counter = self._counter(msg.counter_id)
        if self.conformance.bmv2 and not msg.HasField("index"):
            raise unimplemented(COUNTER_WILDCARD_WRITE)
        if kind != MODIFY:
            raise invalid("counter entries can only be modified")
        packets, octets = _counts(msg.data)
        for index in self._indices(counter.name, counter.size, msg):
            counter.packets[index] = packets
            counter.bytes[index] = octets

    def _counter(self, counter_id: int) -> st.Counter:
        if counter_id not in self.schema.counters:
            raise unknown_id("counter", counter_id, self.conformance)
        return self.state.counters[counter_id]

    @staticmethod
    def _indices(name: str, size: int, msg: p4r.CounterEntry | p4r.RegisterEntry) -> range:
        """The indices an entry addresses: all when its index is unset."""
        if not msg.HasField("index"):
            return range(size)
        index = msg.index.index
        if index < 0:
            raise invalid(f"{name}: A negative number is not a valid index value")
        if index >= size:
            raise out_of_range(f"{name}: index {index} is outside 0..{size - 1}")
        return range(index, index + 1)

    def _write_direct_counter(self, kind: int, msg: p4r.DirectCounterEntry) -> None:
        if not msg.HasField("table_entry"):
            raise invalid(NO_DIRECT_COUNTER_TABLE)
        if kind != MODIFY:
            raise invalid("direct counter entries can only be modified")
        info, table = self._table(msg.table_entry.table_id)
        if not info.direct_counter_id:
            raise invalid(f"table {info.name} has no direct counter")
        packets, octets = _counts(msg.data)
        if msg.table_entry.is_default_action:
            table.default_packets, table.default_bytes = packets, octets
            return
        entry = self._find(info, table, msg.table_entry)
        entry.packets, entry.bytes = packets, octets

    def _find(self, info: TableInfo, table: st.Table, msg: p4r.TableEntry) -> st.Entry:
        entry = table.find(self.parse_match(info, msg), self._priority(info, msg))
        if entry is None:
            raise not_found(f"table {info.name}: no such entry")
        return entry

    # ------------------------------------------------------------- registers
    def _write_register(self, kind: int, msg: p4r.RegisterEntry) -> None:
        if self.conformance.bmv2:
            raise unimplemented(REGISTER_WRITES)
        if kind != MODIFY:
            raise invalid("register entries can only be modified")
        register = self._register(msg.register_id)
        if msg.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {register.name}: data must be a bitstring")
        value = self.decode(msg.data.bitstring, register.width, f"register {register.name}")
        for index in self._indices(register.name, register.size, msg):
            register.values[index] = value

    def _register(self, register_id: int) -> st.Register:
        if register_id not in self.schema.registers:
            raise unknown_id("register", register_id, self.conformance)
        return self.state.registers[register_id]

    # ================================================================= reads
    def read(self, entity: p4r.Entity) -> Iterator[p4r.Entity]:
        """Every entity matching the (possibly wildcard) request entity."""
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            yield from self._read_table_entries(entity.table_entry)
        elif which == "packet_replication_engine_entry":
            yield from self._read_pre(entity.packet_replication_engine_entry)
        elif which == "counter_entry":
            yield from self._read_counters(entity.counter_entry)
        elif which == "direct_counter_entry":
            yield from self._read_direct_counters(entity.direct_counter_entry)
        elif which == "register_entry":
            yield from self._read_registers(entity.register_entry)
        elif which == "digest_entry":
            if self.conformance.bmv2 and entity.digest_entry.digest_id == 0:
                raise unimplemented(DIGEST_WILDCARD_READ)
            yield from (p4r.Entity(digest_entry=e) for e in self.digests.read(entity.digest_entry))
        elif which is None:
            raise invalid("read request entity is empty")
        elif which in _UNSUPPORTED and not _UNSUPPORTED[which][1](entity):
            return  # a wildcard read of a kind this target never holds: nothing to report
        else:
            raise self._unsupported(which, entity)

    def _read_table_entries(self, msg: p4r.TableEntry) -> Iterator[p4r.Entity]:
        with_counter = msg.HasField("counter_data")
        for info, table, entries in self._selected_entries(msg):
            if self.broken:
                raise unknown(TABLE_READ_FAILED)
            if entries is None:
                yield p4r.Entity(table_entry=self._default_entry(info, table, with_counter))
            else:
                for entry in entries:
                    yield p4r.Entity(table_entry=self._table_entry(info, entry, with_counter))

    def _selected_entries(
        self, msg: p4r.TableEntry
    ) -> Iterator[tuple[TableInfo, st.Table, list[st.Entry] | None]]:
        """Per table, the entries a read addresses (None: the default entry).

        A key nobody inserted addresses no entry: the read answers nothing, as PI does.
        """
        if msg.table_id == 0:
            if msg.match or msg.priority or msg.is_default_action or msg.HasField("action"):
                raise invalid("a read of all tables (table_id 0) cannot filter by match, priority or action")
            for table_id in sorted(self.schema.tables):
                info, table = self._table(table_id)
                yield info, table, list(table.entries())
            return
        info, table = self._table(msg.table_id)
        if msg.is_default_action:
            yield info, table, None
        elif msg.match:
            found = table.find(self.parse_match(info, msg), self._priority(info, msg))
            yield info, table, [] if found is None else [found]
        else:
            entries = list(table.entries())
            if msg.priority:
                entries = [e for e in entries if e.priority == msg.priority]
            yield info, table, entries

    def _table_entry(self, info: TableInfo, entry: st.Entry, with_counter: bool) -> p4r.TableEntry:
        out = p4r.TableEntry(
            table_id=info.id, priority=entry.priority, metadata=entry.metadata, is_const=entry.is_const
        )
        for field, value in zip(info.fields, entry.match, strict=True):
            if value is not None:
                out.match.append(_field_message(field.id, field.kind, value))
        out.action.action.CopyFrom(self._action_message(entry.action))
        if with_counter and info.direct_counter_id:
            out.counter_data.CopyFrom(p4r.CounterData(packet_count=entry.packets, byte_count=entry.bytes))
        return out

    def _default_entry(self, info: TableInfo, table: st.Table, with_counter: bool) -> p4r.TableEntry:
        out = p4r.TableEntry(table_id=info.id, is_default_action=True)
        out.action.action.CopyFrom(self._action_message(table.default_action))
        if with_counter and info.direct_counter_id:
            out.counter_data.CopyFrom(
                p4r.CounterData(packet_count=table.default_packets, byte_count=table.default_bytes)
            )
        return out

    def _action_message(self, call: st.ActionCall) -> p4r.Action:
        params = self.schema.actions[call.action_id].params
        pairs = zip(params, call.args, strict=True)
        out = [p4r.Action.Param(param_id=p.id, value=encode(v)) for p, v in pairs]
        return p4r.Action(action_id=call.action_id, params=out)

    def _read_pre(self, msg: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.Entity]:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            wanted = msg.multicast_group_entry.multicast_group_id
            for group_id, replicas in _addressed(self.state.pre.groups, wanted, NO_MULTICAST_GROUP):
                entry = p4r.MulticastGroupEntry(multicast_group_id=group_id, replicas=_replicas(replicas))
                yield p4r.Entity(
                    packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        multicast_group_entry=entry
                    )
                )
        elif which == "clone_session_entry":
            wanted = msg.clone_session_entry.session_id
            for session_id, replicas in _addressed(self.state.pre.clone_sessions, wanted, NO_CLONE_SESSION):
                session = p4r.CloneSessionEntry(session_id=session_id, replicas=_replicas(replicas))
                yield p4r.Entity(
                    packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        clone_session_entry=session
                    )
                )
        else:
            raise invalid("a replication engine read must name a multicast group or clone session entry")

    def _read_counters(self, msg: p4r.CounterEntry) -> Iterator[p4r.Entity]:
        ids = sorted(self.schema.counters) if msg.counter_id == 0 else [msg.counter_id]
        if msg.counter_id == 0 and msg.HasField("index"):
            raise invalid("a read of all counters (counter_id 0) cannot name an index")
        for counter_id in ids:
            counter = self._counter(counter_id)
            if self.broken:
                raise unknown(COUNTER_READ_FAILED)
            if self.conformance.bmv2 and msg.HasField("index") and msg.index.index >= counter.size:
                # PI answers with the entity it was filling in, then the target's failure.
                yield p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id, index=msg.index))
                raise unknown(COUNTER_READ_FAILED)
            for index in self._indices(counter.name, counter.size, msg):
                data = _counter_data(counter.unit, counter.packets[index], counter.bytes[index])
                yield p4r.Entity(
                    counter_entry=p4r.CounterEntry(
                        counter_id=counter_id, index=p4r.Index(index=index), data=data
                    )
                )

    def _read_direct_counters(self, msg: p4r.DirectCounterEntry) -> Iterator[p4r.Entity]:
        if not msg.HasField("table_entry"):
            raise invalid(NO_DIRECT_COUNTER_TABLE)
        request = msg.table_entry
        if request.table_id != 0 and not self._table(request.table_id)[0].direct_counter_id:
            raise invalid(f"table {self.schema.tables[request.table_id].name} has no direct counter")
        if self.broken:
            raise unknown(COUNTER_READ_FAILED)
        if request.table_id != 0 and request.match:  # one entry by key: it must exist (P4Runtime 9.5)
            info, table = self._table(request.table_id)
            selected: Iterator[tuple[TableInfo, st.Table, list[st.Entry] | None]] = iter(
                [(info, table, [self._find(info, table, request)])]
            )
        else:
            selected = self._selected_entries(request)
        for info, table, entries in selected:
            if not info.direct_counter_id:
                continue
            if entries is None:
                data = p4r.CounterData(packet_count=table.default_packets, byte_count=table.default_bytes)
                yield p4r.Entity(
                    direct_counter_entry=p4r.DirectCounterEntry(
                        table_entry=self._default_entry(info, table, False), data=data
                    )
                )
                continue
            for entry in entries:
                data = p4r.CounterData(packet_count=entry.packets, byte_count=entry.bytes)
                yield p4r.Entity(
                    direct_counter_entry=p4r.DirectCounterEntry(
                        table_entry=self._table_entry(info, entry, False), data=data
                    )
                )

    def _read_registers(self, msg: p4r.RegisterEntry) -> Iterator[p4r.Entity]:
        if self.conformance.bmv2:
            raise unimplemented(REGISTER_READS)
        ids = sorted(self.schema.registers) if msg.register_id == 0 else [msg.register_id]
        if msg.register_id == 0 and msg.HasField("index"):
            raise invalid("a read of all registers (register_id 0) cannot name an index")
        for register_id in ids:
            register = self._register(register_id)
            for index in self._indices(register.name, register.size, msg):
                yield p4r.Entity(
                    register_entry=p4r.RegisterEntry(
                        register_id=register_id,
                        index=p4r.Index(index=index),
                        data=p4d.P4Data(bitstring=encode(register.values[index])),
                    )
                )


# ===================================================================== helpers
def _counts(data: p4r.CounterData) -> tuple[int, int]:
    if data.packet_count < 0 or data.byte_count < 0:
        raise invalid("counter values cannot be negative")
    return data.packet_count, data.byte_count


def _counter_data(unit: str, packets: int, octets: int) -> p4r.CounterData:
    if unit == "packets":
        return p4r.CounterData(packet_count=packets)
    if unit == "bytes":
        return p4r.CounterData(byte_count=octets)
    return p4r.CounterData(packet_count=packets, byte_count=octets)


def _parse_field(info: TableInfo, field: Bits, fm: p4r.FieldMatch, decode: Decode) -> st.FieldMatch:
    """One match field, checked against the P4Runtime rules for its kind."""
    kind = fm.WhichOneof("field_match_type")
    what = f"table {info.name} field {field.name}"
    if kind != field.kind:
        raise invalid(f"{what}: expected a {field.kind} match, got {kind or 'nothing'}")
    width = field.width
    full = (1 << width) - 1
    if kind == st.EXACT:
        return decode(fm.exact.value, width, what)
    if kind == st.OPTIONAL:
        return decode(fm.optional.value, width, what)
    if kind == st.LPM:
        plen = fm.lpm.prefix_len
        if not 0 < plen <= width:
            raise invalid(f"{what}: prefix_len {plen} outside 1..{width} (omit the field to match all)")
        value = decode(fm.lpm.value, width, what)
        if value & (full >> plen):
            raise invalid(f"{what}: value has bits set beyond the prefix length {plen}")
        return (value, plen)
    if kind == st.TERNARY:
        value = decode(fm.ternary.value, width, what)
        mask = decode(fm.ternary.mask, width, f"{what} mask")
        if mask == 0:
            raise invalid(f"{what}: mask is 0 (omit the field to match all)")
        if value & ~mask:
            raise invalid(f"{what}: value has bits set outside the mask")
        return (value, mask)
    low = decode(fm.range.low, width, f"{what} low")
    high = decode(fm.range.high, width, f"{what} high")
    if low > high:
        raise invalid(f"{what}: range low > high")
    if low == 0 and high == full:
        raise invalid(f"{what}: range covers every value (omit the field to match all)")
    return (low, high)


def _field_message(field_id: int, kind: str, value: st.FieldMatch) -> p4r.FieldMatch:
    if kind == st.EXACT:
        return p4r.FieldMatch(field_id=field_id, exact=p4r.FieldMatch.Exact(value=encode(value)))  # type: ignore[arg-type]
    if kind == st.OPTIONAL:
        return p4r.FieldMatch(field_id=field_id, optional=p4r.FieldMatch.Optional(value=encode(value)))  # type: ignore[arg-type]
    a, b = value  # type: ignore[misc]
    if kind == st.LPM:
        return p4r.FieldMatch(field_id=field_id, lpm=p4r.FieldMatch.LPM(value=encode(a), prefix_len=b))
    if kind == st.TERNARY:
        ternary = p4r.FieldMatch.Ternary(value=encode(a), mask=encode(b))
        return p4r.FieldMatch(field_id=field_id, ternary=ternary)
    return p4r.FieldMatch(field_id=field_id, range=p4r.FieldMatch.Range(low=encode(a), high=encode(b)))


def _parse_replicas(what: str, replicas: list[p4r.Replica]) -> tuple[st.Replica, ...]:
    out: list[st.Replica] = []
    for replica in replicas:
        if replica.backup_replicas:
            raise unimplemented(f"{what}: backup replicas are not supported")
        port_bytes = 0
        if replica.WhichOneof("port_kind") == "port":
            port, port_bytes = decode(replica.port, MAX_PORT_WIDTH, f"{what} replica port"), len(replica.port)
        else:
            port = replica.egress_port
        if replica.instance > MAX_INSTANCE:
            raise out_of_range(f"{what}: replica instance {replica.instance} does not fit in bit<16>")
        item = st.Replica(port=port, rid=replica.instance, port_bytes=port_bytes)
        if item in out:
            raise invalid(f"{what}: duplicate replica (port {port}, instance {replica.instance})")
        out.append(item)
    return tuple(out)


_MISSING = {"multicast group": NO_MULTICAST_GROUP, "clone session": NO_CLONE_SESSION}


def _write_replication(
    table: dict[int, tuple[st.Replica, ...]], what: str, ident: int, replicas: list[p4r.Replica], kind: int
) -> None:
    label = f"{what} {ident}"
    if ident == 0:
        raise invalid(f"{what} id 0 is not valid")
    if ident > MAX_GROUP_ID:
        raise out_of_range(f"{label}: id does not fit in bit<16>")
    parsed = _parse_replicas(label, replicas)
    if kind == INSERT:
        if ident in table:
            raise already_exists(f"{label} already exists")
        table[ident] = parsed
    elif ident not in table:
        raise not_found(_MISSING[what])
    elif kind == MODIFY:
        table[ident] = parsed  # keeps its place in the table, as PI's does
    else:
        del table[ident]


def _addressed(
    table: dict[int, tuple[st.Replica, ...]], wanted: int, missing: str
) -> list[tuple[int, tuple[st.Replica, ...]]]:
    """What a read of id `wanted` (0: all) answers, in PI's order: the newest group first.

    PI keeps groups in a hash map whose iteration, for the small ids a
    program uses, is the reverse of insertion; an id nobody inserted is NOT_FOUND.
    """
    if not wanted:
        return list(reversed(table.items()))
    if wanted not in table:
        raise not_found(missing)
    return [(wanted, table[wanted])]


def _replicas(replicas: tuple[st.Replica, ...]) -> list[p4r.Replica]:
    """Replicas as PI reads them back: grouped by instance, the newest instance first, ports ascending.

    A port written as the `port` bytestring reads back as that bytestring (same
    length), one written as `egress_port` as `egress_port`.
    """
    instances: dict[int, list[st.Replica]] = {}
    for replica in replicas:
        instances.setdefault(replica.rid, []).append(replica)
    out = []
    for rid, ports in reversed(instances.items()):
        for r in sorted(ports, key=lambda r: (r.port_bytes > 0, r.port, r.port_bytes)):
            if r.port_bytes:
                out.append(p4r.Replica(port=r.port.to_bytes(r.port_bytes, "big"), instance=rid))
            else:
                out.append(p4r.Replica(egress_port=r.port, instance=rid))
    return out
