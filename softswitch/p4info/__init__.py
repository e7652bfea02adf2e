"""P4Info for a checked v1model program, as p4c writes it.

The controller resolves every id by name from the P4Info, and the same
controller drives bmv2 (P4Info from p4c) and the embedded switch (P4Info
from here), so this follows p4c's control-plane serializer
(control-plane/p4RuntimeSerializer.cpp, p4RuntimeArchStandard.*) after its
front end has run:

* what is listed: tables that are applied somewhere (not @hidden), with
  NoAction added as @defaultonly default when a table has no
  default_action; actions that a listed table references or a control's
  apply body calls (an action only called from other actions is inlined
  there and disappears); every counter, meter and register instance; a
  direct counter or meter only with the table that uses it; one
  controller_packet_metadata per @controller_header header; one digest per
  struct type T that a listed `digest<T>` call sends (named after T, its
  struct described in type_info);
* order: declaration order, block by block in the order p4c evaluates them
  (top-level instances, then the parser and the five controls in V1Switch
  order); within a control the top-level actions it uses come first, in
  order of first use, then its own actions;
* names, aliases and ids as p4c assigns them (softswitch.p4info.ids); match
  field names from tableKeyNames (`h.$valid$`, a field's @name); ids of match
  fields, params and metadata numbered from 1 unless @id says otherwise;
* annotations copied except @name, @id, @brief and @description (the latter
  two become `doc`), structured ones (`@x[...]`) as `structured_annotations`,
  the package instance's @pkginfo and @platform_property as `pkg_info`;
  `type_info` present exactly when p4c touches it (any table, action
  parameter, extern instance, extern call in a control or controller
  header), with the serializable enums the listed objects use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

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
_METER_UNITS = {"packets": p4i.MeterSpec.PACKETS, "bytes": p4i.MeterSpec.BYTES}
# Annotations p4c represents elsewhere in the P4Info instead of copying them.
_NOT_COPIED = {"name", "id", "brief", "description"}
DEFAULT_TABLE_SIZE = 1024


@dataclass
class _Listed:
    """The program's control-plane objects in p4c's order."""

    tables: list[ir.TableDecl] = field(default_factory=list)
    actions: list[ir.ActionDecl] = field(default_factory=list)
    instances: list[ir.InstanceDecl] = field(default_factory=list)
    direct: list[tuple[ir.InstanceDecl, ir.TableDecl]] = field(default_factory=list)
    headers: list[ir.HeaderDecl] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)  # struct names, in order of first call
    extern_calls: bool = False


def _explicit_id(annotations: tuple[ir.Annotation, ...]) -> int | None:
    for a in annotations:
        if a.name == "id":
            try:
                return int((a.value or a.body).strip(), 0)
            except ValueError:
                return None
    return None


def _annotate(message: Any, annotations: tuple[ir.Annotation, ...]) -> None:
    """The annotations p4c copies into `message`: as text, and structured ones (`@x[...]`; the checker
    keeps their values as a JSON list of [key or null, value] in the body) in structured_annotations."""
    for a in annotations:
        if a.name in _NOT_COPIED:
            continue
        if not a.body.startswith("["):
            message.annotations.append(f"@{a.name}({a.body})" if a.body else f"@{a.name}")
            continue
        out = message.structured_annotations.add(name=a.name)
        items = json.loads(a.body[1:-1])
        if items and items[0][0] is not None:
            for key, value in items:
                _expression(out.kv_pair_list.kv_pairs.add(key=key).value, value)
        else:
            out.expression_list.SetInParent()
            for _, value in items:
                _expression(out.expression_list.expressions.add(), value)


def _expression(message: p4i.Expression, value: int | bool | str) -> None:
    if isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, int):
        message.int64_value = value
    else:
        message.string_value = value


def _has(annotations: tuple[ir.Annotation, ...], name: str) -> bool:
    return any(a.name == name for a in annotations)


def _doc(
    message: p4i.Preamble | p4i.MatchField | p4i.Action.Param, annotations: tuple[ir.Annotation, ...]
) -> None:
    for a in annotations:
        if a.name in ("brief", "description") and a.value is not None:
            setattr(message.doc, a.name, a.value)


def _numbered(items: list[tuple[tuple[ir.Annotation, ...], object]]) -> Iterator[tuple[int, object]]:
    """p4c's FieldIdAllocator: @id first, the rest numbered from 1 skipping taken ids."""
    taken = {i for i in (_explicit_id(a) for a, _ in items) if i is not None}
    next_id = 1
    for notes, item in items:
        explicit = _explicit_id(notes)
        if explicit is not None:
            yield explicit, item
            continue
        while next_id in taken:
            next_id += 1
        taken.add(next_id)
        yield next_id, item


