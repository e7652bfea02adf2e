"""Header unions written out on their members, so that no backend has to know what a union is.

A `header_union U { H1 a; H2 b; }` reaches the backends as a struct of headers
(`ir.StructDecl.union`). What makes it a union is what happens to the validity of
its members, and P4_16 (8.20) says it all in terms of the members:

* `u.a.setValid()`, `extract(u.a)` and `u.a = e` leave `a` as they leave any
  header and every other member invalid (after `u.a = e` with `e` invalid all are);
* `u.a.setInvalid()` makes every member invalid;
* `u.isValid()` is true when a member is valid (`is_valid`: their `||`).

So each such statement becomes itself followed by `setInvalid()` on the other
members (`lower`), once, here, and the Python and C backends run plain headers.
For `extract(s.next.a)` on a stack of unions the element just extracted is
`s.last`, and that is where the other members are invalidated. What is not written
out is refused: a union member passed to an `out`/`inout` parameter (its copy-out is
an assignment that would have to invalidate the others).
"""

from __future__ import annotations

from softswitch import ir


class Unsupported(Exception):
    """A use of a union member this lowering does not write out (the message names it)."""


def _union_of(e: ir.Expr, unions: dict[str, ir.StructDecl]) -> ir.StructDecl | None:
    """The union `e` is a member of (`u.a`), or None."""
    if isinstance(e, ir.Member) and isinstance(e.expr.type, ir.StructType):
        return unions.get(e.expr.type.name)
    return None


def _members(union: ir.Expr, decl: ir.StructDecl, pos: ir.Pos | None) -> list[ir.Member]:
    return [ir.Member(union, f.name, f.type, pos) for f in decl.fields]


def _set_invalid(header: ir.Expr, pos: ir.Pos | None) -> ir.Stmt:
    return ir.CallStmt(ir.HeaderMethod(header, "setInvalid", ir.VoidType(), pos), pos)


def _others_invalid(member: ir.Member, decl: ir.StructDecl, pos: ir.Pos | None) -> list[ir.Stmt]:
    """`setInvalid()` on every member of `member`'s union but `member`."""
    union = member.expr
    if isinstance(union, ir.StackMember) and union.member == "next":  # extract just moved past it
        union = ir.StackMember(union.expr, "last", union.type, union.pos)
    return [_set_invalid(m, pos) for m in _members(union, decl, pos) if m.field != member.field]


def is_valid(union: ir.Expr, decl: ir.StructDecl, pos: ir.Pos | None) -> ir.Expr:
    """`union.isValid()`: whether one of its members is valid."""
    tests: list[ir.Expr] = [
        ir.HeaderMethod(m, "isValid", ir.BoolType(), pos) for m in _members(union, decl, pos)
    ]
    if not tests:
        return ir.Const(ir.BoolType(), False, pos)
    out = tests[0]
    for test in tests[1:]:
        out = ir.Binary("||", out, test, ir.BoolType(), pos)
    return out


def lower(stmt: ir.Stmt, unions: dict[str, ir.StructDecl]) -> list[ir.Stmt]:
    """`stmt` (checked) and, after it, what it does to the other members of a union it changes.

    Statements nested in `stmt` (branches, cases) were lowered when they were checked; only what
    `stmt` itself does is looked at.
    """
    pos = stmt.pos
    if isinstance(stmt, ir.Assign):
        decl = _union_of(stmt.lhs, unions)
        if decl is not None:
            assert isinstance(stmt.lhs, ir.Member)
            return [stmt, *_others_invalid(stmt.lhs, decl, pos)]
        _check_calls(stmt.rhs, unions)
        return [stmt]
    if isinstance(stmt, ir.VarDecl):
        _check_calls(stmt.init, unions)
        return [stmt]
    if not isinstance(stmt, ir.CallStmt):
        _check_calls(getattr(stmt, "cond", None) or getattr(stmt, "expr", None), unions)
        return [stmt]
    call = stmt.call
    if isinstance(call, ir.HeaderMethod | ir.Extract):
        decl = _union_of(call.header, unions)
        if decl is None:
            return [stmt]
        assert isinstance(call.header, ir.Member)
        if isinstance(call, ir.HeaderMethod) and call.method == "setInvalid":
            return [_set_invalid(m, pos) for m in _members(call.header.expr, decl, pos)]
        return [stmt, *_others_invalid(call.header, decl, pos)]
    _check_calls(call, unions)
    return [stmt]


def _check_calls(node: object, unions: dict[str, ir.StructDecl]) -> None:
    """Refuse a union member as the argument of an `out`/`inout` parameter anywhere in `node`."""
    for n in ir.walk(node) if node is not None else ():
        if isinstance(n, ir.ActionCall | ir.ExternFunctionCall | ir.ExternMethodCall):
            for arg, direction in zip(n.args, n.directions):
                if direction in ("out", "inout") and _union_of(arg, unions) is not None:
                    raise Unsupported(f"a header union member as an {direction} argument")
