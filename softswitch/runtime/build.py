"""Build the runtime state of a program from its P4Info.

The P4Info decides the identity of every object (ids, key order, widths,
sizes), exactly as a P4Runtime client sees them; the program contributes
what the P4Info cannot say (initial default actions and their arguments,
const entries), which the executor passes in as already-resolved values.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch.runtime import state as st

_MATCH_KINDS = {
    p4i.MatchField.EXACT: st.EXACT,
    p4i.MatchField.LPM: st.LPM,
    p4i.MatchField.TERNARY: st.TERNARY,
    p4i.MatchField.RANGE: st.RANGE,
    p4i.MatchField.OPTIONAL: st.OPTIONAL,
}

_COUNTER_UNITS = {
    p4i.CounterSpec.BYTES: "bytes",
    p4i.CounterSpec.PACKETS: "packets",
    p4i.CounterSpec.BOTH: "both",
}


def build_state(
    info: p4i.P4Info,
    default_actions: dict[int, st.ActionCall],
    const_entries: dict[int, list[st.Entry]],
) -> st.RuntimeState:
    """A fresh RuntimeState: empty tables with their initial defaults, zeroed registers and counters.

    `default_actions` and `const_entries` are keyed by table id; a table with
    no default given falls back to NoAction's id when the P4Info has one.
    """
    state = st.RuntimeState()
    direct = {dc.direct_table_id for dc in info.direct_counters}
    no_action = next((a.preamble.id for a in info.actions if a.preamble.name == "NoAction"), 0)
    for table in info.tables:
        table_id = table.preamble.id
        keys = [
            st.KeyField(mf.name, _MATCH_KINDS.get(mf.match_type, st.EXACT), mf.bitwidth)
            for mf in table.match_fields
        ]
        default = default_actions.get(table_id, st.ActionCall(no_action))
        runtime = st.Table(
            table_id,
            table.preamble.name,
            keys,
            table.size or 1024,
            default,
            default_is_const=table.const_default_action_id != 0,
            has_direct_counter=table_id in direct,
        )
        for entry in const_entries.get(table_id, []):
            entry.is_const = True
            runtime.insert(entry)
        state.tables[table_id] = runtime
    for register in info.registers:
        width = register.type_spec.bitstring.bit.bitwidth or register.type_spec.bitstring.int.bitwidth
        state.registers[register.preamble.id] = st.Register(
            register.preamble.id, register.preamble.name, width, register.size
        )
    for counter in info.counters:
        state.counters[counter.preamble.id] = st.Counter(
            counter.preamble.id,
            counter.preamble.name,
            _COUNTER_UNITS.get(counter.spec.unit, "both"),
            counter.size,
        )
    return state