def _collect(program: ir.Program) -> _Listed:
    listed = _Listed()
    global_actions = {a.fq_name: a for a in program.actions}
    listed.instances += program.instances
    blocks = [program.block(b.param) for b in program.main.blocks]
    for block in blocks:
        if isinstance(block, ir.ParserDecl):
            listed.instances += block.instances
    seen_actions: set[str] = set()
    for block in blocks:
        if not isinstance(block, ir.ControlDecl):
            continue
        listed.instances += block.instances
        applied = {n.table for n in ir.walk(block.apply) if isinstance(n, ir.TableApply)}
        tables = [t for t in block.tables if t.fq_name in applied and not _has(t.annotations, "hidden")]
        own = {a.fq_name: a for a in block.actions}
        used: list[str] = []
        for table in tables:
            used += [r.action for r in table.actions] + [table.default_action.action]
            used += [e.action.action for e in table.entries]
        used += [n.action for n in ir.walk(block.apply) if isinstance(n, ir.ActionCall)]
        used_set = set(used)
        order = [a for a in dict.fromkeys(used) if a in global_actions]
        order += [a.fq_name for a in block.actions if a.fq_name in used_set]
        for name in order:
            decl = own.get(name) or global_actions[name]
            if name not in seen_actions and not _has(decl.annotations, "hidden"):
                seen_actions.add(name)
                listed.actions.append(decl)
        listed.tables += tables
        instances = {i.fq_name: i for i in (*program.instances, *block.instances)}
        for table in tables:
            for name in (table.direct_counter, table.direct_meter):
                if name is not None and name in instances:
                    listed.direct.append((instances[name], table))
        bodies = [a.body for a in (*program.actions, *block.actions) if a.fq_name in used_set]
        bodies.append(block.apply)
        calls = [n for b in bodies for n in ir.walk(b) if isinstance(n, ir.ExternFunctionCall)]
        listed.extern_calls |= bool(calls)
        for call in calls:
            if call.name == "digest" and isinstance(call.type_args[0], ir.StructType):
                if call.type_args[0].name not in listed.digests:
                    listed.digests.append(call.type_args[0].name)
    listed.headers = [h for h in program.headers if _has(h.annotations, "controller_header")]
    return listed


