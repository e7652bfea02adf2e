"""p4c's bmv2 back-end refusals other than the table graph's (bmv2_cfg), on the checked IR.

Each check is one that p4c-bm2-ss (backends/bmv2/common, backends/bmv2/simple_switch and the mid-end
passes its mid end runs) makes and that a program inside the embedded subset can fail; the checks the
front end already makes for every target are not repeated. docs/softswitch.md, *Checking for bmv2*,
lists each with p4c's source place. Messages are p4c's, less its leading print of the IR node, which
our diagnostics give as the position and the source line instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from softswitch import ir
from softswitch.frontend.diagnostics import Diagnostic

MAX_SHIFT_WIDTH = 8  # lower.cpp: the amount's type, not its value
MAX_SHIFT_CONSTANT = 256
MATCH_KINDS = frozenset({"exact", "ternary", "lpm", "range", "optional", "selector"})
CHECKSUM_CALLS = {
    "vr": ("verify_checksum", "verify_checksum_with_payload"),
    "ck": ("update_checksum", "update_checksum_with_payload"),
}
# The calls each pipeline may not make (simpleSwitch.cpp): (call, clone type or None, message).
WRONG_PIPELINE = {
    "ig": (
        ("clone", "E2E", "'clone(E2E, ...) not invoked in egress"),
        (
            "clone_preserving_field_list",
            "E2E",
            "'clone_preserving_field_list(E2E, ...) not invoked in egress",
        ),
        ("recirculate_preserving_field_list", None, "'resubmit' can only be invoked in egress"),  # sic, p4c's
    ),
    "eg": (
        ("clone", "I2E", "'clone(I2E, ...) not invoked in ingress"),
        (
            "clone_preserving_field_list",
            "I2E",
            "'clone_preserving_field_list(I2E, ...) not invoked in ingress",
        ),
        ("resubmit_preserving_field_list", None, "'resubmit' can only be invoked in ingress"),
    ),
}
PARSER_CALLS = frozenset({"assert", "assume", "log_msg"})  # parser.cpp: the extern functions it converts


def _actions_of(program: ir.Program, control: ir.ControlDecl) -> list[ir.ActionDecl]:
    """The actions that run in `control`: its own, and the top-level ones its tables or body name."""
    named = {ref.action for table in control.tables for ref in table.actions}
    named |= {n.action for n in ir.walk(control.apply) if isinstance(n, ir.ActionCall)}
    return list(control.actions) + [a for a in program.actions if a.fq_name in named or a.name in named]


def _shifts_and_divisions(program: ir.Program) -> Iterator[Diagnostic]:
    """lower.cpp's shift limits, and compileTimeOps.h: a `/` or `%` that StrengthReduction cannot turn
    into a shift or a mask (a constant divisor that is not a power of two) stays, and bmv2 cannot run it."""
    for node in ir.walk((program.parsers, program.controls, program.actions)):
        if not isinstance(node, ir.Binary):
            continue
        right = node.right
        if node.op in ("<<", ">>"):
            if isinstance(node.left, ir.Const) and int(node.left.value) == 0:
                continue  # StrengthReduction makes it 0 before the back end looks
            if isinstance(right.type, ir.BitType) and right.type.width > MAX_SHIFT_WIDTH:
                yield Diagnostic(node.pos, f"shift amount limited to {MAX_SHIFT_WIDTH} bits on this target")
            elif (
                isinstance(right, ir.Const)
                and isinstance(right.type, ir.InfIntType)
                and not isinstance(node.left, ir.Const)
                and int(right.value) > MAX_SHIFT_CONSTANT
            ):
                yield Diagnostic(node.pos, f"shift amount limited to {MAX_SHIFT_CONSTANT} on this target")
        elif node.op in ("/", "%") and isinstance(right, ir.Const) and not isinstance(node.left, ir.Const):
            divisor = int(right.value)
            if divisor > 0 and divisor & (divisor - 1):
                yield Diagnostic(node.pos, "could not evaluate expression at compilation time")


def _simple_data(expr: object) -> object | None:
    """simpleSwitch.cpp's EnsureExpressionIsSimple: the first node of a checksum's data that is not a
    list, a variable, a field, an integer constant or a constant index."""
    for node in ir.walk(expr):
        if isinstance(node, ir.ListExpr | ir.Var | ir.Member):
            continue
        if isinstance(node, ir.Const) and not isinstance(node.type, ir.BoolType):
            continue
        if isinstance(node, ir.StackIndex) and isinstance(node.index, ir.Const):
            continue
        return node
    return None


def _checksum_controls(program: ir.Program) -> Iterator[Diagnostic]:
    """simpleSwitch.cpp's convertChecksum: the checksum controls hold calls of their function only,
    with data that computes nothing."""
    for param, (call, with_payload) in CHECKSUM_CALLS.items():
        control = program.block(param)
        if not isinstance(control, ir.ControlDecl):
            continue
        for stmt in ir.flat(control.apply.stmts):
            if isinstance(stmt, ir.VarDecl) and stmt.init is None:
                continue
            called = stmt.call if isinstance(stmt, ir.CallStmt) else None
            if not (isinstance(called, ir.ExternFunctionCall) and called.name in (call, with_payload)):
                yield Diagnostic(
                    getattr(stmt, "pos", None), f"Only calls to {call} or {with_payload} allowed"
                )
                continue
            bad = _simple_data(called.args[1]) if len(called.args) > 1 else None
            if bad is not None:
                where = getattr(bad, "pos", None) or called.pos
                name = "verify_checksum" if param == "vr" else "update_checksum"
                yield Diagnostic(where, f"Computations are not supported in {name}")


def _deparser(program: ir.Program) -> Iterator[Diagnostic]:
    """deparser.cpp: emits, extern function calls and constant assignments; return or exit ends it."""
    control = program.block("dep")
    if not isinstance(control, ir.ControlDecl):
        return
    for stmt in ir.flat(control.apply.stmts):
        if isinstance(stmt, ir.Return | ir.Exit):
            return
        if isinstance(stmt, ir.VarDecl) and stmt.init is None:
            continue
        if isinstance(stmt, ir.CallStmt) and isinstance(stmt.call, ir.Emit | ir.ExternFunctionCall):
            continue
        if isinstance(stmt, ir.Assign) and isinstance(stmt.rhs, ir.Const):
            continue
        yield Diagnostic(getattr(stmt, "pos", None), "not supported within a deparser on this target")


def _parser(program: ir.Program) -> Iterator[Diagnostic]:
    """parser.cpp: assignments, extract, verify and header methods; of extern calls only assert,
    assume and log_msg; no extern object's methods."""
    for parser in program.parsers:
        for state in parser.states:
            for stmt in ir.flat(state.stmts):
                call = stmt.call if isinstance(stmt, ir.CallStmt) else None
                if isinstance(call, ir.ExternMethodCall) or (
                    isinstance(call, ir.ExternFunctionCall) and call.name not in PARSER_CALLS
                ):
                    yield Diagnostic(stmt.pos, "not supported in parser on this target")


