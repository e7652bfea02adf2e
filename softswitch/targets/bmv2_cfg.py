"""p4c's bmv2 check that each table has one place in its control's graph, on the checked IR.

A bmv2 JSON pipeline is a graph in which a table is one node with one set of
next tables. p4c's bmv2 back end (backends/bmv2/common/controlFlowGraph.cpp)
therefore builds each pipeline control's control-flow graph and refuses
the program when

- a depth-first walk finds a path from a table back to the same table
  ("... contains a path from table T back to itself"), or
- a table applied in several places goes on to different nodes from them
  ("... table T has multiple successors").

It builds that graph after its mid end, in which every run of statements
between control flow has become a table of its own (SynthesizeActions,
MoveActionsToTables), nested blocks are flattened and `if (!c) A else B`
is `if (c) B else A` (SimplifyControlFlow), and `x = t.apply().hit` is an
`if` (TableHit). This pass rebuilds the same graph from our IR, in the same
node order, and runs the same two walks, so that it refuses what p4c
refuses for the programs the embedded switch runs. Approximations, which
the refusal tests pin: an apply inside a larger expression is taken as
p4c's temporaries make it (the table, then a node for each outcome);
a P4 function's call is a plain statement, as p4c's inlined body would be;
p4c's dead-assignment removal, which can drop a synthesized action, is not
modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from softswitch import ir
from softswitch.frontend.diagnostics import Diagnostic
from softswitch.frontend.typecheck import RESULT

PIPELINE_BLOCKS = ("ig", "eg")  # v1model's ingress and egress: the controls bmv2 runs as pipelines


@dataclass(eq=False)
class _Node:
    """A node of the graph; `table` is a program table's fq_name (None: a condition, an action, an end).

    `successors` has one entry per edge, as p4c's edge sets do: an `if` whose branches both go on to
    the same node has two edges to it.
    """

    index: int
    table: str | None = None
    successors: list[_Node] = field(default_factory=list)


# The edges whose destination is the node made next, by their source: p4c's `live` edge set.
Live = list[_Node]


def _is_hit(cond: ir.Expr | None) -> str | None:
    """The table of `t.apply().hit` (p4c's TableApplySolver::isHit; `.miss` is `!hit` by then)."""
    if isinstance(cond, ir.ApplyResultMember) and cond.member == "hit":
        return cond.apply.table
    return None


def _negated(cond: ir.Expr) -> ir.Expr | None:
    if isinstance(cond, ir.Unary) and cond.op == "!":
        return cond.expr
    if isinstance(cond, ir.ApplyResultMember) and cond.member == "miss":
        return ir.ApplyResultMember(cond.apply, "hit", cond.type, cond.pos)
    return None


def _applies(expr: object) -> list[str]:
    """Tables applied inside an expression, in evaluation order."""
    return [n.table for n in ir.walk(expr) if isinstance(n, ir.TableApply)]


def _stmts(stmt: ir.Stmt | None) -> list[ir.Stmt]:
    if stmt is None:
        return []
    return list(stmt.stmts) if isinstance(stmt, ir.Block) else [stmt]


def _is_empty(stmt: ir.Stmt | None) -> bool:
    return all(
        isinstance(s, ir.VarDecl) and s.init is None or isinstance(s, ir.Block) and _is_empty(s)
        for s in _stmts(stmt)
    )


def _plain(stmt: ir.Stmt, functions: frozenset[str]) -> bool:
    """Whether p4c moves the statement into a synthesized action (SynthesizeActions: an assignment, an
    extern or method call, exit, and a P4 function's call, which p4c's front end has inlined), given
    that it applies no table."""
    if isinstance(stmt, ir.Exit):
        return True
    if isinstance(stmt, ir.CallStmt) and isinstance(stmt.call, ir.ActionCall):
        return stmt.call.action in functions and not _applies(stmt.call)
    if isinstance(stmt, ir.CallStmt):
        return not isinstance(stmt.call, ir.TableApply | ir.ActionCall) and not _applies(stmt.call)
    if isinstance(stmt, ir.Assign):
        return not _applies(stmt)
    if isinstance(stmt, ir.VarDecl):  # MoveDeclarations leaves its initializer as an assignment
        return stmt.init is not None and not _applies(stmt.init)
    return False


class _Builder:
    """p4c's CFGBuilder, over the statements as p4c's mid end leaves them, making nodes in its order."""

    def __init__(self, functions: frozenset[str]) -> None:
        self.functions = functions
        self.nodes: list[_Node] = []
        self.entry = self._node()
        self.exit = self._node()

    def _node(self, table: str | None = None) -> _Node:
        made = _Node(len(self.nodes), table)
        self.nodes.append(made)
        return made

    def _step(self, live: Live, table: str | None = None) -> _Node:
        node = self._node(table)
        for source in live:
            source.successors.append(node)
        return node

    def _outcomes(self, node: _Node) -> Live:
        """`if (t.apply().hit) x = true; else x = false;` after `node`, the table: an action each."""
        outcomes = [self._step([node]), self._step([node])]
        return outcomes

    def _hoist(self, live: Live, expr: object) -> Live:
        """Applies inside a larger expression, taken out first by p4c's temporaries."""
        for table in _applies(expr):
            live = self._outcomes(self._step(live, table))
        return live

    def block(self, live: Live, stmts: list[ir.Stmt]) -> Live:
        """A block with nested blocks flattened (SimplifyControlFlow): a run of plain statements is
        one synthesized action, one node."""
        in_action = False
        for stmt in ir.flat(stmts):
            if isinstance(stmt, ir.VarDecl) and stmt.init is None:
                continue  # moved to the control's locals (MoveDeclarations)
            if _plain(stmt, self.functions):
                if not in_action:
                    live = [self._step(live)]
                in_action = True
            else:
                live, in_action = self._control(live, stmt), False
        return live

    def _control(self, live: Live, stmt: ir.Stmt) -> Live:
        if isinstance(stmt, ir.If):
            return self._if(live, stmt)
        if isinstance(stmt, ir.Switch):
            return self._switch(live, stmt)
        if isinstance(stmt, ir.Return):
            for source in live:
                source.successors.append(self.exit)
            return []
        if isinstance(stmt, ir.CallStmt) and isinstance(stmt.call, ir.TableApply):
            return [self._step(live, stmt.call.table)]
        rhs = stmt.rhs if isinstance(stmt, ir.Assign) else stmt.init if isinstance(stmt, ir.VarDecl) else None
        table = _is_hit(rhs)
        if table is not None:  # TableHit
            return self._outcomes(self._step(live, table))
        # An action call (MoveActionsToTables: a table of its own), or a statement whose applies
        # come out first: an action.
        return [self._step(self._hoist(live, stmt))]

    def _if(self, live: Live, stmt: ir.If) -> Live:
        cond: ir.Expr = stmt.cond
        then: ir.Stmt | None = stmt.then
        else_: ir.Stmt | None = stmt.else_
        inner = _negated(cond)
        if inner is not None:  # SimplifyControlFlow swaps the branches of `if (!c)`
            cond, then, else_ = inner, else_, then
        table = _is_hit(cond)
        if table is None:
            if _is_empty(then) and _is_empty(else_) and not _applies(cond):
                return live  # SimplifyControlFlow removes it
            live = self._hoist(live, cond)
        node = self._step(live, table)
        return self.block([node], _stmts(then)) + self.block([node], _stmts(else_))

    def _switch(self, live: Live, stmt: ir.Switch) -> Live:
        expr = stmt.expr
        if isinstance(expr, ir.ApplyResultMember) and expr.member == "action_run":
            node = self._step(live, expr.apply.table)
        else:  # EliminateSwitch: a synthesized table keyed on the expression
            node = self._step(self._hoist(live, expr))
        result: Live = [node]  # no label matches
        labels = 0
        for case in stmt.cases:
            labels += max(len(case.labels), 1)
            if case.body is not None:
                result += self.block([node] * labels, list(case.body.stmts))
                labels = 0
        return result + [node] * labels  # trailing fall-through labels: an empty last case


def _build(control: ir.ControlDecl, functions: frozenset[str]) -> list[_Node]:
    builder = _Builder(functions)
    for source in builder.block([builder.entry], list(control.apply.stmts)):
        source.successors.append(builder.exit)
    return builder.nodes


def _loop_back(nodes: list[_Node]) -> str | None:
    """p4c's CFG::dfs from every node in order: a table met again while it is on the walk's path."""
    visited: set[int] = set()

    def dfs(node: _Node, stack: set[str]) -> str | None:
        if node.table is not None and node.table in stack:
            return node.table
        if node.index in visited:
            return None
        if node.table is not None:
            stack.add(node.table)
        for succ in sorted(node.successors, key=lambda n: n.index):
            found = dfs(succ, stack)
            if found is not None:
                return found
        if node.table is not None:
            stack.discard(node.table)
        visited.add(node.index)
        return None

    for node in nodes:
        found = dfs(node, set())
        if found is not None:
            return found
    return None


def _same_place(a: _Node, b: _Node) -> bool:
    """p4c's EdgeSet::checkSame: the same next nodes, a program table counting as one node."""

    def covers(xs: list[_Node], ys: list[_Node]) -> bool:
        return all(any(x is y or (x.table is not None and x.table == y.table) for y in ys) for x in xs)

    return (
        len(a.successors) == len(b.successors)
        and covers(a.successors, b.successors)
        and covers(b.successors, a.successors)
    )


def check_control(control: ir.ControlDecl, functions: frozenset[str] = frozenset()) -> Diagnostic | None:
    """p4c's CFG::checkImplementable for one control: the first refusal, at the table's declaration.
    `functions`: the hidden actions that stand for P4 functions (their calls are inlined statements)."""
    nodes = _build(control, functions)
    tables = {t.fq_name: t for t in control.tables}
    looped = _loop_back(nodes)
    if looped is not None:
        return Diagnostic(
            tables[looped].pos,
            "Program can not be implemented on this target since it contains a path from table "
            f"{looped} back to itself",
        )
    places: dict[str, list[_Node]] = {}
    for node in nodes:
        if node.table is not None:
            places.setdefault(node.table, []).append(node)
    for table, sites in places.items():
        first = sites[0]
        for other in sites[1:]:
            if not _same_place(first, other):
                return Diagnostic(
                    tables[table].pos,
                    f"Program is not supported by this target, because table {table} has multiple successors",
                )
    return None


def check(program: ir.Program) -> list[Diagnostic]:
    """The refusals of p4c's bmv2 back end for the program's ingress and egress controls."""
    out: list[Diagnostic] = []
    functions = frozenset(a.fq_name for a in program.actions if a.params and a.params[-1].name == RESULT)
    for param in PIPELINE_BLOCKS:
        try:
            block = program.block(param)
        except KeyError:  # not a V1Switch package: nothing here is a bmv2 pipeline
            continue
        if isinstance(block, ir.ControlDecl):
            found = check_control(block, functions)
            if found is not None:
                out.append(found)
    return out
