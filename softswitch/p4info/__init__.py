"""P4Info for a checked v1model program, as p4c writes it.

The controller resolves every id by name from the P4Info, and the same
controller drives bmv2 (P4Info from p4c) and the embedded switch (P4Info
from here), so this must follow p4c: fully qualified names, p4c's aliases
and id scheme (softswitch.p4info.ids), match fields and action params numbered
from 1 in declaration order, action refs in the table's order with their
scopes, `initial_default_action`, sizes (1024 when unspecified), counters,
direct counters and registers of the v1model externs, and objects sorted
by id within each kind.
"""

from __future__ import annotations

from finsy.proto import p4i
from google.protobuf import text_format

from softswitch import ir
from softswitch.p4info import ids as p4ids

_MATCH_TYPES = {
    "exact": p4i.MatchField.EXACT,
    "lpm": p4i.MatchField.LPM,
    "ternary": p4i.MatchField.TERNARY,
    "range": p4i.MatchField.RANGE,
    "optional": p4i.MatchField.OPTIONAL,
}
_SCOPES = {
    "TABLE_AND_DEFAULT": p4i.ActionRef.TABLE_AND_DEFAULT,
    "TABLE_ONLY": p4i.ActionRef.TABLE_ONLY,
    "DEFAULT_ONLY": p4i.ActionRef.DEFAULT_ONLY,
}
_COUNTER_UNITS = {
    "packets": p4i.CounterSpec.PACKETS,
    "bytes": p4i.CounterSpec.BYTES,
    "packets_and_bytes": p4i.CounterSpec.BOTH,
}
# Annotations that shape the P4Info itself rather than being copied into it.
_STRUCTURAL = {"name", "id", "hidden", "defaultonly", "tableonly", "match"}
DEFAULT_TABLE_SIZE = 1024


def _explicit_id(annotations: tuple[ir.Annotation, ...]) -> int | None:
    for a in annotations:
        if a.name == "id":
            return int((a.value or a.body).strip(), 0)
    return None


def _copied(annotations: tuple[ir.Annotation, ...]) -> list[str]:
    return [
        f"@{a.name}({a.body})" if a.body else f"@{a.name}" for a in annotations if a.name not in _STRUCTURAL
    ]


def _int_arg(expr: ir.Expr) -> int:
    if isinstance(expr, ir.Const):
        return int(expr.value)
    raise ValueError(f"expected a constant constructor argument at {getattr(expr, 'pos', None)}")


