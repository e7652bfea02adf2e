"""Parsers and controls instantiated inside others, inlined by the front end as p4c inlines them.

The IR and both code generators only ever see the six v1model blocks: a
control `C() c;` declared in `MyIngress` brings its locals, extern
instances, actions and tables into `MyIngress`, named under the instance
(`MyIngress.c.t`, as p4c's P4Info names them), and each `c.apply(...)`
becomes a block of statements: copy-in, C's apply body checked again for
this call (with a fresh name for every local), copy-out. A sub-parser's
locals join the enclosing parser once per instance; its states are copied
for every `p.apply(...)`, which splits the calling state in two: the
statements before the call and the copy-in, a transition to the copy of
the callee's start state, the callee's `accept` leading to a new state with
the copy-out, the rest of the calling state and its transition (`reject`
stays `reject`).

Parameters follow p4c's inliner (frontends/p4/inlining.cpp), so that
programs behave as on bmv2: when every call of an instance passes the same
arguments, none of them aliases another and each can be evaluated where the
instance is declared, the parameters stand for the arguments themselves;
otherwise each parameter is a local of the enclosing block (one per
instance), `in`/`inout` arguments are copied into it before the body and
`out`/`inout` ones copied back after it. Either way the headers of an
`out` parameter are made invalid at every call, and `exit` leaves at once
(no copy-out), as in p4c. `return` in an inlined apply body leaves that
body only: what follows it runs under a flag that it clears.

A control or parser applied by its type's name (`C.apply(...)`, P4_16's
direct invocation) is instantiated there, once per call, with the type's
name as the instance's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lark import Tree

from softswitch import ir
from softswitch.frontend.typecheck_expr import Context, Fail, Scope, is_const, overlaps, reads

if TYPE_CHECKING:
    from softswitch.frontend.diagnostics import Diagnostic

# IR nodes an argument may not contain to stand for its parameter (evaluated once per use instead of once)
_CALL_NODES = (ir.ExternMethodCall, ir.ExternFunctionCall, ir.TableApply, ir.ActionCall, ir.HeaderMethod)


@dataclass
class Alias:
    """A parameter of an inlined block that stands for its argument (p4c's direct substitution)."""

    expr: ir.Expr


@dataclass
class PendingInstance:
    """The name of an instance of a parser or control before it is expanded (while the enclosing
    block's other locals are checked), or after its expansion failed (`broken`: already reported)."""

    kind: str
    broken: bool = False


@dataclass
class BlockParts:
    """What a parser or control being checked declares, with what the blocks it instantiates bring in.

    `prefix` and `scope` are those of the (possibly inlined) block whose declarations are being
    checked; the lists are shared by every level of inlining, so that declarations land in the
    enclosing v1model block in p4c's order.
    """

    kind: str  # "parser" | "control"
    prefix: str
    scope: Scope
    calls_in: list[Tree]  # where the block's own instances may be applied (apply body, states)
    locals: list[ir.VarDecl] = field(default_factory=list)
    instances: list[ir.InstanceDecl] = field(default_factory=list)
    actions: list[ir.ActionDecl] = field(default_factory=list)
    tables: list[ir.TableDecl] = field(default_factory=list)
    pending: list[tuple[Tree, tuple[int, int, int, int]]] = field(default_factory=list)


@dataclass
class SubBlockInfo:
    """A parser or control instantiated inside another, as its name resolves in the enclosing block."""

    name: str
    kind: str
    callee: str  # the parser's or control's type
    params: tuple[ir.Param, ...]
    bound: dict[str, ir.Expr]  # parameter -> the argument it stands for, or its local
    aliased: frozenset[str]  # the parameters that stand for their arguments
    parts: BlockParts  # the callee's own scope and prefix
    apply_tree: Tree | None = None  # control: its apply block
    state_trees: tuple[Tree, ...] = ()  # parser: its states


def call_sites(trees: Sequence[Tree], name: str) -> list[Tree]:
    """The `name.apply(...)` calls in `trees` (parse trees), in source order."""
    out = []
    for tree in trees:
        for t in tree.iter_subtrees_topdown():
            if t.data == "call" and _applied_name(t) == name:
                out.append(t)
    return out


def _applied_name(t: Tree) -> str | None:
    callee = t.children[0]
    if not (isinstance(callee, Tree) and callee.data == "member" and str(callee.children[1]) == "apply"):
        return None
    target = callee.children[0]
    if isinstance(target, Tree) and target.data == "name_ref":
        return str(target.children[0])
    return None


def direct_invocation(t: Any) -> str | None:
    """`C` when `t` is the call `C.apply(...)` of a type's name (a direct invocation), else None."""
    if not (isinstance(t, Tree) and t.data == "call"):
        return None
    callee = t.children[0]
    if isinstance(callee, Tree) and callee.data == "type_member" and str(callee.children[1]) == "apply":
        return str(callee.children[0])
    return None


def same_expr(a: object, b: object) -> bool:
    """Whether two IR expressions are the same but for source positions."""
    if hasattr(a, "__dataclass_fields__") and type(a) is type(b):
        return all(
            same_expr(getattr(a, f), getattr(b, f))
            for f in a.__dataclass_fields__  # type: ignore[attr-defined]
            if f != "pos"
        )
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def header_resets(place: ir.Expr, typ: ir.Type, structs: dict[str, ir.StructDecl]) -> Iterator[ir.Stmt]:
    """`setInvalid()` for every header in `place` (an `out` parameter's headers at each call, as p4c)."""
    if isinstance(typ, ir.HeaderType):
        yield ir.CallStmt(ir.HeaderMethod(place, "setInvalid", ir.VoidType(), place.pos), place.pos)
    elif isinstance(typ, ir.StackType):
        for i in range(typ.size):
            index = ir.Const(ir.BitType(32), i, place.pos)
            element = ir.StackIndex(place, index, typ.element, place.pos)
            yield from header_resets(element, typ.element, structs)
    elif isinstance(typ, ir.StructType) and typ.name in structs:
        for f in structs[typ.name].fields:
            yield from header_resets(ir.Member(place, f.name, f.type, place.pos), f.type, structs)


def without_returns(stmts: Sequence[ir.Stmt], flag: ir.Var) -> tuple[ir.Stmt, ...]:
    """`stmts` with every `return` replaced by setting `flag`, and what follows a statement that may
    have set it run only when it did not (p4c's RemoveReturns, for an inlined apply body)."""
    out: list[ir.Stmt] = []
    for i, s in enumerate(stmts):
        if isinstance(s, ir.Return):
            out.append(ir.Assign(flag, ir.Const(ir.BoolType(), True, s.pos), s.pos))
            return tuple(out)
        if not _returns(s):
            out.append(s)
            continue
        out.append(_without_returns_in(s, flag))
        rest = without_returns(stmts[i + 1 :], flag)
        if rest:
            unset = ir.Unary("!", flag, ir.BoolType(), s.pos)
            out.append(ir.If(unset, ir.Block(rest, s.pos), None, s.pos))
        return tuple(out)
    return tuple(out)


def _returns(s: object) -> bool:
    return any(isinstance(n, ir.Return) for n in ir.walk(s))


def _without_returns_in(s: ir.Stmt, flag: ir.Var) -> ir.Stmt:
    def block(b: ir.Block | None) -> ir.Block | None:
        return None if b is None else ir.Block(without_returns(b.stmts, flag), b.pos)

    if isinstance(s, ir.Block):
        return block(s)  # type: ignore[return-value]
    if isinstance(s, ir.If):
        return dataclasses.replace(s, then=block(s.then), else_=block(s.else_))
    if isinstance(s, ir.Switch):
        cases = tuple(dataclasses.replace(c, body=block(c.body)) for c in s.cases)
        return dataclasses.replace(s, cases=cases)
    return s


def renamed_transition(t: ir.Goto | ir.Select, rename: dict[str, str]) -> ir.Goto | ir.Select:
    """A transition whose target states are renamed (a copy of an inlined parser's states)."""
    if isinstance(t, ir.Goto):
        return dataclasses.replace(t, next=rename.get(t.next, t.next))
    cases = tuple(dataclasses.replace(c, next=rename.get(c.next, c.next)) for c in t.cases)
    return dataclasses.replace(t, cases=cases)


class Inliner:
    """The checker's part that inlines instantiated parsers and controls (mixed into its class)."""

    # provided by the checker
    diagnostics: list[Diagnostic]
    types: dict[str, Any]
    globals: Scope
    structs: dict[str, ir.StructDecl]
    hoisted: list[ir.Stmt] | None
    parsers: dict[str, ir.ParserDecl]
    controls: dict[str, ir.ControlDecl]
    error: Callable[..., Fail]
    pos: Callable[[Any], ir.Pos]
    fresh: Callable[[str], str]
    annotations: Callable[..., tuple[ir.Annotation, ...]]
    args: Callable[..., tuple[tuple[ir.Expr, ...], tuple[str, ...]]]
    block: Callable[[Tree, Context], ir.Block]
    parser_state: Callable[..., list[ir.ParserState]]
    declare_local: Callable[[Scope, Any, str, Any], None]
    fq_name: Callable[[str, str, Sequence[ir.Annotation]], str]
    quietly: Callable[[Callable[[], Any]], Any]
    ctor_params: dict[str, tuple[ir.Param, ...]]
    expr: Callable[[Any, Context, ir.Type | None], ir.Expr]
    coerce: Callable[[ir.Expr, ir.Type, Any], ir.Expr]
    signature_matches: Callable[[Sequence[ir.Param], Sequence[ir.Param]], bool]

    def init_inliner(self) -> None:
        self.block_trees: dict[str, Tree] = {}  # parser/control name -> its declaration
        self.inlined: set[str] = set()  # parsers and controls instantiated inside another
        self.parts: BlockParts | None = None  # the block whose apply body or states are being checked
        self.state_names: set[str] = set()  # the enclosing parser's state names, copies' included
        self.expanding: list[str] = []  # the blocks being inlined, outermost first

    def fresh_state(self, base: str) -> str:
        name, n = base, 0
        while name in self.state_names:
            n += 1
            name = f"{base}_{n}"
        self.state_names.add(name)
        return name

    # ------------------------------------------------------------ instantiation

    def unusable(self, at: Any, callee: str) -> Fail:
        """Why `callee` cannot be inlined: its declaration's errors (reported already), or else it is
        still being declared, instantiated or applied inside itself."""
        if self.diagnostics:
            return Fail()
        return self.error(at, f"{callee} cannot be instantiated or applied inside itself")

    def sub_block_instance(self, d: Tree, parts: BlockParts, kind: str) -> None:
        """`C() c;` inside a parser or control: its name is taken here; C's declarations join the
        enclosing block here too, once all its locals are known (`expand_instances`)."""
        ann, t, args, name = d.children
        iname, callee = str(name.children[0]), str(t.children[0])
        self.declare_local(parts.scope, name, iname, PendingInstance(kind, broken=True))
        if t.data != "named_type":
            raise self.error(t, f"{callee} takes no type arguments")
        if kind != parts.kind:
            raise self.error(d, f"a {kind} cannot be instantiated inside a {parts.kind} ({callee})")
        if callee not in self.parsers and callee not in self.controls and callee not in self.ctor_params:
            raise self.unusable(d, callee)
        parts.scope.names[iname] = PendingInstance(kind)
        at = (len(parts.locals), len(parts.instances), len(parts.actions), len(parts.tables))
        parts.pending.append((d, at))

    def expand_instances(self, parts: BlockParts) -> None:
        """Expand the block's instances of parsers and controls (`sub_block_instance`) in order (one
        may be another's constructor argument), each one's declarations moved to where it was
        declared (after what earlier ones moved there)."""
        lists = (parts.locals, parts.instances, parts.actions, parts.tables)
        moved_before = [0] * len(lists)
        for d, at in parts.pending:
            ann, t, args, name = d.children
            iname = str(name.children[0])
            ends = [len(items) for items in lists]
            prefix = self.fq_name(parts.prefix, iname, self.annotations(ann))
            calls = call_sites(parts.calls_in, iname)
            given = list(args.children) if args is not None else []
            try:
                info = self.expand(iname, str(t.children[0]), prefix, calls, parts, d, given)
            except Fail:
                parts.scope.names[iname] = PendingInstance(parts.kind, broken=True)
                continue
            parts.scope.names[iname] = info
            for k, (items, index, end) in enumerate(zip(lists, at, ends, strict=True)):
                moved = items[end:]  # type: ignore[attr-defined]
                del items[end:]  # type: ignore[attr-defined]
                where = index + moved_before[k]
                items[where:where] = moved  # type: ignore[index]
                moved_before[k] += len(moved)
        parts.pending.clear()

    def expand(
        self,
        iname: str,
        callee: str,
        prefix: str,
        calls: list[Tree],
        parts: BlockParts,
        at: Any,
        ctor_args: Sequence[Any] = (),
    ) -> SubBlockInfo:
        """Check `callee`'s declarations again as instance `iname` (control-plane names under `prefix`),
        into `parts`; its parameters bound as all of `calls` allow, its constructor's to `ctor_args`."""
        d = self.block_trees.get(callee)
        if d is None or not (callee in self.parsers or callee in self.controls or callee in self.ctor_params):
            raise self.unusable(at, callee)
        self.inlined.add(callee)  # (tried: an error in its arguments is its only one)
        kind, params = self.types[callee]
        with self.inlining(callee, at):
            constructed = self.constructor_scope(callee, list(ctor_args), parts, at)
            scope = Scope(constructed or self.globals)
            bound, aliased = self.bind(iname, params, calls, parts)
            scope.names.update({p: Alias(e) if p in aliased else e for p, e in bound.items()})
            info = SubBlockInfo(iname, kind, callee, params, bound, frozenset(aliased), parts)
            body = d.children[4:]
            if kind == "control":
                apply_tree = body[-1]
                inner = dataclasses.replace(
                    parts, prefix=prefix, scope=scope, calls_in=[apply_tree], pending=[]
                )
                self.control_locals(body[:-1], inner)  # type: ignore[attr-defined]
                return dataclasses.replace(info, parts=inner, apply_tree=apply_tree)
            states = tuple(b for b in body if b.data == "parser_state")
            inner = dataclasses.replace(parts, prefix=prefix, scope=scope, calls_in=list(states), pending=[])
            self.parser_locals([b for b in body if b.data != "parser_state"], inner)  # type: ignore[attr-defined]
            return dataclasses.replace(info, parts=inner, state_trees=states)

    @contextmanager
    def inlining(self, block: SubBlockInfo | str, at: Any) -> Iterator[None]:
        """While `block`'s declarations or body are checked again: an error if that is inside itself."""
        callee = block.callee if isinstance(block, SubBlockInfo) else block
        if callee in self.expanding:
            message = f"{callee} cannot be instantiated or applied inside itself"
            if any(d.pos == self.pos(at) and d.message == message for d in self.diagnostics):
                raise Fail()  # said where the declaration itself was checked
            raise self.error(at, message)
        self.expanding.append(callee)
        try:
            yield
        finally:
            self.expanding.pop()

    def constructor_scope(
        self, callee: str, given: list[Any], parts: BlockParts | None, at: Any
    ) -> Scope | None:
        """The constructor parameters of `callee` bound to the arguments `given` where it is instantiated
        (in `parts`; None: by the package): compile-time values, or instances of parsers and controls
        declared before in the same block (None if it has no constructor parameters)."""
        ctor = self.ctor_params.get(callee)
        if ctor is None:
            if given:
                raise self.error(at, f"{callee} takes no constructor arguments")
            return None
        if len(given) != len(ctor):
            raise self.error(at, f"{callee}: expects {len(ctor)} constructor arguments, got {len(given)}")
        names: dict[str, Any] = {}
        for p, a in zip(ctor, given, strict=True):
            block = self.types.get(p.type.name) if isinstance(p.type, ir.ExternType) else None
            if isinstance(block, tuple):
                found = parts.scope.lookup(str(a.children[0])) if parts and a.data == "name_ref" else None
                if not isinstance(found, SubBlockInfo) or found.kind != block[0]:
                    raise self.error(
                        a, f"{callee}: constructor argument {p.name} must be a {block[0]} instance"
                    )
                if not self.signature_matches(found.params, block[1]):
                    raise self.error(a, f"{callee}: {a.children[0]} is no {p.type.name}")
                names[p.name] = found
                continue
            ctx = Context(parts.scope if parts else self.globals, "global")
            e = self.coerce(self.expr(a, ctx, p.type), p.type, a)
            if not is_const(e):
                raise self.error(
                    a, f"{callee}: constructor argument {p.name} must be a compile-time constant"
                )
            names[p.name] = e
        return Scope(self.globals, names)

    def bind(
        self, iname: str, params: Sequence[ir.Param], calls: list[Tree], parts: BlockParts
    ) -> tuple[dict[str, ir.Expr], set[str]]:
        """What each parameter stands for: its argument when p4c substitutes it (every call passes the
        same arguments, this one aliases no other and evaluates in the enclosing block's scope), else
        a new local of the enclosing block; directionless parameters always stand for their argument."""
        given = [list(c.children[1].children) if c.children[1] is not None else [] for c in calls]
        same = bool(given) and len(given[0]) == len(params) and all(g == given[0] for g in given)
        # directionless parameters (packet_in, packet_out) stand for their argument whatever the others do
        args = [
            self.quiet_arg(p, given[0][i], calls[0], parts)
            if same
            or (p.direction == "" and given and all(len(g) > i and g[i] == given[0][i] for g in given))
            else None
            for i, p in enumerate(params)
        ]
        places = [set(reads(a)) if a is not None else set() for a in args]
        bound: dict[str, ir.Expr] = {}
        aliased: set[str] = set()
        for i, (p, arg) in enumerate(zip(params, args, strict=True)):
            others = [x for j, s in enumerate(places) if j != i for x in s]
            substitute = arg is not None and (
                is_const(arg)
                or (
                    not any(isinstance(n, _CALL_NODES) for n in ir.walk(arg))
                    and not any(overlaps(x, y) for x in places[i] for y in others)
                )
            )
            if substitute:
                assert arg is not None
                bound[p.name] = arg
                aliased.add(p.name)
            elif p.direction == "" and calls:
                raise self.error(calls[0], f"unsupported: {iname}.apply with {p.name} given differently")
            else:
                var = ir.Var(self.fresh(f"{iname}_{p.name}"), p.type, "local", "", p.pos)
                if p.direction:
                    parts.locals.append(ir.VarDecl(var.name, var.type, None, p.pos))
                bound[p.name] = var
        return bound, aliased

    def quiet_arg(self, p: ir.Param, tree: Any, call: Tree, parts: BlockParts) -> ir.Expr | None:
        """An argument checked in the enclosing block's own scope, or None (and nothing reported)."""
        saved, self.hoisted = self.hoisted, None  # a function call in it: no statement to go before
        try:
            ctx = Context(Scope(parts.scope), parts.kind, in_apply=parts.kind == "control")
            return self.quietly(lambda: self.args([p], [tree], call, ctx, "apply", {})[0][0])
        finally:
            self.hoisted = saved

    # ------------------------------------------------------------ application

    def sub_block_apply(self, t: Tree, ctx: Context) -> ir.Block | None:
        """The statements a control's `c.apply(...)` (or `C.apply(...)`) stands for; None if `t` is
        no such call."""
        info = self.applied(t, ctx, "control")
        if info is None:
            return None
        pos = self.pos(t)
        before, args = self.copy_in(info, t, ctx)
        saved, self.parts = self.parts, info.parts
        try:
            assert info.apply_tree is not None
            with self.inlining(info, t):
                body = self.block(info.apply_tree, Context(Scope(info.parts.scope), "control", in_apply=True))
        finally:
            self.parts = saved
        if any(isinstance(n, ir.Return) for n in ir.walk(body)):
            flag = ir.Var(self.fresh(f"{info.name}_returned"), ir.BoolType(), "local", "", pos)
            parts = self.parts
            assert parts is not None
            parts.locals.append(ir.VarDecl(flag.name, flag.type, None, pos))
            reset = ir.Assign(flag, ir.Const(ir.BoolType(), False, pos), pos)
            body = ir.Block((reset, *without_returns(body.stmts, flag)), body.pos)
        return ir.Block((*before, body, *self.copy_out(info, args)), pos)

    def applied(self, t: Tree, ctx: Context, kind: str) -> SubBlockInfo | None:
        """The instance a call statement `t` applies (instantiated here for a direct invocation); `kind`
        is what may be applied where `t` is: a control in an apply body, a parser directly in a state."""
        if not (isinstance(t, Tree) and t.data == "call"):
            return None
        name = _applied_name(t)
        callee = direct_invocation(t)
        found = self.types.get(callee) if callee is not None else None
        info = ctx.scope.lookup(name) if name is not None else None
        if isinstance(info, PendingInstance) and info.broken:
            raise Fail()  # already reported
        what = info.kind if isinstance(info, SubBlockInfo | PendingInstance) else None
        if what is None and isinstance(found, tuple):
            what = found[0]
        if what not in ("parser", "control"):
            return None
        if what != kind or (kind == "control" and not ctx.in_apply):
            where = "directly in a parser state" if what == "parser" else "in a control's apply body"
            raise self.error(t, f"unsupported: applying {what} {name or callee} here (only {where})")
        if isinstance(info, SubBlockInfo):
            return info
        assert callee is not None and self.parts is not None
        if callee in self.ctor_params:
            self.inlined.add(callee)
            raise self.error(t, f"{callee} has constructor parameters: instantiate it to apply it")
        if callee not in self.parsers and callee not in self.controls:
            raise self.unusable(t, callee)
        parts = self.parts
        return self.expand(callee, callee, f"{parts.prefix}.{callee}", [t], parts, t)

    def copy_in(self, info: SubBlockInfo, t: Tree, ctx: Context) -> tuple[list[ir.Stmt], tuple[ir.Expr, ...]]:
        """The call's arguments, and what runs before the body: copy-in, `out` headers made invalid."""
        arg_trees = list(t.children[1].children) if t.children[1] is not None else []
        args, _ = self.args(info.params, arg_trees, t, ctx, f"{info.name}.apply", {})
        out: list[ir.Stmt] = []
        for p, a in zip(info.params, args, strict=True):
            place = info.bound[p.name]
            if p.name in info.aliased:
                if not same_expr(place, a):  # the name means something else here (shadowed)
                    raise self.error(t, f"unsupported: {info.name}.apply with {p.name} given differently")
            elif p.direction in ("in", "inout"):
                out.append(ir.Assign(place, a, a.pos))
            if p.direction == "out":
                out += header_resets(place, p.type, self.structs)
        return out, args

    def copy_out(self, info: SubBlockInfo, args: tuple[ir.Expr, ...]) -> list[ir.Stmt]:
        return [
            ir.Assign(a, info.bound[p.name], a.pos)
            for p, a in zip(info.params, args, strict=True)
            if p.direction in ("out", "inout") and p.name not in info.aliased
        ]

    def sub_parser_split(
        self, t: Tree, ctx: Context
    ) -> tuple[list[ir.Stmt], SubBlockInfo, tuple[ir.Expr, ...]] | None:
        """For a parser's `p.apply(...)` statement: the copy-in, the instance and the arguments."""
        call = t.children[0] if isinstance(t, Tree) and t.data == "call_stmt" else None
        info = self.applied(call, ctx, "parser") if call is not None else None
        if info is None:
            return None
        assert call is not None
        before, args = self.copy_in(info, call, ctx)
        return before, info, args

    def sub_parser_states(self, info: SubBlockInfo, after: str) -> tuple[str, list[ir.ParserState]]:
        """A copy of the instance's states for one call (`accept` leads to `after`), and its start."""
        own = {str(st.children[1].children[0]) for st in info.state_trees}
        rename = {n: self.fresh_state(f"{info.parts.prefix.replace('.', '_')}_{n}") for n in own}
        rename.update(accept=after, reject="reject")
        names = own | {"accept", "reject"}
        states: list[ir.ParserState] = []
        saved, self.parts = self.parts, info.parts
        try:
            with self.inlining(info, info.state_trees[0] if info.state_trees else None):
                for st in info.state_trees:
                    states += self.parser_state(st, Context(info.parts.scope, "parser"), names, rename)
        finally:
            self.parts = saved
        return rename["start"], states
