"""What every backend shares: the refusal error, v1model constants, the program's initial state, IR walks.

Both backends (`python/`, the reference, and `c/`) must agree bit for bit,
so whatever they decide alike is decided once here: which runtime state a
freshly loaded program starts from (its default actions and const entries,
resolved to P4Info ids), the small questions about action bodies that
shape the generated code (does it `exit`, which actions does it call), and
the `Walker` both code generators derive from: what every statement,
expression, operator and call means, so that each generator only spells it
(docs/softswitch-compiler.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from finsy.proto import p4i

from softswitch import ir
from softswitch.p4info import digest_member_widths
from softswitch.runtime import state as st
from softswitch.runtime.build import build_state

DROP_PORT = 511  # bmv2's default drop port (egress_spec value of mark_to_drop)
INSTANCE_TYPE_REPLICATION = 5
INSTANCE_TYPE_RECIRC = 4
INSTANCE_TYPE_RESUBMIT = 6
INSTANCE_TYPE_INGRESS_CLONE = 1
INSTANCE_TYPE_EGRESS_CLONE = 2
# bmv2 keeps the low 16 bits of clone's bit<32> session (its mirroring session ids are 16 bits).
CLONE_SESSION_MASK = 0xFFFF
# Passes one received frame may make through the pipeline (itself, resubmits, recirculations and
# clone operations): bmv2 has no bound, a loop here would hang the switch; a packet that needs more
# fails (is dropped).
MAX_PASSES = 16
STD_ROOT = "standard_metadata"
# Package parameter -> (generated function, index of the first parameter bound to a packet root).
V1MODEL_BLOCKS = {
    "p": ("parse", 1),
    "vr": ("verify_checksum", 0),
    "ig": ("ingress", 0),
    "eg": ("egress", 0),
    "ck": ("compute_checksum", 0),
    "dep": ("deparse", 1),
}
PACKET_ROOTS = ("hdr", "meta", STD_ROOT)


class UnsupportedError(Exception):
    """The program uses a construct this backend does not implement (the message names it).

    Raised with `at`, it also keeps the construct's position (`pos`) and name (`what`), so that the
    compiler, which loads every program it accepts, reports it there rather than at the file's start.
    """

    pos: ir.Pos | None = None
    what: str = ""

    @classmethod
    def at(cls, what: str, node: object) -> UnsupportedError:
        pos = getattr(node, "pos", None)
        error = cls(f"{what} at {pos}")
        error.pos, error.what = pos, what
        return error


def check_v1model(program: ir.Program) -> None:
    if program.arch != "v1model":
        raise UnsupportedError(f"architecture {program.arch!r}: the embedded switch runs v1model programs")


def initial_state(program: ir.Program, info: p4i.P4Info) -> st.RuntimeState:
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
            defaults[table_id] = st.ActionCall(action_ids[default.action], const_args(default.args))
            entries = []
            for entry in table.entries:
                match = tuple(
                    ir.keyset_match(k, key.match_kind, ir.width_of(key.expr.type))
                    for k, key in zip(entry.keysets, table.keys)
                )
                needs_priority = any(
                    key.match_kind in (st.TERNARY, st.RANGE, st.OPTIONAL) for key in table.keys
                )
                # The checker sets each entry's P4Runtime priority (higher wins; frontend/entries.py);
                # a device config written before it did leaves it None: the first entry wins.
                priority = entry.priority or (len(table.entries) - len(entries)) if needs_priority else 0
                action = st.ActionCall(action_ids[entry.action.action], const_args(entry.action.args))
                entries.append(st.Entry(match, priority, action))
            if entries:
                const_entries[table_id] = entries
    return build_state(info, defaults, const_entries)


def const_args(args: tuple[ir.Expr, ...]) -> tuple[int, ...]:
    values = []
    for arg in args:
        if isinstance(arg, ir.EnumValue) and arg.value is not None:  # serializable: its number
            arg = ir.Const(arg.type.underlying, arg.value, arg.pos)
        if not isinstance(arg, ir.Const):
            raise UnsupportedError.at("non-constant action argument", arg)
        width = ir.width_of(arg.type) if isinstance(arg.type, ir.BitType | ir.BoolType) else None
        values.append(int(arg.value) & ((1 << width) - 1) if width else int(arg.value))
    return tuple(values)


# ------------------------------------------------------------------------------------------ IR walks


def switch_arms(
    cases: tuple[ir.SwitchCase, ...], label: Callable[[ir.Expr], str]
) -> list[tuple[list[str] | None, ir.Block]]:
    """The arms of a switch in order: (the labels leading to it, fall-through gathered; None for
    default) and its body. Nothing after `default` can run, so the arms stop there."""
    arms: list[tuple[list[str] | None, ir.Block]] = []
    pending: list[str] = []
    for case in cases:
        pending += [label(item) for item in case.labels]
        if case.body is None:
            continue
        arms.append((None if case.is_default else pending, case.body))
        pending = []
        if case.is_default:
            break
    return arms


class Checksum(NamedTuple):
    """verify_checksum (`verify`) or update_checksum with csum16 of `data`, when `cond` holds."""

    verify: bool
    cond: ir.Expr
    data: ir.Expr
    target: ir.Expr


class Hash(NamedTuple):
    """hash(): `result` = `base` + the hash of `data` % `maximum` (the hash itself when `maximum` is 0),
    cut to the width of `result`."""

    result: ir.Expr
    algorithm: str
    base: ir.Expr
    data: ir.Expr
    maximum: ir.Expr


class CallDispatch:
    """Which code a call statement becomes, decided once for every backend (each writes its own code)."""

    def _call(self, depth: int, call: ir.Expr) -> None:
        if isinstance(call, ir.TableApply):
            self._apply(depth, call.table)
        elif isinstance(call, ir.ActionCall):
            self._action_call(depth, call)
        elif isinstance(call, ir.ExternMethodCall):
            self._extern_method(depth, call)
        elif isinstance(call, ir.ExternFunctionCall):
            self._extern_function(depth, call)
        elif isinstance(call, ir.HeaderMethod):
            if call.method not in ("setValid", "setInvalid"):
                raise UnsupportedError.at(f"header method {call.method} as a statement", call)
            self._set_valid(depth, call.header, call.method == "setValid")
        elif isinstance(call, ir.StackOp):
            self._stack_op(depth, call)
        elif isinstance(call, ir.Extract):
            self._extract(depth, call)
        elif isinstance(call, ir.Emit):
            self._emit_header(depth, call)
        else:
            raise UnsupportedError.at(f"call {type(call).__name__}", call)

    # What each backend writes for each kind of call.
    def _apply(self, depth: int, table: str) -> Any: ...
    def _action_call(self, depth: int, call: ir.ActionCall) -> None: ...
    def _extern_method(self, depth: int, call: ir.ExternMethodCall) -> None: ...
    def _extern_function(self, depth: int, call: ir.ExternFunctionCall) -> None: ...
    def _set_valid(self, depth: int, header: ir.Expr, valid: bool) -> None: ...
    def _stack_op(self, depth: int, op: ir.StackOp) -> None: ...
    def _extract(self, depth: int, call: ir.Extract) -> None: ...
    def _emit_header(self, depth: int, call: ir.Emit) -> None: ...


class Walker(CallDispatch):
    """How every statement and expression of the IR is walked, decided once for every backend.

    Which node means what (an `if` with an empty `else` has none, `return` with a value never reaches a
    backend, a table's `.miss` is the negation of its `.hit`, `?:` evaluates its condition first, ...)
    is written here; each backend only says how its language spells the result, in the hooks below.
    """

    program: ir.Program
    errors: dict[str, int]
    enums: dict[str, ir.EnumDecl]
    action_ids: dict[str, int]

    # ------------------------------------------------------------ statements
    def _stmt(self, depth: int, s: ir.Stmt) -> None:
        if isinstance(s, ir.Block):
            self._nested_block(depth, s)
        elif isinstance(s, ir.Assign):
            self._assign(depth, s.lhs, s.rhs)
        elif isinstance(s, ir.VarDecl):
            self._vardecl(depth, s)
        elif isinstance(s, ir.If):
            cond = self.expr(s.cond, depth)
            other = s.else_ if s.else_ is not None and s.else_.stmts else None
            self._if(depth, cond, s.then, other, s)
        elif isinstance(s, ir.CallStmt):
            self._call(depth, s.call)
        elif isinstance(s, ir.Exit):
            self._exit(depth)
        elif isinstance(s, ir.Return):
            if s.value is not None:  # the checker turns a function's `return e` into an assignment first
                raise UnsupportedError.at("return with a value", s)
            self._return(depth)
        elif isinstance(s, ir.Switch):
            self._switch(depth, s)
        elif isinstance(s, ir.Verify):
            self._verify(depth, self.expr(s.cond, depth), self.errors[s.error.name], s)
        else:
            raise UnsupportedError.at(f"statement {type(s).__name__}", s)

    def _block(self, depth: int, block: ir.Block) -> None:
        for stmt in block.stmts:
            self._stmt(depth, stmt)

    def _switch(self, depth: int, s: ir.Switch) -> None:
        """The subject is read once; the first arm with its value runs (an empty arm's labels lead to the
        next body), else `default` (nothing after it can run)."""
        subject = self.expr(s.expr, depth)
        name = self.tmp("sw")
        self._let(depth, name, subject, f"switch at {where(s)}")
        for i, (labels, body) in enumerate(switch_arms(s.cases, lambda e: self._label(e, depth))):
            self._arm(depth, i, name, labels)
            self._block(depth + 1, body)
            self._close(depth)

    def _label(self, label: ir.Expr, depth: int) -> str:
        """A switch label: an action (of `table.apply().action_run`) is its P4Info id."""
        if isinstance(label, ir.ActionRef):
            return self._number(self.action_ids[label.action])
        return self.expr(label, depth)

    def _transition(self, depth: int, tr: ir.Goto | ir.Select) -> None:
        """Where a parser state goes: its one next state, or the first `select` case whose keysets all
        match the keys (read once, in order; `default` matches anything); no case: error.NoMatch."""
        if isinstance(tr, ir.Goto):
            self._goto(depth, tr.next)
            return
        keys = []
        for key in tr.keys:
            name = self.tmp("k")
            self._let(depth, name, self.expr(key, depth))
            keys.append(name)
        for case in tr.cases:
            tests = [
                self._keyset(key, keyset)
                for key, keyset in zip(keys, case.keysets)
                if not isinstance(keyset, ir.KeysetDefault)
            ]
            self._when(depth, tests, case)
            self._goto(depth + 1, case.next)
            self._close(depth)
        self._no_match(depth)

    # ----------------------------------------------------------- expressions
    def expr(self, e: ir.Expr, depth: int = 0) -> str:
        """Code of the value of `e` (code that must run first, such as a table's apply, is emitted)."""
        self._check_expr(e)
        if isinstance(e, ir.Const):
            return self._const(e)
        if isinstance(e, ir.ErrorValue):
            return self._number(self.errors[e.name])
        if isinstance(e, ir.EnumValue):
            if e.value is not None:
                return self._number(e.value)
            return self._number([m for m, _ in self.enums[e.type.name].members].index(e.member))
        if isinstance(e, ir.Member) and isinstance(e.expr, ir.Lookahead):
            return self._lookahead_field(e, depth)
        if isinstance(e, ir.Var | ir.Member | ir.StackIndex):
            return self._read(e, depth)
        if isinstance(e, ir.Lookahead):
            return self._lookahead_bits(depth, e)
        if isinstance(e, ir.StackMember) and e.member == "lastIndex":
            return self._last_index(e.expr, depth)
        if isinstance(e, ir.HeaderMethod):
            if e.method != "isValid":
                raise UnsupportedError.at(f"{e.method} in an expression", e)
            return self._is_valid(e.header, depth)
        if isinstance(e, ir.ApplyResultMember):
            hit, action_run = self._apply(depth, e.apply.table)
            if e.member == "hit":
                return self._truth(hit)
            if e.member == "miss":
                return self._negation(hit)
            return action_run
        if isinstance(e, ir.Unary):
            return self._unary(e, depth)
        if isinstance(e, ir.Binary):
            return self._binary(e, depth)
        if isinstance(e, ir.Cast):
            return self._cast(e, depth)
        if isinstance(e, ir.Slice):
            return self._bits(self.expr(e.expr, depth), e.lo, e.hi - e.lo + 1)
        if isinstance(e, ir.Mux):
            cond, then, other = self.expr(e.cond, depth), self.expr(e.then, depth), self.expr(e.else_, depth)
            return self._mux(cond, then, other)
        raise UnsupportedError.at(f"expression {type(e).__name__}", e)

    def _lookahead_field(self, e: ir.Member, depth: int) -> str:
        """`pkt.lookahead<H>().f`: field f where it lies in the packet's next bits."""
        assert isinstance(e.expr, ir.Lookahead) and isinstance(e.expr.type, ir.HeaderType)
        bit = 0
        for f in self.program.header(e.expr.type.name).fields:
            width = ir.width_of(f.type)
            if f.name == e.field:
                return self._peek_field(depth, e.expr, bit, width, f.type)
            bit += width
        raise UnsupportedError.at(f"no field {e.field}", e)

    def _bits_of(self, t: ir.Type) -> int:
        """The bits a value of `t` takes in the packet (a header's: its fields', but a varbit field's)."""
        if isinstance(t, ir.HeaderType):
            return sum(ir.width_of(f.type) for f in ir.fixed_fields(self.program.header(t.name)))
        return ir.width_of(t)

    # ------------------------------------------------------------- operators
    # A value is the unsigned bit pattern of its type, W bits wide; an `int<W>` is read as signed
    # (`_signed`) only where the operation needs it: comparisons, `>>`, saturation and widening casts.
    # Each operation below is one rule for both languages; what differs is only spelled, in the hooks.

    def _unary(self, e: ir.Unary, depth: int) -> str:
        x = self.expr(e.expr, depth)
        if e.op == "!":
            return self._negation(x)
        if not isinstance(e.type, ir.BitType):
            return self._unbounded(e, f"({e.op}{x})")
        if e.op == "~":
            return f"({x} ^ {self._number(mask(e.type.width))})"
        return self._masked(self._neg(x), e.type.width)

    def _binary(self, e: ir.Binary, depth: int) -> str:
        op = e.op
        if op in ("&&", "||") and ir.contains_apply(e.right):
            raise UnsupportedError.at(f"table apply on the right of {op}", e)
        a, b = self.expr(e.left, depth), self.expr(e.right, depth)
        if op in ("&&", "||"):
            return self._truth(f"({a} {self._spell(op)} {b})")
        lt = e.left.type
        if op in ("==", "!="):
            if isinstance(lt, ir.VarbitType):
                return self._varbit_equality(op, a, b)
            return self._truth(f"({a} {op} {b})")
        if op in ("<", "<=", ">", ">="):
            if isinstance(lt, ir.BitType) and lt.signed:
                a, b = self._signed(a, lt.width), self._signed(b, lt.width)
            return self._truth(f"({a} {op} {b})")
        t = e.type
        if not isinstance(t, ir.BitType):
            return self._unbounded(e, f"({a} {self._spell(op)} {b})")
        w = t.width
        if op == "++":  # the left operand above the right one's bits
            return f"({self._shl(a, str(ir.width_of(e.right.type)))} | {b})"
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("+", "-", "*"):
            return self._masked(f"({a} {op} {b})", w)
        if op == "<<":
            return self._masked(self._shl(a, b), w)
        if op == ">>":
            if t.signed:  # arithmetic: the sign comes in from the left
                return self._masked(self._unsigned(self._sar(self._signed(a, w), b)), w)
            return self._shr(a, b)
        if op in ("/", "%"):
            if t.signed:
                raise UnsupportedError.at(f"{op} on signed values", e)
            return self._divide(e, a, b)
        if op in ("|+|", "|-|"):
            return self._saturating(e, a, b)
        raise UnsupportedError.at(f"operator {op}", e)

    def _cast(self, e: ir.Cast, depth: int) -> str:
        x = self.expr(e.expr, depth)
        src, dst = e.expr.type, e.type
        if isinstance(dst, ir.BoolType):
            return x if isinstance(src, ir.BoolType) else self._truth(f"({x} != 0)")
        if isinstance(dst, ir.BitType):
            if isinstance(src, ir.BoolType):
                return self._from_bool(x)
            if isinstance(src, ir.BitType):
                if src.signed and dst.width > src.width:  # widening an int<W>: its sign fills the new bits
                    return self._masked(self._unsigned(self._signed(x, src.width)), dst.width)
                if dst.width < src.width:
                    return self._masked(x, dst.width)
                return x
            return self._masked(x, dst.width)
        if isinstance(dst, ir.EnumType):
            return x
        raise UnsupportedError.at(f"cast to {dst}", e)

    def _bits(self, value: str, lo: int, width: int) -> str:
        """`value[lo + width - 1 : lo]`."""
        return self._masked(f"({value} >> {lo})", width)

    def _masked(self, code: str, width: int) -> str:
        """`code` cut to its low `width` bits."""
        return f"({code} & {self._number(mask(width))})"

    # ------------------------------------------------------------ assignment
    def store(self, depth: int, lhs: ir.Expr, value: str) -> None:
        """`lhs = value` for a scalar l-value: a local, a field, or a slice of either (the bits outside
        the slice kept, the value cut to the slice's width and shifted into place)."""
        if isinstance(lhs, ir.Slice):
            width = lhs.hi - lhs.lo + 1
            keep = mask(ir.width_of(lhs.expr.type)) ^ (mask(width) << lhs.lo)
            kept = f"(({self.expr(lhs.expr, depth)}) & {self._number(keep)})"
            put = f"({self._masked(self._unsigned(f'({value})'), width)} << {lhs.lo})"
            self.store(depth, lhs.expr, self._either(kept, put))
            return
        self._store(depth, lhs, value)

    def _assign(self, depth: int, lhs: ir.Expr, rhs: ir.Expr) -> None:
        """`lhs = rhs`: a scalar is stored; a header or struct is assigned from a list (field by field, in
        order; a header becomes valid), from `lookahead<T>()`, or copied whole."""
        if not is_composite(lhs.type):
            self.store(depth, lhs, self.expr(rhs, depth))
        elif isinstance(rhs, ir.ListExpr):
            self._assign_list(depth, lhs, rhs)
        elif isinstance(rhs, ir.Lookahead):
            self._assign_lookahead(depth, lhs, rhs)
        else:
            self._copy(depth, lhs, rhs)

    def _assign_list(self, depth: int, lhs: ir.Expr, items: ir.ListExpr) -> None:
        if isinstance(lhs.type, ir.HeaderType):
            self._set_valid(depth, lhs, True)
        for (name, t), item in zip(self._fields_of(lhs.type), items.elements):
            self._assign(depth, ir.Member(lhs, name, t, items.pos), item)

    def _fields_of(self, t: ir.Type) -> list[tuple[str, ir.Type]]:
        """(name, type) of each field of a header or struct type, in order."""
        assert isinstance(t, ir.HeaderType | ir.StructType)
        decl = self.program.header(t.name) if isinstance(t, ir.HeaderType) else self.program.struct(t.name)
        return [(f.name, f.type) for f in decl.fields]

    def lvalue(self, e: ir.Expr, depth: int = 0) -> str:
        """Code of the place a scalar is assigned to; anything else is not an l-value."""
        target = self._target(e, depth) if isinstance(e, ir.Var | ir.Member | ir.StackIndex) else None
        if target is None:
            raise UnsupportedError.at(f"cannot assign to {type(e).__name__}", e)
        return target

    # ---------------------------------------------------------------- externs
    def _extern_method(self, depth: int, call: ir.ExternMethodCall) -> None:
        """A method of a register, counter or meter instance, with bmv2's meaning."""
        kind = (call.extern, call.method)
        if kind == ("register", "read"):
            result, index = call.args
            self._register_read(depth, call, result, index)
        elif kind == ("register", "write"):
            index, value = call.args
            self._register_write(depth, call, index, value)
        elif kind == ("counter", "count"):
            self._counter_count(depth, call, call.args[0])
        elif kind == ("direct_counter", "count"):
            self._nothing(depth, "direct counters count on table hits")
        elif kind in (("meter", "execute_meter"), ("direct_meter", "read")):
            # No P4Runtime client can configure a meter here (MeterEntry is UNIMPLEMENTED), and an
            # unconfigured bmv2 meter marks every packet GREEN (0).
            self.store(depth, call.args[-1], "0")
        else:
            raise UnsupportedError.at(f"extern {call.extern}.{call.method}", call)

    def _extern_function(self, depth: int, call: ir.ExternFunctionCall) -> None:
        """A v1model extern function: what each one's arguments are, and which are refused."""
        name, args = call.name, call.args
        if name == "mark_to_drop":
            self._mark_to_drop(depth)
        elif name in ("verify_checksum", "update_checksum"):
            cond, data, target, algo = args
            if not isinstance(algo, ir.EnumValue) or algo.member != "csum16":
                raise UnsupportedError.at(f"{name} supports HashAlgorithm.csum16 only", call)
            self._checksum(depth, call, Checksum(name == "verify_checksum", cond, data, target))
        elif name == "hash":
            result, algo, base, data, maximum = args
            assert isinstance(algo, ir.EnumValue)
            self._hash(depth, call, Hash(result, algo.member, base, data, maximum))
        elif name == "random":
            result, lo, hi = args
            self._random(depth, result, lo, hi)
        elif name in ("log_msg", "assume", "assert"):
            self._nothing(depth, name)
        elif name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            (index,) = args
            self._again(depth, name, field_list_request(index))
        elif name in ("clone", "clone_preserving_field_list"):
            listed = field_list_request(args[2]) if len(args) > 2 else 0
            self._clone(depth, name, self.expr(args[1], depth), listed)
        elif name == "digest":
            assert isinstance(call.type_args[0], ir.StructType)
            self._digest(depth, call.type_args[0].name, args[1])
        else:
            raise UnsupportedError.at(f"extern function {name}", call)

    # How each backend spells the externs ...
    def _register_read(self, depth: int, call: ir.ExternMethodCall, result: ir.Expr, index: ir.Expr) -> None:
        """`result` = the cell at `index` (0 out of range, as bmv2)."""

    def _register_write(self, depth: int, call: ir.ExternMethodCall, index: ir.Expr, value: ir.Expr) -> None:
        """The cell at `index` = `value` (nothing out of range, as bmv2)."""

    def _counter_count(self, depth: int, call: ir.ExternMethodCall, index: ir.Expr) -> None:
        """One packet and its bytes more in cell `index` (nothing out of range)."""

    def _nothing(self, depth: int, why: str) -> None:
        """A statement that does nothing here (`why` says what it is)."""

    def _mark_to_drop(self, depth: int) -> None: ...
    def _checksum(self, depth: int, call: ir.ExternFunctionCall, spec: Checksum) -> None: ...
    def _hash(self, depth: int, call: ir.ExternFunctionCall, spec: Hash) -> None: ...
    def _random(self, depth: int, result: ir.Expr, lo: ir.Expr, hi: ir.Expr) -> None: ...
    def _again(self, depth: int, name: str, request: int) -> None:
        """resubmit/recirculate, with the field list request (index + 1); the last call of a pass wins."""

    def _clone(self, depth: int, name: str, session: str, request: int) -> None:
        """clone to `session` with the field list request (0: none; else index + 1)."""

    def _digest(self, depth: int, struct: str, data: ir.Expr) -> None:
        """digest<struct>(_, data): the data packed now, sent at the end of ingress."""

    # How each backend spells statements ...
    def tmp(self, prefix: str = "t") -> str:
        """A fresh name for a temporary."""

    def _let(self, depth: int, name: str, value: str, note: str = "") -> None:
        """A temporary `name` holding `value` (a note for the reader where the language keeps them)."""

    def _arm(self, depth: int, index: int, subject: str, labels: list[str] | None) -> None:
        """The head of arm `index` of a switch on `subject`: one of `labels` matches (None: any)."""

    def _close(self, depth: int) -> None:
        """The end of a switch arm or select case."""

    def _goto(self, depth: int, state: str) -> None:
        """Go on to parser state `state` (`accept`, `reject`: the parser ends)."""

    def _keyset(self, key: str, keyset: ir.KeysetValue | ir.KeysetMask | ir.KeysetRange) -> str:
        """The test that `key` matches `keyset`."""

    def _when(self, depth: int, tests: list[str], case: ir.SelectCase) -> None:
        """The head of a select case taken when all `tests` hold (none: always)."""

    def _no_match(self, depth: int) -> None:
        """No select case matched: the parser ends with error.NoMatch."""

    def _nested_block(self, depth: int, block: ir.Block) -> None: ...
    def _vardecl(self, depth: int, s: ir.VarDecl) -> None: ...
    def _if(self, depth: int, cond: str, then: ir.Block, other: ir.Block | None, s: ir.If) -> None: ...
    def _exit(self, depth: int) -> None: ...
    def _return(self, depth: int) -> None: ...
    def _verify(self, depth: int, cond: str, error: int, s: ir.Verify) -> None: ...
    def _store(self, depth: int, lhs: ir.Expr, value: str) -> None:
        """Assign `value` to a local or field (no slice)."""

    def _assign_lookahead(self, depth: int, lhs: ir.Expr, rhs: ir.Lookahead) -> None:
        """Fill header `lhs` from the packet's next bits, without moving past them; it becomes valid."""

    def _copy(self, depth: int, lhs: ir.Expr, rhs: ir.Expr) -> None:
        """Copy a header, struct or stack, validity bits included."""

    def _target(self, e: ir.Var | ir.Member | ir.StackIndex, depth: int) -> str | None:
        """Code of the place of a local or field; None when `e` is none."""

    def _either(self, kept: str, put: str) -> str:
        """The bits of `kept` or `put` (disjoint): a slice assignment's new value."""

    # ... and expressions.
    def _check_expr(self, e: ir.Expr) -> None:
        """Refuse, before its code is written, an expression this backend cannot hold."""

    def _const(self, e: ir.Const) -> str: ...
    def _number(self, value: int) -> str: ...
    def _read(self, e: ir.Var | ir.Member | ir.StackIndex, depth: int) -> str: ...
    def _peek_field(self, depth: int, e: ir.Lookahead, bit: int, width: int, t: ir.Type) -> str:
        """A field of `width` bits at bit `bit` of the packet's next bits (those of `e`), not moving past."""

    def _lookahead_bits(self, depth: int, e: ir.Lookahead) -> str: ...
    def _last_index(self, stack: ir.Expr, depth: int) -> str: ...
    def _is_valid(self, header: ir.Expr, depth: int) -> str: ...
    def _truth(self, flag: str) -> str:
        """A condition (a comparison, `&&`, a table's hit) as a value."""

    def _negation(self, flag: str) -> str: ...
    def _mux(self, cond: str, then: str, other: str) -> str: ...

    # ... and operators.
    def _spell(self, op: str) -> str:
        """An operator as the language writes it (`&&` is Python's `and`)."""

    def _signed(self, value: str, width: int) -> str:
        """The two's-complement value of a `width`-bit pattern."""

    def _unsigned(self, value: str) -> str:
        """A signed value (or a condition) as the unsigned type every value has."""

    def _neg(self, value: str) -> str: ...
    def _shl(self, value: str, amount: str) -> str:
        """`value << amount` for any amount (0 from the width of the value on)."""

    def _shr(self, value: str, amount: str) -> str:
        """Logical `value >> amount` for any amount."""

    def _sar(self, value: str, amount: str) -> str:
        """Arithmetic `>>` of a signed value (`_signed`) for any amount."""

    def _from_bool(self, value: str) -> str: ...
    def _divide(self, e: ir.Binary, a: str, b: str) -> str:
        """`a / b` or `a % b`, unsigned."""

    def _saturating(self, e: ir.Binary, a: str, b: str) -> str:
        """`a |+| b` or `a |-| b` at the width (and signedness) of `e.type`."""

    def _varbit_equality(self, op: str, a: str, b: str) -> str:
        """`a == b` or `a != b` of varbit values: the same length and the same bits."""

    def _unbounded(self, e: ir.Unary | ir.Binary, code: str) -> str:
        """An operator on values of no fixed width (`int`), written as `code` in this language."""


def field_list_request(index: ir.Expr) -> int:
    """What a resubmit, recirculate or clone call requests: its field list index + 1 (0 is no list)."""
    assert isinstance(index, ir.Const)
    return (int(index.value) & 0xFF) + 1


def where(node: object) -> str:
    """A node's source position for a comment or message ("?" when it has none)."""
    pos = getattr(node, "pos", None)
    return str(pos) if pos is not None else "?"


def is_composite(t: ir.Type) -> bool:
    """Whether values of `t` are headers, structs or stacks (assigned and copied whole, not as numbers)."""
    return isinstance(t, ir.HeaderType | ir.StructType | ir.StackType)


def mask(width: int) -> int:
    """The `width` low bits set."""
    return (1 << width) - 1


def cast_constant(value: ir.Const, to: ir.BitType) -> int:
    """The bit pattern of `(to) value`: an `int<W>` widened keeps its sign."""
    number, src = int(value.value), value.type
    if isinstance(src, ir.BitType) and src.signed and to.width > src.width and number >> (src.width - 1) & 1:
        number -= 1 << src.width
    return number & mask(to.width)


def contains(node: Any, kind: type) -> bool:
    """Whether a statement of `kind` occurs in `node` (not counting actions it calls)."""
    if isinstance(node, kind):
        return True
    if isinstance(node, ir.Block):
        return any(contains(s, kind) for s in node.stmts)
    if isinstance(node, ir.If):
        return contains(node.then, kind) or (node.else_ is not None and contains(node.else_, kind))
    if isinstance(node, ir.Switch):
        return any(c.body is not None and contains(c.body, kind) for c in node.cases)
    return False


def calls(node: Any) -> list[str]:
    """The actions `node` calls directly."""
    if isinstance(node, ir.CallStmt) and isinstance(node.call, ir.ActionCall):
        return [node.call.action]
    if isinstance(node, ir.Block):
        return [a for s in node.stmts for a in calls(s)]
    if isinstance(node, ir.If):
        return calls(node.then) + (calls(node.else_) if node.else_ is not None else [])
    if isinstance(node, ir.Switch):
        return [a for c in node.cases if c.body is not None for a in calls(c.body)]
    return []


def may_exit(actions: dict[str, ir.ActionDecl], action: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether `action` or an action it calls executes `exit`."""
    decl = actions[action]
    if contains(decl.body, ir.Exit):
        return True
    return any(may_exit(actions, a, seen | {action}) for a in calls(decl.body) if a not in seen)


def all_actions(program: ir.Program) -> dict[str, ir.ActionDecl]:
    actions = {a.fq_name: a for a in program.actions}
    for control in program.controls:
        actions.update({a.fq_name: a for a in control.actions})
    return actions


def all_instances(program: ir.Program) -> dict[str, ir.InstanceDecl]:
    instances = {i.fq_name: i for i in program.instances}
    for block in (*program.controls, *program.parsers):
        instances.update({i.fq_name: i for i in block.instances})
    return instances


def packet_types(program: ir.Program) -> tuple[ir.Type, ir.Type]:
    """The (headers, metadata) types every block shares; refused when parser and ingress disagree."""
    p, ig = program.block("p"), program.block("ig")
    hdr_type, meta_type = p.params[1].type, p.params[2].type
    if ig.params[1].type != meta_type or ig.params[0].type != hdr_type:
        raise UnsupportedError("ingress and parser disagree on the headers/metadata types")
    return hdr_type, meta_type


def block_roots(decl: ir.ParserDecl | ir.ControlDecl, first: int) -> dict[str, str]:
    """A block's parameter names -> the packet root each is bound to (hdr, meta, standard_metadata)."""
    return {prm.name: PACKET_ROOTS[i] for i, prm in enumerate(decl.params[first:]) if i < 3}


def digest_widths(info: p4i.P4Info) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Digest struct name -> (its index among the P4Info's digests, its members' widths)."""
    return {
        d.type_spec.struct.name: (index, digest_member_widths(info, d))
        for index, d in enumerate(info.digests)
    }


def preserved_fields(program: ir.Program) -> dict[int, list[tuple[str, ...]]]:
    """Field list index -> the user metadata fields `@field_list(index)` names, as paths under `meta`.

    A resubmitted, recirculated or cloned packet starts with fresh metadata except these fields, which
    keep the values they had when the pass ended (end of ingress, end of egress), as in bmv2.
    """
    out: dict[int, list[tuple[str, ...]]] = {}

    def walk(struct: str, prefix: tuple[str, ...]) -> None:
        for f in program.struct(struct).fields:
            path = (*prefix, f.name)
            for index in ir.field_lists(f.annotations):
                out.setdefault(index, []).append(path)
            if isinstance(f.type, ir.StructType) and not ir.field_lists(f.annotations):
                walk(f.type.name, path)

    _, meta_type = packet_types(program)
    if isinstance(meta_type, ir.StructType):
        walk(meta_type.name, ())
    return out
