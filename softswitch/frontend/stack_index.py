"""Header stack indices that are not constants, lowered to constant ones before any backend sees them.

`hs[i]` with `i` known only at run time names a different header for each
value of `i`. Rather than teach both code generators (and every analysis
that follows a path through the packet state) to compute an element at run
time, the front end rewrites the statement into a chain of `if`s on the
index, each branch the same statement with a constant index, as p4c's own
mid end does for bmv2. Both backends then run only constant indices, so
this is written once and behaves the same on both.

What an index out of range does (P4_16 leaves it undefined): in a parser
the parser stops with `error.StackOutOfBounds`, as `extract(hs.next)` past
the end does; elsewhere the statement runs on a fresh invalid header whose
fields are 0, so a read gives 0 (`isValid()` false) and a write changes
nothing.

The index is read once, into a fresh local, before the statement (its
expression has no calls left: the checker runs them first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from softswitch import ir

MAX_BRANCHES = 4096  # statements a single source statement may become (nested indices multiply)


class TooManyBranches(Exception):
    """The lowered statement would be larger than MAX_BRANCHES copies."""


def is_dynamic(node: object) -> bool:
    return isinstance(node, ir.StackIndex) and not isinstance(node.index, ir.Const)


def has_dynamic_index(node: object) -> bool:
    return any(is_dynamic(n) for n in ir.walk(node))


def lower(stmt: ir.Stmt, fresh: Callable[[str], str], in_parser: bool) -> list[ir.Stmt]:
    """`stmt` (already checked) with every non-constant stack index of its own expressions made constant.

    Nested blocks (`if` branches, `switch` cases) are statements of their own, lowered when they were
    checked; here only the expressions this statement evaluates are looked at.
    """
    budget = [MAX_BRANCHES]
    return _Lowering(fresh, in_parser, budget).statement(stmt)


@dataclasses.dataclass
class _Lowering:
    fresh: Callable[[str], str]
    in_parser: bool
    budget: list[int]

    def statement(self, stmt: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(stmt, ir.Block):
            return [dataclasses.replace(stmt, stmts=tuple(s for x in stmt.stmts for s in self.statement(x)))]
        if isinstance(stmt, ir.If) and has_dynamic_index(stmt.cond):
            return self.hoisted(stmt.cond, lambda v: dataclasses.replace(stmt, cond=v), "cond")
        if isinstance(stmt, ir.Verify) and has_dynamic_index(stmt.cond):
            return self.hoisted(stmt.cond, lambda v: dataclasses.replace(stmt, cond=v), "cond")
        if isinstance(stmt, ir.Switch) and has_dynamic_index(stmt.expr):
            return self.hoisted(stmt.expr, lambda v: dataclasses.replace(stmt, expr=v), "subject")
        if isinstance(stmt, ir.VarDecl) and stmt.init is not None and has_dynamic_index(stmt.init):
            var = ir.Var(stmt.name, stmt.type, "local", "", stmt.pos)
            return [
                dataclasses.replace(stmt, init=None),
                *self.statement(ir.Assign(var, stmt.init, stmt.pos)),
            ]
        if isinstance(stmt, ir.Assign | ir.CallStmt) and has_dynamic_index(stmt):
            return self.expand(stmt)
        return [stmt]

    def hoisted(self, value: ir.Expr, rebuild: Callable[[ir.Expr], ir.Stmt], what: str) -> list[ir.Stmt]:
        """Evaluate `value` into a fresh local first (lowered), then run the statement on the local."""
        var = ir.Var(self.fresh(f"hsi_{what}"), value.type, "local", "", value.pos)
        first = [
            ir.VarDecl(var.name, var.type, None, value.pos),
            *self.statement(ir.Assign(var, value, value.pos)),
        ]
        return [*first, rebuild(var)]

    def expand(self, stmt: ir.Assign | ir.CallStmt) -> list[ir.Stmt]:
        target = _innermost(stmt)
        if target is None:
            return [stmt]
        index_type = target.index.type
        if not isinstance(index_type, ir.BitType):
            return [stmt]  # the checker refuses such an index before this
        assert isinstance(target.expr.type, ir.StackType)
        size = target.expr.type.size
        pos = target.pos
        index = ir.Var(self.fresh("hsi"), index_type, "local", "", pos)
        limit = 1 << (index_type.width - 1 if index_type.signed else index_type.width)
        self.budget[0] -= min(size, limit) + 1
        if self.budget[0] < 0:
            raise TooManyBranches
        key = _key(target)
        chain: ir.Stmt | None = self.out_of_range(stmt, key, target)
        for k in reversed(range(min(size, limit))):
            element = ir.StackIndex(target.expr, ir.Const(ir.BitType(32), k, pos), target.type, pos)
            branch = ir.Block(tuple(self.statement(_replace(stmt, key, element))), pos)
            test = ir.Binary("==", index, ir.Const(index_type, k, pos), ir.BoolType(), pos)
            other = chain if isinstance(chain, ir.Block) or chain is None else ir.Block((chain,), pos)
            chain = ir.If(test, branch, other, pos)
        assert chain is not None
        return [ir.VarDecl(index.name, index_type, target.index, pos), chain]

    def out_of_range(self, stmt: ir.Stmt, key: str, target: ir.StackIndex) -> ir.Stmt:
        pos = target.pos
        if self.in_parser:
            return ir.Verify(
                ir.Const(ir.BoolType(), False, pos), ir.ErrorValue("StackOutOfBounds", pos=pos), pos
            )
        scratch = ir.Var(self.fresh("hsi_out_of_range"), target.type, "local", "", pos)
        body = self.statement(_replace(stmt, key, scratch))
        return ir.Block((ir.VarDecl(scratch.name, scratch.type, None, pos), *body), pos)


def _innermost(node: object) -> ir.StackIndex | None:
    """The first non-constant stack index whose own index has none inside it."""
    for n in ir.walk(node):
        if is_dynamic(n) and not has_dynamic_index(n.index):  # type: ignore[attr-defined]
            return n  # type: ignore[return-value]
    return None


def _key(node: object) -> str:
    """A node's identity as an expression: equal for two occurrences of `hs[i]` in one statement."""
    return repr(_strip(ir.to_json(node)))


def _strip(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _strip(v) for k, v in tree.items() if k != "pos"}
    if isinstance(tree, list):
        return [_strip(v) for v in tree]
    return tree


def _replace(node: Any, key: str, new: ir.Expr) -> Any:
    """`node` with every occurrence of the expression `key` names replaced by `new`."""
    if isinstance(node, tuple):
        return tuple(_replace(n, key, new) for n in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    if isinstance(node, ir.StackIndex) and _key(node) == key:
        return new
    changes = {}
    for f in dataclasses.fields(node):
        if f.name in ("type", "pos"):
            continue
        value = getattr(node, f.name)
        replaced = _replace(value, key, new)
        if replaced is not value:
            changes[f.name] = replaced
    return dataclasses.replace(node, **changes) if changes else node
