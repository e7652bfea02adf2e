"""The P4Info as the server needs it: objects indexed by id, with widths.

The P4Runtime server validates every request against the P4Info the client
pushed (ids, match kinds, action scopes, parameter widths) before touching
the runtime state, so that a malformed request is refused with the status
code the specification prescribes instead of failing deep in the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finsy.proto import p4i

from softswitch.p4runtime.errors import invalid
from softswitch.runtime import state as st

_MATCH_KINDS = {
    p4i.MatchField.EXACT: st.EXACT,
    p4i.MatchField.LPM: st.LPM,
    p4i.MatchField.TERNARY: st.TERNARY,
    p4i.MatchField.RANGE: st.RANGE,
    p4i.MatchField.OPTIONAL: st.OPTIONAL,
}

TABLE_AND_DEFAULT = p4i.ActionRef.TABLE_AND_DEFAULT
TABLE_ONLY = p4i.ActionRef.TABLE_ONLY
DEFAULT_ONLY = p4i.ActionRef.DEFAULT_ONLY


@dataclass(frozen=True, slots=True)
class Bits:
    """A named, numbered bit<width> item: match field, action or metadata param."""

    id: int
    name: str
    width: int
    kind: str = st.EXACT


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[Bits, ...]

    def param_ids(self) -> dict[int, int]:
        """param id -> position in the action's argument tuple."""
        return {p.id: i for i, p in enumerate(self.params)}


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    fields: tuple[Bits, ...]
    action_scopes: dict[int, int]
    const_default_action_id: int
    direct_counter_id: int
    is_const: bool
    has_implementation: bool
    size: int

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in (st.TERNARY, st.RANGE, st.OPTIONAL) for f in self.fields)


@dataclass(slots=True)
class Schema:
    """Every P4Info object the server supports, by id."""

    tables: dict[int, TableInfo] = field(default_factory=dict)
    actions: dict[int, ActionInfo] = field(default_factory=dict)
    counters: dict[int, str] = field(default_factory=dict)
    direct_counters: dict[int, int] = field(default_factory=dict)  # id -> table id
    registers: dict[int, str] = field(default_factory=dict)
    meters: dict[int, str] = field(default_factory=dict)
    # Objects the target has no support for, known only so that an unknown id is told from an unsupported one.
    action_profiles: dict[int, str] = field(default_factory=dict)
    value_sets: dict[int, str] = field(default_factory=dict)
    packet_in: tuple[Bits, ...] = ()
    packet_out: tuple[Bits, ...] = ()

    @classmethod
    def from_p4info(cls, info: p4i.P4Info) -> Schema:
        schema = cls()
        for action in info.actions:
            params = tuple(Bits(p.id, p.name, p.bitwidth) for p in action.params)
            schema.actions[action.preamble.id] = ActionInfo(action.preamble.id, action.preamble.name, params)
        direct_counter_of = {dc.direct_table_id: dc.preamble.id for dc in info.direct_counters}
        for table in info.tables:
            name = table.preamble.name
            fields = []
            for mf in table.match_fields:
                kind = _MATCH_KINDS.get(mf.match_type)
                if kind is None:
                    raise invalid(f"table {name}: match field {mf.name} has an unsupported match kind")
                fields.append(Bits(mf.id, mf.name, mf.bitwidth, kind))
            for ref in table.action_refs:
                if ref.id not in schema.actions:
                    raise invalid(f"table {name}: references unknown action id {ref.id}")
            schema.tables[table.preamble.id] = TableInfo(
                id=table.preamble.id,
                name=name,
                fields=tuple(fields),
                action_scopes={ref.id: ref.scope for ref in table.action_refs},
                const_default_action_id=table.const_default_action_id,
                direct_counter_id=direct_counter_of.get(table.preamble.id, 0),
                is_const=table.is_const_table,
                has_implementation=table.implementation_id != 0,
                size=table.size,
            )
        schema.counters = {c.preamble.id: c.preamble.name for c in info.counters}
        schema.direct_counters = {dc.preamble.id: dc.direct_table_id for dc in info.direct_counters}
        schema.registers = {r.preamble.id: r.preamble.name for r in info.registers}
        schema.meters = {m.preamble.id: m.preamble.name for m in info.meters}
        schema.action_profiles = {a.preamble.id: a.preamble.name for a in info.action_profiles}
        schema.value_sets = {v.preamble.id: v.preamble.name for v in info.value_sets}
        for header in info.controller_packet_metadata:
            bits = tuple(Bits(m.id, m.name, m.bitwidth) for m in header.metadata)
            if header.preamble.name == "packet_in":
                schema.packet_in = bits
            elif header.preamble.name == "packet_out":
                schema.packet_out = bits
        return schema

    def check_state(self, state: st.RuntimeState) -> None:
        """Refuse a pipeline whose runtime state does not follow this P4Info.

        The server maps match fields by P4Info position onto the state's
        key tuple, so the two must agree field by field.
        """
        for table_id, table in self.tables.items():
            runtime = state.tables.get(table_id)
            if runtime is None:
                raise invalid(f"table {table.name} (id {table_id}) is in the P4Info but not in the program")
            layout = [(k.kind, k.width) for k in runtime.keys]
            if layout != [(f.kind, f.width) for f in table.fields]:
                raise invalid(f"table {table.name}: the program's key differs from the P4Info's match fields")
        for ids, objects, what in (
            (self.counters, state.counters, "counter"),
            (self.registers, state.registers, "register"),
        ):
            for object_id, name in ids.items():
                if object_id not in objects:
                    raise invalid(f"{what} {name} (id {object_id}) is in the P4Info but not in the program")
