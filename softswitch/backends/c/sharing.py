"""Which headers every copy of a packet shares: those no egress-side code can change.

Egress, compute checksum and the deparser run once per copy of a packet
(each multicast replica, each clone). A header they never write is, in
every copy, the header ingress left; the C backend then neither copies it
into each replica nor serializes it more than once per group of copies (it
reads it from the original packet and copies the first copy's bytes).

The analysis is conservative: a header member is shared only when no
statement reachable from those three blocks (their bodies, the tables they
apply, the actions those tables or calls run, transitively) could write any
part of it. A write is an assignment to it or inside it, `setValid` or
`setInvalid`, `push_front`/`pop_front`, `extract`, or passing it (or
anything inside it) to an action's `out`/`inout` parameter or to an extern's
parameter that is not `in`. Any use of the headers struct as a whole, other
than `emit`, shares nothing: the generated code could not tell which parts
it touches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from softswitch import ir
from softswitch.backends.common import all_actions, packet_types

# The v1model blocks that run once per copy of a packet (see softswitch.backends.common.V1MODEL_BLOCKS).
PER_COPY_BLOCKS = ("eg", "ck", "dep")
_EVERYTHING = "*"  # a write (or use) that may touch every member of the headers struct
_PATH = ir.Member | ir.StackIndex | ir.Slice | ir.StackMember


def shared_headers(program: ir.Program) -> frozenset[str]:
    """Members of the headers struct (by P4 name) that no per-copy code writes or uses as a whole."""
    hdr_type, _ = packet_types(program)
    assert isinstance(hdr_type, ir.StructType)
    members = {f.name for f in program.struct(hdr_type.name).fields}
    touched = {_touched(node, parent, hdr_type) for node, parent in _reachable(program)}
    if _EVERYTHING in touched:
        return frozenset()
    return frozenset(members - touched)


def _reachable(program: ir.Program) -> Iterator[tuple[Any, Any]]:
    """Every (node, parent) of the per-copy blocks and of the tables and actions they reach."""
    actions = all_actions(program)
    tables = {t.fq_name: t for c in program.controls for t in c.tables}
    pending: list[Any] = [program.block(param) for param in PER_COPY_BLOCKS]
    seen: set[str] = set()
    while pending:
        for node, parent in _walk(pending.pop(), None):
            name = None
            if isinstance(node, ir.TableApply):
                name = f"table {node.table}"
                target: Any = tables.get(node.table)
            elif isinstance(node, ir.ActionCall | ir.TableActionRef | ir.TableActionCall):
                name = f"action {node.action}"
                target = actions.get(node.action)
            if name is not None and name not in seen:
                seen.add(name)
                pending.append(target)
            yield node, parent


def _walk(node: Any, parent: Any) -> Iterator[tuple[Any, Any]]:
    yield node, parent
    if isinstance(node, tuple):
        for item in node:
            yield from _walk(item, parent)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from _walk(getattr(node, f.name), node)


def _touched(node: Any, parent: Any, hdr_type: ir.StructType) -> str | None:
    """The member of the headers struct `node` may write (or use whole: everything), or None."""
    if _is_headers(node, hdr_type) and not isinstance(parent, ir.Member | ir.Emit):
        return _EVERYTHING  # the struct as a whole: an argument, a copy, a hash of all of it
    written = [w for w in _writes(node) if w is not None]
    roots = {_member_of(w, hdr_type) for w in written}
    roots.discard(None)
    if len(roots) > 1:
        return _EVERYTHING
    return roots.pop() if roots else None


def _writes(node: Any) -> list[ir.Expr | None]:
    """The expressions a statement or call writes into."""
    if isinstance(node, ir.Assign):
        return [node.lhs]
    if isinstance(node, ir.HeaderMethod) and node.method != "isValid":
        return [node.header]
    if isinstance(node, ir.StackOp):
        return [node.stack]
    if isinstance(node, ir.Extract):
        return [node.header]
    if isinstance(node, ir.ActionCall):  # directionless arguments are values (action data)
        return [a for a, d in zip(node.args, node.directions) if d in ("out", "inout")]
    if isinstance(node, ir.ExternMethodCall | ir.ExternFunctionCall):
        return [a for a, d in zip(node.args, node.directions) if d != "in"]
    return []


def _member_of(target: ir.Expr, hdr_type: ir.StructType) -> str | None:
    """The headers-struct member a written expression lies in; everything if unsure; None: not a header."""
    path: list[ir.Expr] = []
    e: Any = target
    while isinstance(e, _PATH):
        path.append(e)
        e = e.expr
    if _is_headers(e, hdr_type):
        outermost = path[-1] if path else None
        return outermost.field if isinstance(outermost, ir.Member) else _EVERYTHING
    if isinstance(e, ir.ListExpr):  # not an l-value in P4; should one ever be written, all of it
        inside = {_member_of(item, hdr_type) for item in e.elements} - {None}
        return inside.pop() if len(inside) == 1 else (_EVERYTHING if inside else None)
    return None  # a local, an action parameter (copied out where it is called), metadata, a value


def _is_headers(node: Any, hdr_type: ir.StructType) -> bool:
    return isinstance(node, ir.Var) and node.kind == "param" and node.type == hdr_type
