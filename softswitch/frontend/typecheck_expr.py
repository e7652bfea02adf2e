"""Expression checking: name resolution, P4_16 typing rules, constant folding.

Int literals without a width take the type their context asks for (the other
operand, the assignment target, the parameter), as P4_16 specifies; sized
operands of different widths, or bit<W> against int<W>, or bool against
bit<1>, need an explicit cast, and the error says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from softswitch import ir

ARITH = {"+", "-", "*", "/", "%", "|+|", "|-|"}
BITWISE = {"&", "|", "^"}
EQUALITY = {"==", "!="}
ORDER = {"<", "<=", ">", ">="}
LOGIC = {"&&", "||"}
SHIFT = {"<<", ">>"}


class Fail(Exception):
    """An error was recorded; abandon the current statement or declaration."""


@dataclass
class TableInfo:
    name: str
    fq_name: str


@dataclass
class ActionInfo:
    name: str
    fq_name: str
    params: tuple[ir.Param, ...]


@dataclass
class FunctionInfo:
    """A P4 function, run as the hidden action `fq_name` whose last parameter (`out`) is the result.

    `params` are the function's own (directionless ones are `in`); `pure` is set when a call
    has no effect but its result (no out/inout parameter, no extern call with an effect), so
    that it may be evaluated ahead of a short-circuit operator's right-hand side.
    """

    name: str
    fq_name: str
    params: tuple[ir.Param, ...]
    returns: ir.Type
    pure: bool = False


@dataclass
class InstanceInfo:
    decl: ir.InstanceDecl


@dataclass
class ExternInfo:
    name: str
    type_params: tuple[str, ...]
    constructors: list[ir.MethodDecl] = field(default_factory=list)
    methods: dict[str, list[ir.MethodDecl]] = field(default_factory=dict)


@dataclass
class Scope:
    """A lexical scope: names -> ir.Var | ir.Expr (constant) | TableInfo | ActionInfo | InstanceInfo."""

    parent: Scope | None
    names: dict[str, Any] = field(default_factory=dict)

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None


@dataclass
class Context:
    """Where an expression is being checked (what calls are allowed there)."""

    scope: Scope
    block: str  # "parser" | "control" | "action" | "global"
    in_apply: bool = False  # directly in a control's apply body (tables may be applied)
    extract_target: bool = False  # checking the argument of extract (where stack.next is allowed)
    returns: ir.Type | None = None  # in a function's body: its return type (VoidType for void)


# The widest compile-time integer the checker computes with, literal or folded (p4c's limit is 2048 bits):
# beyond it a value costs time and memory without meaning anything (`1 << 903012108`), and Python
# refuses to convert decimal text of more than 4300 digits at all.
MAX_CONST_BITS = 4096
_BITS_PER_DIGIT = {16: 4, 2: 1, 8: 3, 10: 3.3219}


class ConstTooWide(ValueError):
    """A compile-time integer needs more than MAX_CONST_BITS bits (the message says which)."""


def parse_int(text: str) -> tuple[int, ir.Type]:
    """A P4 integer literal -> (value, type); `8w5` is bit<8>, `8s5` int<8>, plain is arbitrary `int`.

    Raises ConstTooWide for a literal (or a width) of more than MAX_CONST_BITS bits, before
    converting its digits.
    """
    width: int | None = None
    signed = False
    body = text.replace("_", "")
    for marker in ("w", "s"):
        if (
            marker in body
            and body[0].isdigit()
            and body.index(marker) > 0
            and body[: body.index(marker)].isdigit()
        ):
            head, body = body.split(marker, 1)
            if int(head[-6:]) > MAX_CONST_BITS or head[:-6].strip("0"):  # without converting it all
                raise ConstTooWide(f"integer literal wider than {MAX_CONST_BITS} bits")
            width, signed = int(head), marker == "s"
            break
    lower = body.lower()
    base = {"0x": 16, "0b": 2, "0o": 8, "0d": 10}.get(lower[:2], 0)
    digits = lower[2:] if base else lower
    base = base or 10
    if (len(digits.lstrip("0")) - 1) * _BITS_PER_DIGIT[base] > MAX_CONST_BITS:
        raise ConstTooWide(f"integer literal wider than {MAX_CONST_BITS} bits")
    value = int(digits, base)
    if value.bit_length() > MAX_CONST_BITS:
        raise ConstTooWide(f"integer literal wider than {MAX_CONST_BITS} bits")
    if width is None:
        return value, ir.InfIntType()
    return value, ir.BitType(width, signed)


def fit(value: int, t: ir.BitType) -> int:
    """The bit pattern of `value` in a W-bit field (two's complement for negatives)."""
    return value & ((1 << t.width) - 1)


def signed_value(value: int, t: ir.BitType) -> int:
    if t.signed and value >> (t.width - 1):
        return value - (1 << t.width)
    return value


def type_str(t: ir.Type) -> str:
    match t:
        case ir.BitType(width=w, signed=False):
            return f"bit<{w}>"
        case ir.BitType(width=w, signed=True):
            return f"int<{w}>"
        case ir.InfIntType():
            return "int"
        case ir.BoolType():
            return "bool"
        case ir.ErrorType():
            return "error"
        case ir.StringType():
            return "string"
        case ir.VoidType():
            return "void"
        case ir.MatchKindType():
            return "match_kind"
        case ir.EnumType(name=n) | ir.HeaderType(name=n) | ir.StructType(name=n) | ir.TypeVar(name=n):
            return n
        case ir.VarbitType(max_width=w):
            return f"varbit<{w}>"
        case ir.StackType(element=e, size=s):
            return f"{e.name}[{s}]"
        case ir.ExternType(name=n, type_args=args):
            return n + (f"<{', '.join(type_str(a) for a in args)}>" if args else "")
        case ir.TupleType(elements=els):
            return f"tuple<{', '.join(type_str(e) for e in els)}>"
        case _:
            return type(t).__name__


def is_const(e: ir.Expr) -> bool:
    return isinstance(e, ir.Const | ir.EnumValue | ir.ErrorValue)


def source_text(tree: Any) -> str:
    """The expression as p4c prints a key name: `hdr.ipv4.dst_addr`, `x[7:0]`, `h.isValid()`."""
    if isinstance(tree, Token):
        return str(tree)
    kind = tree.data
    ch = tree.children
    if kind in ("name_ref", "int_lit", "type_ref"):
        return str(ch[0])
    if kind == "dot_name_ref":
        return "." + str(ch[0])
    if kind in ("member", "type_member", "error_member"):
        head = "error" if kind == "error_member" else source_text(ch[0])
        return f"{head}.{ch[-1]}"
    if kind == "slice":
        return f"{source_text(ch[0])}[{source_text(ch[1])}:{source_text(ch[2])}]"
    if kind == "index":
        return f"{source_text(ch[0])}[{source_text(ch[1])}]"
    if kind == "call":
        args = ch[1].children if ch[1] is not None else []
        return f"{source_text(ch[0])}({', '.join(source_text(a) for a in args)})"
    return " ".join(source_text(c) for c in ch if c is not None)


def op_of(tree: Tree) -> str:
    tok = tree.children[1]
    return str(tok)


def lvalue_root(e: ir.Expr) -> ir.Expr:
    while isinstance(e, ir.Member | ir.Slice | ir.StackIndex | ir.StackMember):
        e = e.expr
    return e


def same_place(a: ir.Expr, b: ir.Expr) -> bool:
    """Whether two l-values name the same place (`meta.color` twice), wherever each is written."""
    if isinstance(a, ir.Var) and isinstance(b, ir.Var):
        return (a.name, a.kind) == (b.name, b.kind)
    if isinstance(a, ir.Member) and isinstance(b, ir.Member):
        return a.field == b.field and same_place(a.expr, b.expr)
    return a == b


PlacePath = tuple[str, ...]


def place_path(e: object) -> PlacePath | None:
    """`hdr.h.a` as ("hdr", "h", "a"); a slice as the field it slices; None if `e` is no place."""
    if isinstance(e, ir.Var):
        return (e.name,)
    if isinstance(e, ir.Member | ir.Slice):
        inner = place_path(e.expr)
        return inner + (e.field,) if inner is not None and isinstance(e, ir.Member) else inner
    if isinstance(e, ir.StackIndex) and isinstance(e.index, ir.Const):
        inner = place_path(e.expr)
        return None if inner is None else inner + (str(e.index.value),)
    return None


def reads(node: object) -> Iterator[PlacePath]:
    """The places an expression (or a call's arguments) reads, each as its whole path."""
    for n in ir.walk(node, stop=lambda n: place_path(n) is not None):
        path = place_path(n)
        if path is not None:
            yield path


def overlaps(a: PlacePath, b: PlacePath) -> bool:
    """Whether two places share storage (one is the other or contains it)."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]
