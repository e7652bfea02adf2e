"""The v1model pipeline of the embedded switch: a compiled program plus its runtime state.

`Pipeline.process` runs one frame through parser → verify checksum →
ingress → traffic manager → egress (per copy) → compute checksum → deparser,
with bmv2's standard_metadata semantics:

* `egress_spec` 511 (what `mark_to_drop` writes) drops; `mark_to_drop` also
  clears `mcast_grp`;
* a non-zero `mcast_grp` replicates to the group's (port, rid) replicas and
  wins over `egress_spec`; replicas carry `instance_type` 5 (replication),
  `egress_rid` and their own copy of every header and metadata field;
* an ingress that leaves `egress_spec` at 0 sends to port 0, as bmv2 does;
* a parser error (frame too short for an `extract`, a failed `verify`, no
  matching `select` case) stops parsing and sets `parser_error`; the packet
  still goes through ingress, which decides;
* the payload after the last parsed header is carried through untouched.

The per-packet work is in the functions `softswitch.backends.python.codegen` generates.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.python.codegen import DROP_PORT, Compiler, UnsupportedError
from softswitch.runtime import state as st
from softswitch.runtime.build import build_state

INSTANCE_TYPE_REPLICATION = 5

__all__ = ["Pipeline", "UnsupportedError"]


class Pipeline:
    """A loaded program; `state` is what the P4Runtime server reads and writes."""

    def __init__(self, program: ir.Program, p4info: p4i.P4Info, state: st.RuntimeState | None = None) -> None:
        if program.arch != "v1model":
            raise UnsupportedError(
                f"architecture {program.arch!r}: the embedded switch runs v1model programs"
            )
        self.program = program
        self.p4info = p4info
        self.state = state if state is not None else _initial_state(program, p4info)
        compiler = Compiler(program, p4info, self.state)
        namespace = compiler.compile()
        self.source: str = namespace["__source__"]
        layout = compiler.layout
        self._template = list(layout.initial)
        std = {
            path[1]: index for path, (index, _t) in layout.scalars.items() if path[0] == "standard_metadata"
        }
        self._ingress_port = std["ingress_port"]
        self._egress_spec = std["egress_spec"]
        self._egress_port = std["egress_port"]
        self._egress_rid = std["egress_rid"]
        self._mcast_grp = std["mcast_grp"]
        self._instance_type = std["instance_type"]
        self._packet_length = std["packet_length"]
        self._parse = namespace["parse"]
        self._verify = namespace["verify_checksum"]
        self._ingress = namespace["ingress"]
        self._egress = namespace["egress"]
        self._compute = namespace["compute_checksum"]
        self._deparse = namespace["deparse"]

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames out as (egress port, bytes), in emission order; [] when dropped or consumed."""
        vector = self._template.copy()
        length = len(frame)
        vector[self._ingress_port] = ingress_port
        vector[self._packet_length] = length
        payload_at = self._parse(vector, frame, length)
        self._verify(vector, length)
        self._ingress(vector, length)
        payload = frame[payload_at:]
        group = vector[self._mcast_grp]
        if group:
            copies = []
            for replica in self.state.pre.replicas(group):
                copy = vector.copy()
                copy[self._egress_port] = replica.port
                copy[self._egress_spec] = replica.port
                copy[self._egress_rid] = replica.rid
                copy[self._instance_type] = INSTANCE_TYPE_REPLICATION
                copies.append(copy)
        elif vector[self._egress_spec] == DROP_PORT:
            return []
        else:
            vector[self._egress_port] = vector[self._egress_spec]
            copies = [vector]
        out: list[tuple[int, bytes]] = []
        egress, compute, deparse, drop_at = self._egress, self._compute, self._deparse, self._egress_spec
        for copy in copies:
            egress(copy, length)
            if copy[drop_at] == DROP_PORT:
                continue
            compute(copy, length)
            parts: list[bytes] = []
            deparse(copy, parts)
            parts.append(payload)
            out.append((copy[self._egress_port], b"".join(parts)))
        return out


def _initial_state(program: ir.Program, info: p4i.P4Info) -> st.RuntimeState:
    """Runtime state with the program's default actions and const entries resolved to P4Info ids."""
    action_ids = {a.preamble.name: a.preamble.id for a in info.actions}
    table_ids = {t.preamble.name: t.preamble.id for t in info.tables}
    defaults: dict[int, st.ActionCall] = {}
    const_entries: dict[int, list[st.Entry]] = {}
    for control in program.controls:
        for table in control.tables:
            if table.fq_name not in table_ids:  # never applied: p4c drops it, nothing looks it up
                continue
            table_id = table_ids[table.fq_name]
            default = table.default_action
            defaults[table_id] = st.ActionCall(action_ids[default.action], _const_args(default.args))
            entries = []
            for entry in table.entries:
                match = tuple(
                    _keyset(k, key.match_kind, ir.width_of(key.expr.type))
                    for k, key in zip(entry.keysets, table.keys)
                )
                needs_priority = any(
                    key.match_kind in (st.TERNARY, st.RANGE, st.OPTIONAL) for key in table.keys
                )
                # P4_16: without @priority, earlier const entries win; P4Runtime: higher wins.
                priority = entry.priority or (len(table.entries) - len(entries)) if needs_priority else 0
                action = st.ActionCall(action_ids[entry.action.action], _const_args(entry.action.args))
                entries.append(st.Entry(match, priority, action))
            if entries:
                const_entries[table_id] = entries
    return build_state(info, defaults, const_entries)


def _const_args(args: tuple[ir.Expr, ...]) -> tuple[int, ...]:
    values = []
    for arg in args:
        if not isinstance(arg, ir.Const):
            raise UnsupportedError(f"non-constant action argument at {getattr(arg, 'pos', None)}")
        width = ir.width_of(arg.type) if isinstance(arg.type, ir.BitType | ir.BoolType) else None
        values.append(int(arg.value) & ((1 << width) - 1) if width else int(arg.value))
    return tuple(values)


def _keyset(keyset: ir.Keyset, kind: str, width: int) -> st.FieldMatch:
    full = (1 << width) - 1
    if isinstance(keyset, ir.KeysetDefault):
        return None
    if isinstance(keyset, ir.KeysetValue):
        value = keyset.value & full
        if kind == st.LPM:
            return (value, width)
        if kind == st.TERNARY:
            return (value, full)
        if kind == st.RANGE:
            return (value, value)
        return value
    if isinstance(keyset, ir.KeysetMask):
        if kind == st.LPM:
            prefix = bin(keyset.mask & full).count("1")
            return (keyset.value & keyset.mask & full, prefix) if prefix else None
        return (keyset.value & keyset.mask & full, keyset.mask & full) if keyset.mask & full else None
    return (keyset.lo, keyset.hi)