def build_p4info(program: ir.Program) -> p4i.P4Info:
    """The P4Info of `program` (only objects the control plane can reach)."""
    actions = {a.fq_name: a for a in program.actions}
    tables: list[ir.TableDecl] = []
    instances: list[ir.InstanceDecl] = list(program.instances)
    for control in program.controls:
        actions.update({a.fq_name: a for a in control.actions})
        tables.extend(t for t in control.tables if not _hidden(t.annotations))
        instances.extend(control.instances)
    for parser in program.parsers:
        instances.extend(parser.instances)

    used_actions: list[str] = []
    for table in tables:
        for ref in table.actions:
            if ref.action not in used_actions:
                used_actions.append(ref.action)
    counters = [i for i in instances if i.extern == "counter"]
    direct_counters = [i for i in instances if i.extern == "direct_counter"]
    registers = [i for i in instances if i.extern == "register"]

    symbols = [(p4ids.TABLE, t.fq_name, _explicit_id(t.annotations)) for t in tables]
    symbols += [(p4ids.ACTION, name, _explicit_id(actions[name].annotations)) for name in used_actions]
    symbols += [(p4ids.COUNTER, c.fq_name, _explicit_id(c.annotations)) for c in counters]
    symbols += [(p4ids.DIRECT_COUNTER, c.fq_name, _explicit_id(c.annotations)) for c in direct_counters]
    symbols += [(p4ids.REGISTER, r.fq_name, _explicit_id(r.annotations)) for r in registers]
    ids = p4ids.assign_ids(symbols)
    alias = p4ids.aliases(name for _, name, _ in symbols)

    def preamble(
        message: p4i.Preamble, prefix: int, name: str, annotations: tuple[ir.Annotation, ...]
    ) -> None:
        message.id = ids[(prefix, name)]
        message.name = name
        message.alias = alias[name]
        message.annotations.extend(_copied(annotations))

    info = p4i.P4Info()
    info.pkg_info.arch = program.arch
    direct_of = {t.direct_counter: t for t in tables if t.direct_counter}

    for table in sorted(tables, key=lambda t: ids[(p4ids.TABLE, t.fq_name)]):
        out = info.tables.add()
        preamble(out.preamble, p4ids.TABLE, table.fq_name, table.annotations)
        for number, key in enumerate(table.keys, start=1):
            field = out.match_fields.add(id=number, name=key.name, bitwidth=ir.width_of(key.expr.type))
            if key.match_kind in _MATCH_TYPES:
                field.match_type = _MATCH_TYPES[key.match_kind]
            else:
                field.other_match_type = key.match_kind
            field.annotations.extend(_copied(key.annotations))
        for ref in table.actions:
            out_ref = out.action_refs.add(id=ids[(p4ids.ACTION, ref.action)], scope=_SCOPES[ref.scope])
            out_ref.annotations.extend(
                f"@{a.name}" for a in ref.annotations if a.name in ("defaultonly", "tableonly")
            )
        default = table.default_action
        default_id = ids[(p4ids.ACTION, default.action)]
        if table.default_action_const:
            out.const_default_action_id = default_id
        call = out.initial_default_action
        call.action_id = default_id
        params = [p for p in actions[default.action].params if not p.direction]
        for number, (param, arg) in enumerate(zip(params, default.args), start=1):
            width = ir.width_of(param.type)
            value = _int_arg(arg) & ((1 << width) - 1)
            call.arguments.add(param_id=number, value=value.to_bytes(max(1, (width + 7) // 8), "big"))
        if table.direct_counter:
            out.direct_resource_ids.append(ids[(p4ids.DIRECT_COUNTER, table.direct_counter)])
        out.size = table.size if table.size is not None else DEFAULT_TABLE_SIZE
        if table.entries:
            out.has_initial_entries = True
            out.is_const_table = table.entries_const

    for name in sorted(used_actions, key=lambda n: ids[(p4ids.ACTION, n)]):
        decl = actions[name]
        out_action = info.actions.add()
        preamble(out_action.preamble, p4ids.ACTION, name, decl.annotations)
        for number, param in enumerate((p for p in decl.params if not p.direction), start=1):
            out_param = out_action.params.add(id=number, name=param.name, bitwidth=ir.width_of(param.type))
            out_param.annotations.extend(_copied(param.annotations))

    for counter in sorted(counters, key=lambda c: ids[(p4ids.COUNTER, c.fq_name)]):
        out_counter = info.counters.add()
        preamble(out_counter.preamble, p4ids.COUNTER, counter.fq_name, counter.annotations)
        out_counter.spec.unit = _counter_unit(counter.args[1])
        out_counter.size = _int_arg(counter.args[0])

    for counter in sorted(direct_counters, key=lambda c: ids[(p4ids.DIRECT_COUNTER, c.fq_name)]):
        out_direct = info.direct_counters.add()
        preamble(out_direct.preamble, p4ids.DIRECT_COUNTER, counter.fq_name, counter.annotations)
        out_direct.spec.unit = _counter_unit(counter.args[0])
        owner = direct_of.get(counter.fq_name)
        if owner is not None:
            out_direct.direct_table_id = ids[(p4ids.TABLE, owner.fq_name)]

    for register in sorted(registers, key=lambda r: ids[(p4ids.REGISTER, r.fq_name)]):
        out_register = info.registers.add()
        preamble(out_register.preamble, p4ids.REGISTER, register.fq_name, register.annotations)
        element = register.type_args[0]
        if not isinstance(element, ir.BitType):
            raise ValueError(f"register {register.fq_name}: only bit<W>/int<W> elements are supported")
        bitstring = out_register.type_spec.bitstring
        (bitstring.int if element.signed else bitstring.bit).bitwidth = element.width
        out_register.size = _int_arg(register.args[0])

    info.type_info.SetInParent()
    return info


def _hidden(annotations: tuple[ir.Annotation, ...]) -> bool:
    return any(a.name == "hidden" for a in annotations)


def _counter_unit(expr: ir.Expr) -> int:
    if isinstance(expr, ir.EnumValue) and expr.member in _COUNTER_UNITS:
        return _COUNTER_UNITS[expr.member]
    raise ValueError(f"expected a CounterType at {getattr(expr, 'pos', None)}")


TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"


def to_text(info: p4i.P4Info) -> str:
    """Text format as p4c writes `--p4runtime-files X.p4info.txtpb`."""
    return TEXT_HEADER + text_format.MessageToString(info)


def from_text(text: str) -> p4i.P4Info:
    return text_format.Parse(text, p4i.P4Info())
