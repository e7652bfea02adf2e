# IR-CONTRACT: ready
"""The typed, resolved intermediate representation of a v1model P4_16 program.

This is the contract between the front end (preprocess, parse, check:
`softswitch.frontend`) and the executor, and the content of the device
config file that `p4reduce-p4c -o OUT.json` writes (`softswitch.program`).
Everything the executor needs is decided here, so it never looks at P4 text:

* every expression carries its `type`; int literals already have the type
  P4_16 gives them in context (`bit<W>`/`int<W>`), or `InfIntType` where
  the spec keeps them arbitrary-precision (e.g. constructor arguments);
* every name is resolved: `Var` (parameters, locals; names of kind "param"
  and "local" are unique within their parser/control, including locals of
  its actions and nested blocks: a declaration that reuses a name is
  renamed `name__N`; kind "action_param" names are unique within their
  action and may equal a param/local name), `Member` chains
  for fields, extern instances, tables and actions by their name;
  compile-time constants are folded into `Const`;
* calls are split by what they call (`ExternMethodCall`, `ExternFunctionCall`,
  `ActionCall`, `TableApply`, `HeaderMethod`, `Extract`, `Emit`);
* nodes carry `pos` (file, line, column of the original source, after
  preprocessing has been mapped back) for runtime error messages.

Names: `fq_name` of tables, actions and extern instances is the name P4Info
uses (`Ingress.job_table`, `NoAction`; an `@name` annotation is honoured).
Table action references, default actions and `ActionCall` use `fq_name`.
A table or instance is referenced from code by its `fq_name` as well.

Serialization: `to_json(node)` gives a plain JSON tree in which every node
is an object with `"_"` = class name; tuples become lists. `json_object`
reads it back, as `json.loads`'s object_hook.
`FORMAT_VERSION` is bumped on any incompatible change; additive changes
(new optional fields with defaults, new node classes) keep it.

Changes after the contract was published (additive only):
  issue 18 (wider subset, honest refusals):
  * `Lookahead` expression: `packet.lookahead<T>()` in a parser (T a header or bit<W>);
  * `StackMember` expression (`stack.next`, `.last`, `.lastIndex`) and `StackOp`
    call (`stack.push_front(n)`, `.pop_front(n)`): header stacks, see their docstrings
    for the run-time semantics every backend must follow;
  * `Slice` and `StackIndex` may now be assignment targets (l-values);
  * `VarDecl` may have a header, struct or header-stack type (locals are zeroed,
    headers invalid); action parameters may be headers/structs (copy-in/copy-out);
  * header fields may be `bool` or a serializable enum (serialized as their width);
  * `TableDecl.support_timeout` (the v1model `support_timeout` property);
  * `HeaderDecl.annotations` (e.g. @controller_header, which P4Info lists);
  * `TableEntry.priority` is set from `priority = N:` when the program gives one;
  * extern function calls `clone`, `clone_preserving_field_list`, `resubmit*`,
    `recirculate*`, `digest`, `random`, `truncate` may appear (semantics in
    docs/softswitch-compiler.md, "v1model semantics");
  * a metadata `Field`'s `@field_list(i, ...)` annotation (integer literals, read with
    `field_lists`) names what resubmit/recirculate keep.
  issue 30:
  * `TableEntry.priority` of every entry of a table with a ternary, range or optional key is
    its P4Runtime priority (higher wins), resolved as p4c and bmv2 do (`priority =`,
    `largest_priority_wins`, `priority_delta`, `@priority`; softswitch/frontend/entries.py);
    None elsewhere, and in configs written before.
  * P4 functions arrive as global `ActionDecl`s annotated `@hidden` with a last `out`
    parameter `result__` (softswitch/frontend/typecheck.py, `decl_function_decl`); a call
    is an `ActionCall`, in an expression preceded by its statement's `VarDecl` of the result.
  * `VarbitType` header fields (at most one per header, starting on a byte) and `Extract.size`: varbit
    fields, see VarbitType; `Binary` `==`/`!=` may compare two of them.
  * `StructDecl.union`: a `header_union` arrives as a struct whose fields are all headers, its
    semantics already written out as statements on its members (see StructDecl); a `StackType`'s
    `element` may be such a union (`U[N]`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

FORMAT = "p4reduce-softswitch-program"
FORMAT_VERSION = 1


# ---------------------------------------------------------------- positions


@dataclass(frozen=True, slots=True)
class Pos:
    """A place in the original source (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Annotation:
    """`@name(body)`; `value` is the unquoted string argument when there is exactly one."""

    name: str
    value: str | None = None
    body: str = ""


# -------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class BitType:
    """bit<W> (signed=False) or int<W> (signed=True)."""

    width: int
    signed: bool = False


@dataclass(frozen=True, slots=True)
class InfIntType:
    """The arbitrary-precision `int` of compile-time constants."""


@dataclass(frozen=True, slots=True)
class VarbitType:
    """varbit<max_width>: a header field of 0 to max_width bits (whole bytes), as long as the
    two-argument `extract` that filled it said (`Extract.size`); its length is part of its value
    (copies, `==`, emit, checksum and hash data all use the bits it holds, and only those)."""

    max_width: int


@dataclass(frozen=True, slots=True)
class BoolType:
    pass


@dataclass(frozen=True, slots=True)
class StringType:
    pass


@dataclass(frozen=True, slots=True)
class VoidType:
    pass


@dataclass(frozen=True, slots=True)
class ErrorType:
    pass


@dataclass(frozen=True, slots=True)
class MatchKindType:
    pass


@dataclass(frozen=True, slots=True)
class EnumType:
    """A named enum; `underlying` is set for serializable enums (`enum bit<8> E {...}`)."""

    name: str
    underlying: BitType | None = None


@dataclass(frozen=True, slots=True)
class HeaderType:
    """Reference to `Program.headers[...]` by name."""

    name: str


@dataclass(frozen=True, slots=True)
class StructType:
    """Reference to `Program.structs[...]` by name."""

    name: str


@dataclass(frozen=True, slots=True)
class StackType:
    """A header stack `H[size]`; `element` is a header, or a header union (a StructType whose
    declaration has `union`)."""

    element: HeaderType | StructType
    size: int


@dataclass(frozen=True, slots=True)
class TupleType:
    """Type of a list expression `{a, b}` (checksum and hash inputs)."""

    elements: tuple[Type, ...]


@dataclass(frozen=True, slots=True)
class ExternType:
    """An extern object type, e.g. register<bit<32>>, packet_in, counter."""

    name: str
    type_args: tuple[Type, ...] = ()


@dataclass(frozen=True, slots=True)
class TypeVar:
    """A type parameter of a generic extern/parser/control declaration (e.g. T of register<T>)."""

    name: str


@dataclass(frozen=True, slots=True)
class ApplyResultType:
    """What `table.apply()` returns: members hit, miss, action_run."""

    table: str


@dataclass(frozen=True, slots=True)
class ActionEnumType:
    """Type of `table.apply().action_run` (switch subject)."""

    table: str


Type = (
    BitType
    | VarbitType
    | InfIntType
    | BoolType
    | StringType
    | VoidType
    | ErrorType
    | MatchKindType
    | EnumType
    | HeaderType
    | StructType
    | StackType
    | TupleType
    | ExternType
    | ApplyResultType
    | ActionEnumType
    | TypeVar
)


# -------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Const:
    """A literal or folded constant.

    bool values are Python bools; bit<W> and int<W> values are bit patterns in
    [0, 2^W) (int<W> in two's complement); InfIntType values are Python ints.
    """

    type: Type
    value: int | bool
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class StringLit:
    value: str
    type: Type = StringType()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ErrorValue:
    """`error.Name`."""

    name: str
    type: Type = ErrorType()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class EnumValue:
    """`E.member`; `value` is the member's number for serializable enums, else None."""

    type: EnumType
    member: str
    value: int | None = None
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Var:
    """A parameter or local variable of the enclosing parser/control/action.

    `kind` is "param" (parser/control parameter), "action_param", or "local".
    `direction` is "in", "out", "inout" or "" (directionless).
    """

    name: str
    type: Type
    kind: str = "local"
    direction: str = ""
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Member:
    """Field access `expr.field` on a header or struct."""

    expr: Expr
    field: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class StackIndex:
    """`stack[index]` (index is a Const in this subset)."""

    expr: Expr
    index: Expr
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Unary:
    """op: "-" (negate), "~" (complement), "!" (logical not)."""

    op: str
    expr: Expr
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Binary:
    """op: + - * / % << >> & | ^ == != < <= > >= && || |+| |-| ++.

    Operands of arithmetic/bitwise/comparison ops have the same type; for
    shifts the right operand may have any unsigned type; for ++ the result
    width is the sum of the widths (signedness of the left operand).
    """

    op: str
    left: Expr
    right: Expr
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Slice:
    """`expr[hi:lo]` with constant bounds; type bit<hi-lo+1>."""

    expr: Expr
    hi: int
    lo: int
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Cast:
    """`(type) expr`."""

    type: Type
    expr: Expr
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Mux:
    """`cond ? then : else_`."""

    cond: Expr
    then: Expr
    else_: Expr
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ListExpr:
    """`{a, b, ...}`."""

    elements: tuple[Expr, ...]
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class HeaderMethod:
    """`hdr.isValid()` (bool), `hdr.setValid()`, `hdr.setInvalid()` (void)."""

    header: Expr
    method: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ExternMethodCall:
    """`instance.method(args)` on an extern instance declared in a control/parser or at top level.

    `instance` is the instance's fq_name (see `InstanceDecl`); `directions`
    gives each argument's parameter direction ("in", "out", "inout", "").
    """

    instance: str
    extern: str
    method: str
    args: tuple[Expr, ...]
    directions: tuple[str, ...]
    type: Type
    type_args: tuple[Type, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ExternFunctionCall:
    """A call of an extern function: mark_to_drop, verify_checksum, update_checksum, hash, ..."""

    name: str
    args: tuple[Expr, ...]
    directions: tuple[str, ...]
    type: Type
    type_args: tuple[Type, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Extract:
    """`packet.extract(header)` in a parser (`packet` is the packet_in parameter's name).

    `size` (bit<32>) is the second argument of `extract(header, size)`, the bits of the header's varbit
    field. As bmv2 checks it: not a multiple of 8 stops the parser with error.ParserInvalidArgument,
    fewer bytes left than the header then needs with PacketTooShort, more bits than the field's
    maximum with HeaderTooShort; nothing is extracted then.
    """

    packet: str
    header: Expr
    type: Type = VoidType()
    pos: Pos | None = None
    size: Expr | None = None


@dataclass(frozen=True, slots=True)
class Emit:
    """`packet.emit(header_or_struct)` in a deparser."""

    packet: str
    header: Expr
    type: Type = VoidType()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ActionCall:
    """Direct invocation of an action from an apply body or another action."""

    action: str
    args: tuple[Expr, ...]
    directions: tuple[str, ...]
    type: Type = VoidType()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableApply:
    """`table.apply()`; `table` is the table's fq_name."""

    table: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ApplyResultMember:
    """`table.apply().hit` / `.miss` (bool) / `.action_run` (switch subject)."""

    apply: TableApply
    member: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ActionRef:
    """A switch label naming an action (switch on `t.apply().action_run`); `action` is its fq_name."""

    action: str
    type: Type = VoidType()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Lookahead:
    """`packet.lookahead<T>()` in a parser: the next `width_of(T)` bits, not consumed.

    `type` is a HeaderType (the result is a valid header whose fields are those
    bits, read with `Member`) or a BitType. Fewer bits left than T needs: the
    parser stops with error.PacketTooShort, as for `extract`.
    """

    packet: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class StackMember:
    """`stack.next` (HeaderType), `stack.last` (HeaderType) or `stack.lastIndex` (bit<32>).

    Every header stack has a hidden `nextIndex` (0 at parser start).
    `next` is element nextIndex (only in `extract`, which then increments it;
    nextIndex == size: the parser stops with error.StackOutOfBounds);
    `last` is element nextIndex - 1 (nextIndex == 0: error.StackOutOfBounds);
    `lastIndex` is nextIndex - 1 (as bit<32>, so 0xFFFFFFFF when empty).
    """

    expr: Expr
    member: str
    type: Type
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class StackOp:
    """`stack.push_front(count)` / `stack.pop_front(count)`; `count` is a constant.

    push_front: element i moves to i + count (those past the end are lost),
    elements 0 .. count-1 become invalid, nextIndex = min(nextIndex + count, size).
    pop_front: element i moves to i - count, the last `count` elements become
    invalid, nextIndex = max(nextIndex - count, 0).
    """

    stack: Expr
    op: str
    count: int
    type: Type = VoidType()
    pos: Pos | None = None


Expr = (
    Const
    | StringLit
    | ErrorValue
    | EnumValue
    | Var
    | Member
    | StackIndex
    | Unary
    | Binary
    | Slice
    | Cast
    | Mux
    | ListExpr
    | HeaderMethod
    | ExternMethodCall
    | ExternFunctionCall
    | Extract
    | Emit
    | ActionCall
    | TableApply
    | ApplyResultMember
    | ActionRef
    | Lookahead
    | StackMember
    | StackOp
)


# --------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Assign:
    lhs: Expr
    rhs: Expr
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class CallStmt:
    """A call used as a statement (any call expression above)."""

    call: Expr
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class VarDecl:
    """Local variable declaration; `init` None means uninitialized (the executor zeroes it)."""

    name: str
    type: Type
    init: Expr | None = None
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Block:
    stmts: tuple[Stmt, ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Block
    else_: Block | None = None
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class SwitchCase:
    """Labels are ActionRef (action_run switch) or Const/EnumValue (expression switch).

    `body` None means fall through to the next case with a body.
    """

    labels: tuple[Expr, ...]
    is_default: bool
    body: Block | None
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """`switch (expr) { ... }`; for a table switch `expr` is ApplyResultMember(member="action_run")."""

    expr: Expr
    cases: tuple[SwitchCase, ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Exit:
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None = None
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Verify:
    """Parser `verify(cond, error.X)`: on false, the parser rejects with `error`."""

    cond: Expr
    error: ErrorValue
    pos: Pos | None = None


Stmt = Assign | CallStmt | VarDecl | Block | If | Switch | Exit | Return | Verify


# ------------------------------------------------------------------ parsers


@dataclass(frozen=True, slots=True)
class KeysetValue:
    value: int
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class KeysetMask:
    """`value &&& mask`: matches when (key & mask) == (value & mask)."""

    value: int
    mask: int
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class KeysetRange:
    """`lo .. hi`, inclusive."""

    lo: int
    hi: int
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class KeysetDefault:
    """`default` or `_`."""

    pos: Pos | None = None


Keyset = KeysetValue | KeysetMask | KeysetRange | KeysetDefault


@dataclass(frozen=True, slots=True)
class SelectCase:
    """One keyset per select key, matched elementwise; `next` is a state name, "accept" or "reject"."""

    keysets: tuple[Keyset, ...]
    next: str
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Select:
    """`select(keys) { cases }`; no matching case rejects with error.NoMatch."""

    keys: tuple[Expr, ...]
    cases: tuple[SelectCase, ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Goto:
    """`transition next;`"""

    next: str
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ParserState:
    name: str
    stmts: tuple[Stmt, ...]
    transition: Goto | Select
    pos: Pos | None = None


# ------------------------------------------------------------ declarations


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: Type
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True)
class HeaderDecl:
    name: str
    fields: tuple[Field, ...]
    pos: Pos | None = None
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True)
class StructDecl:
    """A struct; with `union`, a `header_union` (every field a header, at most one of them valid).

    A union is a struct to the backends: the front end writes its semantics out (setValid, extract
    and assignment of a member make the others invalid, `setInvalid` on a member makes all of them
    invalid, the union's `isValid()` is its members' `||`), so no backend needs to know.
    """

    name: str
    fields: tuple[Field, ...]
    pos: Pos | None = None
    union: bool = False


@dataclass(frozen=True, slots=True)
class EnumDecl:
    """members: (name, value) pairs; value is None for plain enums."""

    name: str
    underlying: BitType | None
    members: tuple[tuple[str, int | None], ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ConstDecl:
    """A top-level or local compile-time constant (already folded into its uses)."""

    name: str
    type: Type
    value: Expr
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """direction: "in", "out", "inout" or "" (directionless)."""

    name: str
    type: Type
    direction: str = ""
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class MethodDecl:
    name: str
    params: tuple[Param, ...]
    return_type: Type
    type_params: tuple[str, ...] = ()
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True)
class ExternDecl:
    """An extern object type (from the architecture include files)."""

    name: str
    type_params: tuple[str, ...]
    constructors: tuple[MethodDecl, ...]
    methods: tuple[MethodDecl, ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ExternFunctionDecl:
    name: str
    decl: MethodDecl
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class InstanceDecl:
    """An extern instance, e.g. `register<bit<32>>(4096) r;` or `counter(16, CounterType.packets) c;`.

    `args` are the constructor arguments (constants folded: Const/EnumValue).
    """

    name: str
    fq_name: str
    extern: str
    type_args: tuple[Type, ...]
    args: tuple[Expr, ...]
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ActionDecl:
    """An action; params are directional (set by the caller) then directionless (from the entry)."""

    name: str
    fq_name: str
    params: tuple[Param, ...]
    body: Block
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableKey:
    """`expr: match_kind`; `name` is the P4Info match-field name (source text or @name)."""

    expr: Expr
    match_kind: str
    name: str
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableActionRef:
    """An entry of `actions = {...}`; scope: "TABLE_AND_DEFAULT", "TABLE_ONLY" or "DEFAULT_ONLY"."""

    action: str
    scope: str = "TABLE_AND_DEFAULT"
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableActionCall:
    """An action with its (constant) arguments: default_action or an entry's action."""

    action: str
    args: tuple[Expr, ...]
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A static entry: one keyset per key (KeysetValue for exact, KeysetMask for ternary/lpm, ...)."""

    keysets: tuple[Keyset, ...]
    action: TableActionCall
    priority: int | None = None
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class TableDecl:
    """A table. `size` None means the target default (1024, as p4c reports it)."""

    name: str
    fq_name: str
    keys: tuple[TableKey, ...]
    actions: tuple[TableActionRef, ...]
    default_action: TableActionCall
    default_action_const: bool = False
    entries: tuple[TableEntry, ...] = ()
    entries_const: bool = False
    size: int | None = None
    direct_counter: str | None = None
    direct_meter: str | None = None
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None
    support_timeout: bool = False


@dataclass(frozen=True, slots=True)
class ParserDecl:
    """A parser; `locals` are variable declarations run at parser start, states include "start"."""

    name: str
    params: tuple[Param, ...]
    locals: tuple[VarDecl, ...]
    instances: tuple[InstanceDecl, ...]
    states: tuple[ParserState, ...]
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class ControlDecl:
    """A control. `locals` (variable declarations) are initialized before `apply` runs."""

    name: str
    params: tuple[Param, ...]
    locals: tuple[VarDecl, ...]
    instances: tuple[InstanceDecl, ...]
    actions: tuple[ActionDecl, ...]
    tables: tuple[TableDecl, ...]
    apply: Block
    annotations: tuple[Annotation, ...] = ()
    pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class PackageBinding:
    """One argument of the package instantiation: the package's parameter name and the block's name."""

    param: str
    block: str
    kind: str  # "parser" | "control"


@dataclass(frozen=True, slots=True)
class PackageInstance:
    """`V1Switch(MyParser(), ...) main;` — `blocks` in the package's parameter order.

    For v1model the params are p, vr, ig, eg, ck, dep.
    """

    package: str
    name: str
    blocks: tuple[PackageBinding, ...]
    pos: Pos | None = None
    # @pkginfo / @platform_property, their key-value pairs as JSON in the body (for the P4Info's pkg_info)
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True)
class Program:
    """A whole checked program."""

    arch: str
    source: str
    errors: tuple[str, ...]
    match_kinds: tuple[str, ...]
    enums: tuple[EnumDecl, ...]
    headers: tuple[HeaderDecl, ...]
    structs: tuple[StructDecl, ...]
    constants: tuple[ConstDecl, ...]
    externs: tuple[ExternDecl, ...]
    extern_functions: tuple[ExternFunctionDecl, ...]
    actions: tuple[ActionDecl, ...]
    instances: tuple[InstanceDecl, ...]
    parsers: tuple[ParserDecl, ...]
    controls: tuple[ControlDecl, ...]
    main: PackageInstance
    format_version: int = FORMAT_VERSION

    def header(self, name: str) -> HeaderDecl:
        return _by_name(self.headers, name, "header")

    def struct(self, name: str) -> StructDecl:
        return _by_name(self.structs, name, "struct")

    def parser(self, name: str) -> ParserDecl:
        return _by_name(self.parsers, name, "parser")

    def control(self, name: str) -> ControlDecl:
        return _by_name(self.controls, name, "control")

    def block(self, param: str) -> ParserDecl | ControlDecl:
        """The parser/control bound to package parameter `param` (v1model: p, vr, ig, eg, ck, dep)."""
        for b in self.main.blocks:
            if b.param == param:
                return self.parser(b.block) if b.kind == "parser" else self.control(b.block)
        raise KeyError(param)


def _by_name(items: tuple[Any, ...], name: str, what: str) -> Any:
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")


def fixed_fields(header: HeaderDecl) -> tuple[Field, ...]:
    """The fields of `header` that are not its varbit field."""
    return tuple(f for f in header.fields if not isinstance(f.type, VarbitType))


def varbit_field(header: HeaderDecl) -> tuple[int, Field] | None:
    """(bits of the fields before it, the field) of a header's varbit field, or None."""
    bit = 0
    for f in header.fields:
        if isinstance(f.type, VarbitType):
            return bit, f
        bit += width_of(f.type)
    return None


def width_of(t: Type) -> int:
    """Bit width of a fixed-width scalar type (bit/int, bool = 1, serializable enum)."""
    if isinstance(t, BitType):
        return t.width
    if isinstance(t, BoolType):
        return 1
    if isinstance(t, EnumType) and t.underlying is not None:
        return t.underlying.width
    raise TypeError(f"{t} has no fixed width")


def is_scalar(t: Type) -> bool:
    """Whether `t` has a fixed width (`width_of` answers): bit/int, bool, serializable enum."""
    return isinstance(t, BitType | BoolType) or (isinstance(t, EnumType) and t.underlying is not None)


# ------------------------------------------------------------ serialization

_CLASSES: dict[str, type] = {
    name: obj
    for name, obj in dict(globals()).items()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj)
}


def to_json(node: Any) -> Any:
    """A JSON-compatible tree of `node` (dataclasses become objects tagged with `"_"`)."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        out: dict[str, Any] = {"_": type(node).__name__}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if f.default is not dataclasses.MISSING and value == f.default:
                continue
            out[f.name] = to_json(value)
        return out
    if isinstance(node, tuple | list):
        return [to_json(v) for v in node]
    return node


class FormatError(ValueError):
    """The JSON tree is not a valid IR tree."""


class _Plain(dict):  # type: ignore[type-arg]
    """A JSON object without a node tag: only the compiled file's outer document may be one."""


def json_object(data: dict[str, Any]) -> Any:
    """The inverse of `to_json`, as `json.loads`'s object_hook: each node is built as the parser closes
    its object, without a second walk over the parsed tree (which made loading p4reduce.json, at every
    switch start and pipeline push, take 0.67 s instead of 0.52). Sequences become tuples. Raises
    FormatError on an unknown node class, bad fields, or an untagged object in a node."""
    tag = data.get("_")
    if tag is None:
        return _Plain(data)
    cls = _CLASSES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise FormatError(f"unknown IR node {tag!r}")
    kwargs = {k: _field(v) for k, v in data.items() if k != "_"}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise FormatError(f"bad {tag} node: {exc}") from None


def _field(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_field(v) for v in value)
    if isinstance(value, _Plain):
        raise FormatError("unknown IR node None")
    return value


def walk(node: object, stop: Callable[[object], bool] | None = None) -> Iterator[object]:
    """Every IR node under `node` (statements and expressions), in source order; below a node for
    which `stop` says True, nothing."""
    if isinstance(node, tuple):
        for item in node:
            yield from walk(item, stop)
        return
    if not hasattr(node, "__dataclass_fields__"):
        return
    yield node
    if stop is not None and stop(node):
        return
    for name in node.__dataclass_fields__:  # type: ignore[attr-defined]
        if name not in ("type", "pos"):
            yield from walk(getattr(node, name), stop)


def flat(stmts: tuple[Stmt, ...] | list[Stmt]) -> Iterator[Stmt]:
    """The statements of a block with nested blocks spliced in, as p4c's SimplifyControlFlow leaves
    them: what its back ends see (softswitch/targets)."""
    for stmt in stmts:
        if isinstance(stmt, Block):
            yield from flat(stmt.stmts)
        else:
            yield stmt


def contains_apply(node: object) -> bool:
    """Whether evaluating `node` applies a table (both backends apply tables before the expression)."""
    if isinstance(node, ApplyResultMember | TableApply):
        return True
    if isinstance(node, Binary):
        return contains_apply(node.left) or contains_apply(node.right)
    if isinstance(node, Unary | Cast):
        return contains_apply(node.expr)
    return False


def field_lists(annotations: tuple[Annotation, ...]) -> tuple[int, ...]:
    """The indices of a metadata field's `@field_list(i, j, ...)` (integer literals); ValueError if not."""
    out: list[int] = []
    for a in annotations:
        if a.name == "field_list":
            out += [int(part.strip(), 0) for part in a.body.split(",")]
    return tuple(out)


def keyset_match(keyset: Keyset, kind: str, width: int) -> int | tuple[int, int] | None:
    """A program entry's keyset as the P4Runtime match of a key of `kind` and `width` (None: wildcard):
    runtime.state's FieldMatch. Here, with the IR, because the front end (duplicate entries) and the
    backends (installing the entries) both need it.

    Two entries of a table collide exactly when their matches (and priorities) are equal.
    """
    full = (1 << width) - 1
    if isinstance(keyset, KeysetDefault):
        return None
    if isinstance(keyset, KeysetValue):
        value = keyset.value & full
        if kind == "lpm":
            return (value, width)
        if kind == "ternary":
            return (value, full)
        if kind == "range":
            return (value, value)
        return value
    if isinstance(keyset, KeysetMask):
        if kind == "lpm":
            prefix = bin(keyset.mask & full).count("1")
            return (keyset.value & keyset.mask & full, prefix) if prefix else None
        return (keyset.value & keyset.mask & full, keyset.mask & full) if keyset.mask & full else None
    return (keyset.lo, keyset.hi)