def _pipelines(program: ir.Program) -> Iterator[Diagnostic]:
    """simpleSwitch.cpp: clone, resubmit and recirculate in the pipeline each belongs to."""
    for param, refused in WRONG_PIPELINE.items():
        control = program.block(param)
        if not isinstance(control, ir.ControlDecl):
            continue
        for node in ir.walk((control.apply, tuple(_actions_of(program, control)))):
            if not isinstance(node, ir.ExternFunctionCall):
                continue
            first = node.args[0] if node.args else None
            kind = first.member if isinstance(first, ir.EnumValue) else None
            for name, clone_type, message in refused:
                if node.name == name and (clone_type is None or kind == clone_type):
                    yield Diagnostic(node.pos, message)


def _tables(program: ir.Program) -> Iterator[Diagnostic]:
    """control.h and action.cpp: direct counters, match kinds, entries, parameters."""
    counted: dict[str, ir.TableDecl] = {}
    instances = {i.fq_name: i for c in program.controls for i in c.instances}
    for control in program.controls:
        runs = _actions_of(program, control)
        actions = {a.fq_name: a for a in runs} | {a.name: a for a in runs}
        for table in control.tables:
            if table.direct_counter is not None:
                first = counted.setdefault(table.direct_counter, table)
                if first is not table:
                    counter = instances.get(table.direct_counter)
                    yield Diagnostic(
                        counter.pos if counter else table.pos,
                        "Direct counters cannot be attached to multiple tables "
                        f"{first.fq_name} and {table.fq_name}",
                    )
            for ref in table.actions:
                action = actions.get(ref.action)
                if action is None:
                    continue
                for p in action.params:
                    if not p.direction and not isinstance(p.type, ir.BitType | ir.EnumType):
                        yield Diagnostic(
                            p.pos or action.pos, "action parameters must be bit<> or int<> on this target"
                        )
            for key in table.keys:
                if key.match_kind not in MATCH_KINDS:
                    yield Diagnostic(key.pos or table.pos, "match type not supported on this target")
            for entry in table.entries:
                for key, keyset in zip(table.keys, entry.keysets, strict=False):
                    if key.match_kind == "lpm" and isinstance(keyset, ir.KeysetMask):
                        ones = keyset.mask
                        width = key.expr.type.width if isinstance(key.expr.type, ir.BitType) else 0
                        inverted = ~ones & ((1 << width) - 1)
                        if inverted & (inverted + 1):  # the zeros are not one run at the bottom
                            yield Diagnostic(keyset.pos or entry.pos, "invalid mask for LPM key")
                    if key.match_kind == "ternary" and isinstance(keyset, ir.KeysetRange):
                        yield Diagnostic(keyset.pos or entry.pos, "unsupported ternary key expression")


def _externs(program: ir.Program) -> Iterator[Diagnostic]:
    """simpleSwitch.cpp: registers of bit<>/int<> cells and a size; helpers.cpp: hash of a list or
    struct."""
    instances = list(program.instances) + [i for c in program.controls for i in c.instances]
    for instance in instances:
        if instance.extern != "register":
            continue
        cell = instance.type_args[0] if instance.type_args else None
        serializable = isinstance(cell, ir.EnumType) and cell.underlying is not None  # EliminateSerEnums
        if cell is not None and not isinstance(cell, ir.BitType) and not serializable:
            yield Diagnostic(instance.pos, "Only registers with bit or int types are currently supported")
        size = instance.args[0] if instance.args else None
        if isinstance(size, ir.Const) and int(size.value) == 0:
            yield Diagnostic(instance.pos, "direct registers are not supported in bmv2")
    for node in ir.walk((program.parsers, program.controls, program.actions)):
        if isinstance(node, ir.ExternFunctionCall) and node.name == "hash" and len(node.args) > 3:
            data = node.args[3]
            if not isinstance(data, ir.ListExpr) and not isinstance(data.type, ir.HeaderType | ir.StructType):
                yield Diagnostic(node.pos, "expected a struct")


def check(program: ir.Program) -> list[Diagnostic]:
    """Every refusal, in p4c's order of passes: the mid end's, then the back end's by block."""
    try:
        program.block("ig")
    except KeyError:  # not a V1Switch package
        return []
    found: list[Diagnostic] = []
    for part in (
        _shifts_and_divisions,
        _tables,
        _externs,
        _parser,
        _checksum_controls,
        _pipelines,
        _deparser,
    ):
        found.extend(part(program))
    return found