def build_p4info(program: ir.Program) -> p4i.P4Info:
    """The P4Info of `program`, object for object as p4c writes it."""
    listed = _collect(program)
    counters = [i for i in listed.instances if i.extern == "counter"]
    meters = [i for i in listed.instances if i.extern == "meter"]
    registers = [i for i in listed.instances if i.extern == "register"]
    direct_counters = [(i, t) for i, t in listed.direct if i.extern == "direct_counter"]
    direct_meters = [(i, t) for i, t in listed.direct if i.extern == "direct_meter"]
    enums = {e.name: e for e in program.enums}

    symbols = [(p4ids.TABLE, t.fq_name, _explicit_id(t.annotations)) for t in listed.tables]
    symbols += [(p4ids.ACTION, a.fq_name, _explicit_id(a.annotations)) for a in listed.actions]
    symbols += [(p4ids.COUNTER, c.fq_name, _explicit_id(c.annotations)) for c in counters]
    symbols += [(p4ids.DIRECT_COUNTER, c.fq_name, _explicit_id(c.annotations)) for c, _ in direct_counters]
    symbols += [(p4ids.METER, m.fq_name, _explicit_id(m.annotations)) for m in meters]
    symbols += [(p4ids.DIRECT_METER, m.fq_name, _explicit_id(m.annotations)) for m, _ in direct_meters]
    symbols += [(p4ids.REGISTER, r.fq_name, _explicit_id(r.annotations)) for r in registers]
    symbols += [
        (p4ids.CONTROLLER_HEADER, _controller_name(h), _explicit_id(h.annotations)) for h in listed.headers
    ]
    symbols += [(p4ids.DIGEST, name, None) for name in listed.digests]
    ids = p4ids.assign_ids(symbols)
    alias = p4ids.aliases(name for _, name, _ in symbols)

    def preamble(
        message: p4i.Preamble, prefix: int, name: str, annotations: tuple[ir.Annotation, ...]
    ) -> None:
        message.id = ids[(prefix, name)]
        message.name = name
        message.alias = alias[name] if prefix != p4ids.CONTROLLER_HEADER else name
        _annotate(message, annotations)
        _doc(message, annotations)

    info = p4i.P4Info()
    info.pkg_info.arch = program.arch
    for a in program.main.annotations:  # @pkginfo, @platform_property (the checker keeps their pairs)
        pairs = json.loads(a.body[1:-1])
        target = info.pkg_info if a.name == "pkginfo" else info.pkg_info.platform_properties
        for key, value in pairs:
            if key in target.DESCRIPTOR.fields_by_name and key != "arch":
                setattr(target, key, value)
    used_enums: list[str] = []

    def note_type(t: ir.Type) -> None:
        if isinstance(t, ir.EnumType) and t.underlying is not None and t.name not in used_enums:
            used_enums.append(t.name)

    actions = {a.fq_name: a for a in listed.actions}
    for table in listed.tables:
        out = info.tables.add()
        preamble(out.preamble, p4ids.TABLE, table.fq_name, table.annotations)
        keys = [(k.annotations, k) for k in table.keys if k.match_kind != "selector"]
        for number, key in _numbered(keys):  # type: ignore[assignment]
            assert isinstance(key, ir.TableKey)
            note_type(key.expr.type)
            mf = out.match_fields.add(id=number, name=key.name, bitwidth=ir.width_of(key.expr.type))
            if key.match_kind in _MATCH_TYPES:
                mf.match_type = _MATCH_TYPES[key.match_kind]
            else:
                mf.other_match_type = key.match_kind
            _annotate(mf, key.annotations)
            _doc(mf, key.annotations)
        for ref in table.actions:
            out_ref = out.action_refs.add(id=ids[(p4ids.ACTION, ref.action)], scope=_SCOPES[ref.scope])
            _annotate(out_ref, ref.annotations)
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
            param_id = _explicit_id(param.annotations) or number
            call.arguments.add(param_id=param_id, value=value.to_bytes(max(1, (width + 7) // 8), "big"))
        for name, prefix in (
            (table.direct_counter, p4ids.DIRECT_COUNTER),
            (table.direct_meter, p4ids.DIRECT_METER),
        ):
            if name is not None and (prefix, name) in ids:
                out.direct_resource_ids.append(ids[(prefix, name)])
        out.size = table.size if table.size else DEFAULT_TABLE_SIZE
        if table.support_timeout:
            out.idle_timeout_behavior = p4i.Table.NOTIFY_CONTROL
        if table.entries_const:
            out.is_const_table = True
        if table.entries:
            out.has_initial_entries = True

    for decl in listed.actions:
        out_action = info.actions.add()
        preamble(out_action.preamble, p4ids.ACTION, decl.fq_name, decl.annotations)
        directionless = [(p.annotations, p) for p in decl.params if not p.direction]
        for number, param in _numbered(directionless):  # type: ignore[assignment]
            assert isinstance(param, ir.Param)
            note_type(param.type)
            out_param = out_action.params.add(
                id=number, name=_field_name(param), bitwidth=ir.width_of(param.type)
            )
            _annotate(out_param, param.annotations)
            _doc(out_param, param.annotations)

    for counter in counters:
        out_counter = info.counters.add()
        preamble(out_counter.preamble, p4ids.COUNTER, counter.fq_name, counter.annotations)
        out_counter.spec.unit = _unit(counter.args[1], _COUNTER_UNITS)
        out_counter.size = _int_arg(counter.args[0])

    for counter, table in direct_counters:
        out_direct = info.direct_counters.add()
        preamble(out_direct.preamble, p4ids.DIRECT_COUNTER, counter.fq_name, counter.annotations)
        out_direct.spec.unit = _unit(counter.args[0], _COUNTER_UNITS)
        out_direct.direct_table_id = ids[(p4ids.TABLE, table.fq_name)]

    for meter in meters:
        out_meter = info.meters.add()
        preamble(out_meter.preamble, p4ids.METER, meter.fq_name, meter.annotations)
        out_meter.spec.unit = _unit(meter.args[1], _METER_UNITS)
        out_meter.size = _int_arg(meter.args[0])

    for meter, table in direct_meters:
        out_dm = info.direct_meters.add()
        preamble(out_dm.preamble, p4ids.DIRECT_METER, meter.fq_name, meter.annotations)
        out_dm.spec.unit = _unit(meter.args[0], _METER_UNITS)
        out_dm.direct_table_id = ids[(p4ids.TABLE, table.fq_name)]

    for header in listed.headers:
        out_header = info.controller_packet_metadata.add()
        preamble(out_header.preamble, p4ids.CONTROLLER_HEADER, _controller_name(header), header.annotations)
        for number, f in _numbered([(f.annotations, f) for f in header.fields]):  # type: ignore[assignment]
            assert isinstance(f, ir.Field)
            note_type(f.type)
            md = out_header.metadata.add(id=number, name=_field_name(f), bitwidth=ir.width_of(f.type))
            _annotate(md, f.annotations)

    for register in registers:
        out_register = info.registers.add()
        preamble(out_register.preamble, p4ids.REGISTER, register.fq_name, register.annotations)
        element = register.type_args[0]
        bitstring = out_register.type_spec.bitstring
        if isinstance(element, ir.BitType):
            (bitstring.int if element.signed else bitstring.bit).bitwidth = element.width
        out_register.size = _int_arg(register.args[0])

    for name in listed.digests:
        out_digest = info.digests.add()
        preamble(out_digest.preamble, p4ids.DIGEST, name, ())
        out_digest.type_spec.struct.name = name
        members = info.type_info.structs[name].members
        for f in program.struct(name).fields:
            assert isinstance(f.type, ir.BitType)  # the front end refuses other digest members
            bitstring = members.add(name=f.name).type_spec.bitstring
            (bitstring.int if f.type.signed else bitstring.bit).bitwidth = f.type.width

    if (
        listed.tables
        or listed.instances
        or listed.headers
        or listed.extern_calls
        or any(p for a in listed.actions for p in a.params if not p.direction)
    ):
        info.type_info.SetInParent()
    for name in used_enums:
        decl = enums[name]
        assert decl.underlying is not None
        spec = info.type_info.serializable_enums[name]
        spec.underlying_type.bitwidth = decl.underlying.width
        for member, value in decl.members:
            width = decl.underlying.width
            spec.members.add(name=member, value=int(value or 0).to_bytes(max(1, (width + 7) // 8), "big"))
    return info


def _controller_name(header: ir.HeaderDecl) -> str:
    for a in header.annotations:
        if a.name == "controller_header" and a.value is not None:
            return a.value
    return header.name


def _field_name(item: ir.Param | ir.Field) -> str:
    for a in item.annotations:
        if a.name == "name" and a.value is not None:
            return a.value
    return item.name


def _int_arg(expr: ir.Expr) -> int:
    if isinstance(expr, ir.Const):
        return int(expr.value)
    if isinstance(expr, ir.EnumValue) and expr.value is not None:
        return expr.value
    raise ValueError(f"expected a constant at {getattr(expr, 'pos', None)}")


def _unit(expr: ir.Expr, units: dict[str, int]) -> int:
    if isinstance(expr, ir.EnumValue) and expr.member in units:
        return units[expr.member]
    return 0  # UNSPECIFIED, as p4c for a unit it does not know


TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"


def digest_member_widths(info: p4i.P4Info, digest: p4i.Digest) -> tuple[int, ...]:
    """The widths of a digest's struct members; LookupError when the struct is not in type_info,
    TypeError when the digest is not a struct of bit<W>/int<W> (what P4Runtime servers deliver)."""
    if digest.type_spec.WhichOneof("type_spec") != "struct":
        raise TypeError(f"digest {digest.preamble.name}: only a struct of bit<W>/int<W> is supported")
    name = digest.type_spec.struct.name
    if name not in info.type_info.structs:
        raise LookupError(f"Struct name '{name}' name not found in P4TypeInfo struct map")
    widths = []
    for member in info.type_info.structs[name].members:
        bitstring = member.type_spec.bitstring
        kind = bitstring.WhichOneof("type_spec") if member.type_spec.HasField("bitstring") else None
        if kind not in ("bit", "int"):
            raise TypeError("Struct can only include bistring members for digests")
        widths.append(getattr(bitstring, kind).bitwidth)
    return tuple(widths)


def to_text(info: p4i.P4Info) -> str:
    """Text format as p4c writes `--p4runtime-files X.p4info.txtpb`."""
    return TEXT_HEADER + text_format.MessageToString(info)


def from_text(text: str) -> p4i.P4Info:
    return text_format.Parse(text, p4i.P4Info())
