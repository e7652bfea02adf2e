"""Parse tree -> typed, resolved IR (`softswitch.ir`), with p4c-like error checking.

One pass in declaration order (P4 requires declaration before use). Errors
are collected: a bad declaration or statement is reported and skipped, and
checking goes on, so one run reports as many problems as it can; if any
was found, `check` raises CompileError with all of them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lark import Token, Tree

from softswitch import ir
from softswitch.frontend import entries as table_entries
from softswitch.frontend import stack_index, subset, unions
from softswitch.frontend.diagnostics import CompileError, Diagnostic
from softswitch.frontend.inline import Alias, BlockParts, Inliner, renamed_transition, same_expr
from softswitch.frontend.parser import RAW_STRUCTURED, annotation_body
from softswitch.frontend.preprocess import P4INCLUDE, Preprocessed
from softswitch.frontend.typecheck_expr import (
    ARITH,
    BITWISE,
    EQUALITY,
    LOGIC,
    MAX_CONST_BITS,
    ORDER,
    SHIFT,
    ActionInfo,
    ConstTooWide,
    Context,
    ExternInfo,
    Fail,
    FunctionInfo,
    InstanceInfo,
    PlacePath,
    Scope,
    TableInfo,
    fit,
    is_const,
    lvalue_root,
    overlaps,
    parse_int,
    place_path,
    reads,
    same_place,
    signed_value,
    source_text,
    type_str,
)
from softswitch.p4info import DEFAULT_TABLE_SIZE

_UNSUPPORTED_DECLS = {
    "value_set_decl": "value sets",
    "newtype_decl": "type declarations (type T ...; use typedef)",
}
# Extern methods the executor implements (the objects themselves: subset.EXTERNS).
_EXTERN_METHODS = {
    ("register", "read"),
    ("register", "write"),
    ("counter", "count"),
    ("direct_counter", "count"),
    ("meter", "execute_meter"),
    ("direct_meter", "read"),
}
_CALLS = ("call", "generic_call", "generic_method_call")
_GENERIC_PACKET_METHODS = {("packet_in", "extract"), ("packet_out", "emit")}
RESULT = "result__"  # the `out` parameter that takes a function's result
PURE_EXTERN_CALLS = frozenset({"hash", "static_assert", "log_msg"})  # calls with no effect but their result
_TABLE_SCOPES = {"defaultonly": "DEFAULT_ONLY", "tableonly": "TABLE_ONLY"}
_BUILTIN_VERIFY = "verify"


def check(tree: Tree, pre: Preprocessed, source: str) -> ir.Program:
    return _Checker(pre, source).program(tree)


def _from_arch(pos: ir.Pos) -> bool:
    """Whether `pos` is in our core.p4/v1model.p4 (whose block type declarations a program may reuse)."""
    return Path(pos.file).resolve().parent == P4INCLUDE


def _reaches_accept(states: Sequence[ir.ParserState]) -> bool:
    """Whether some chain of transitions leads from `start` to `accept`."""
    nexts = {
        s.name: [s.transition.next]
        if isinstance(s.transition, ir.Goto)
        else [c.next for c in s.transition.cases]
        for s in states
    }
    seen: set[str] = set()
    todo = ["start"]
    while todo:
        name = todo.pop()
        if name == "accept":
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(nexts.get(name, []))
    return False


# What a program entry may give for a key of each match kind that takes less than every keyset form.
_ENTRY_KEYSETS: dict[str, tuple[type, ...]] = {
    "exact": (ir.KeysetValue,),
    "optional": (ir.KeysetValue, ir.KeysetDefault),
}


@dataclasses.dataclass(frozen=True)
class RefusedType:
    """A type declared (and checked) but refused where it is used: a typedef of a tuple."""

    message: str


def annotation_value(annotations: Sequence[ir.Annotation], name: str) -> str | None:
    for a in annotations:
        if a.name == name:
            return a.value
    return None


def has_annotation(annotations: Sequence[ir.Annotation], name: str) -> bool:
    return any(a.name == name for a in annotations)


class _Checker(Inliner):
    def __init__(self, pre: Preprocessed, source: str) -> None:
        self.init_inliner()
        self.pre = pre
        self.source = source
        self.diagnostics: list[Diagnostic] = []
        self.types: dict[str, Any] = {}  # name -> ir.Type, ExternInfo, ("parser"|"control"|"package", params)
        self.type_origin: dict[str, ir.Pos] = {}
        self.globals = Scope(None)
        self.errors: list[str] = []
        self.match_kinds: list[str] = []
        self.enums: dict[str, ir.EnumDecl] = {}
        self.headers: dict[str, ir.HeaderDecl] = {}
        self.structs: dict[str, ir.StructDecl] = {}
        self.constants: list[ir.ConstDecl] = []
        self.externs: dict[str, ExternInfo] = {}
        self.extern_decls: list[ir.ExternDecl] = []
        self.functions: dict[str, list[ir.MethodDecl]] = {}
        self.function_decls: list[ir.ExternFunctionDecl] = []
        self.actions: list[ir.ActionDecl] = []
        self.instances: list[ir.InstanceDecl] = []
        self.parsers: dict[str, ir.ParserDecl] = {}
        self.controls: dict[str, ir.ControlDecl] = {}
        self.main: ir.PackageInstance | None = None
        # direct_meter fq name -> its read calls' destinations (bmv2 needs one, and the same, for each)
        self.meter_reads: dict[str, list[tuple[ir.Expr, ir.Pos]]] = {}
        # while a statement is checked: what must run before it (the calls of functions in its
        # expressions, each into a fresh local); None where no statement can go first
        self.hoisted: list[ir.Stmt] | None = None
        self.lowering_select = False  # while a select's keys are checked: they may index stacks at run time
        self.pure: dict[str, bool] = {}  # function -> FunctionInfo.pure
        self.action_trees: dict[str, tuple[Tree, Scope]] = {}  # action -> its declaration and scope
        self.ctor_params: dict[str, tuple[ir.Param, ...]] = {}  # parser/control -> constructor parameters
        # action -> the arguments a table's action list binds its directional parameters to, and where
        self.bound_actions: dict[str, tuple[tuple[ir.Expr, ...], ir.Pos]] = {}
        # per block
        self.used_names: set[str] = set()
        self.block_name = ""
        self.block_tables: dict[str, ir.TableDecl] = {}

    # ------------------------------------------------------------ helpers

    def pos(self, node: Any) -> ir.Pos:
        if isinstance(node, Token):
            return self.pre.pos(node.line or 0, node.column or 0)
        meta = getattr(node, "meta", None)
        if meta is not None and not getattr(meta, "empty", True):
            return self.pre.pos(meta.line, meta.column)
        return ir.Pos("<unknown>", 0, 0)

    def error(self, node: Any, message: str) -> Fail:
        self.diagnostics.append(Diagnostic(self.pos(node), message))
        return Fail()

    def attempt(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Fail:
            return None

    # ------------------------------------------------------------ program

    def program(self, tree: Tree) -> ir.Program:
        for decl in tree.children:
            try:
                self.attempt(lambda decl=decl: self.declaration(decl))
            except (RecursionError, MemoryError):
                self.error(decl, "unsupported: this declaration is too deeply nested or too large")
            except Exception as exc:  # a checker bug must still end in a diagnostic, never a traceback
                self.error(decl, f"internal compiler error: {type(exc).__name__}: {exc}")
        self.drop_inlined_only()
        self.check_constructed()
        self.check_bound_actions()
        self.check_structured(tree)
        self.check_control_plane_names()
        self.check_direct_meters()
        if self.main is None and not self.diagnostics:
            self.diagnostics.append(
                Diagnostic(None, "no package instantiation named 'main' (e.g. V1Switch(...) main;)")
            )
        if self.diagnostics:
            raise CompileError(self.diagnostics)
        assert self.main is not None
        return ir.Program(
            arch="v1model",
            source=self.source,
            errors=tuple(self.errors),
            match_kinds=tuple(self.match_kinds),
            enums=tuple(self.enums.values()),
            headers=tuple(self.headers.values()),
            structs=tuple(self.structs.values()),
            constants=tuple(self.constants),
            externs=tuple(self.extern_decls),
            extern_functions=tuple(self.function_decls),
            actions=tuple(self.actions),
            instances=tuple(self.instances),
            parsers=tuple(self.parsers.values()),
            controls=tuple(self.controls.values()),
            main=self.main,
        )

    def drop_inlined_only(self) -> None:
        """Parsers and controls only instantiated inside others are not blocks of their own: their
        declarations were checked, and live on, inlined, in the blocks that instantiate them."""
        bound = {b.block for b in self.main.blocks} if self.main is not None else set()
        for name in self.inlined - bound:
            self.parsers.pop(name, None)
            self.controls.pop(name, None)

    def declaration(self, d: Tree) -> None:
        kind = d.data
        if kind in _UNSUPPORTED_DECLS:
            raise self.error(d, f"unsupported: {_UNSUPPORTED_DECLS[kind]}")
        handler = getattr(self, "decl_" + kind, None)
        if handler is None:
            if kind == "empty_decl":
                return
            raise self.error(d, f"unsupported: {kind.replace('_', ' ')}")
        handler(d)

    def check_name(self, node: Any, name: str) -> None:
        if name in subset.KEYWORDS:
            raise self.error(node, f"{name} is a reserved keyword and cannot name a declaration")

    def declare_global(self, node: Any, name: str, value: Any) -> None:
        self.check_name(node, name)
        if self.globals.lookup(name) is not None or name in self.types:
            raise self.error(node, f"{name}: duplicate declaration")
        self.globals.names[name] = value

    def declare_type(self, node: Any, name: str, value: Any, *, overridable: bool = False) -> None:
        self.check_name(node, name)
        if name in self.types and not (overridable and _from_arch(self.type_origin[name])):
            raise self.error(node, f"{name}: duplicate declaration")
        if self.globals.lookup(name) is not None:
            raise self.error(node, f"{name}: duplicate declaration")
        self.types[name] = value
        self.type_origin[name] = self.pos(node)

    # ------------------------------------------------------------ annotations

    def annotations(self, tree: Tree | None) -> tuple[ir.Annotation, ...]:
        if tree is None:
            return ()
        out = []
        for a in tree.children:
            name = str(a.children[0])
            if a.data == "raw_annotation":  # free-form: kept as written (parser._raw_bodies)
                raw = str(a.children[1])
                if raw[0] == RAW_STRUCTURED:  # its values (checked, and reported, in check_structured)
                    items = self.quietly(lambda a=a: self.structured_items(a)) or []
                    out.append(ir.Annotation(name, None, f"[{json.dumps(items)}]"))
                else:
                    out.append(ir.Annotation(name, None, raw[1:-1].strip()))
                continue
            args = a.children[1] if len(a.children) > 1 else None
            value = None
            body = ""
            if args is not None:
                parts = args.children
                body = ", ".join(source_text(p) for p in parts)
                if len(parts) == 1 and isinstance(parts[0], Tree) and parts[0].data == "string_lit":
                    value = str(parts[0].children[0])[1:-1]
                elif len(parts) == 1 and isinstance(parts[0], Tree) and parts[0].data == "int_lit":
                    value = str(self.literal(parts[0])[0])
            out.append(ir.Annotation(name, value, body))
        return tuple(out)

    def quietly(self, fn: Callable[[], Any]) -> Any:
        """`fn()`, or None if it failed, with whatever it reported taken back."""
        count = len(self.diagnostics)
        try:
            return fn()
        except Fail:
            del self.diagnostics[count:]
            return None

    def structured_items(self, a: Tree) -> list[list[Any]]:
        """A structured annotation's values as P4Info lists them: `[[key or None, int | bool | str], ...]`."""
        name, raw = str(a.children[0]), str(a.children[1])
        body = annotation_body(raw[1:-1])
        if body is None:
            raise self.error(a, f"@{name}: a structured annotation holds expressions or key = value pairs")
        pairs = (
            [(str(i.children[0]), i.children[1]) for i in body.children]
            if body.data == "annotation_kvs"
            else [(None, e) for e in body.children]
        )
        out: list[list[Any]] = []
        for key, t in pairs:
            if key is not None and any(k == key for k, _ in out):
                raise self.error(a, f"@{name}: duplicate key {key}")
            count = len(self.diagnostics)
            try:
                e = self.expr(t, Context(self.globals, "global"), None)
            except Fail:  # located in the body's own text: say it at the annotation
                message = self.diagnostics[count].message
                del self.diagnostics[count:]
                raise self.error(a, f"@{name}: {message}") from None
            if isinstance(e, ir.Const) and isinstance(e.type, ir.BitType | ir.InfIntType | ir.BoolType):
                value: Any = e.value if isinstance(e.value, bool) else int(e.value)
            elif isinstance(e, ir.StringLit):
                value = e.value
            else:
                kinds = "a structured annotation holds int, string or bool values"
                raise self.error(a, f"@{name}: {source_text(t)}: {kinds}")
            out.append([key, value])
        return out

    def package_info(self, ann: Tree | None) -> tuple[ir.Annotation, ...]:
        """The package instance's @pkginfo(k = v, ...) and @platform_property(k = v, ...), whose values
        p4c puts in the P4Info's pkg_info (kept as a structured annotation keeps its values)."""
        out = []
        for a in ann.children if ann is not None else []:
            name = str(a.children[0])
            if name in ("pkginfo", "platform_property") and a.data == "raw_annotation":
                items = self.structured_items(a)
                want = str if name == "pkginfo" else int
                if any(key is None or type(value) is not want for key, value in items):
                    raise self.error(a, f"@{name}: expects key = value pairs of {want.__name__} values")
                out.append(ir.Annotation(name, None, f"[{json.dumps(items)}]"))
        return tuple(out)

    def check_structured(self, tree: Tree) -> None:
        """Every structured annotation's values are constants of int, string or bool, and no
        declaration has two annotations of its name, as p4c demands (wherever it is)."""
        for node in tree.iter_subtrees():
            if node.data != "annotations":
                continue
            names = [str(a.children[0]) for a in node.children]
            for a in node.children:
                if a.data == "raw_annotation" and str(a.children[1])[0] == RAW_STRUCTURED:
                    name = str(a.children[0])
                    if names.count(name) > 1:
                        self.error(a, f"@{name}: duplicate name for a structured annotation")
                    self.attempt(lambda a=a: self.structured_items(a))

    # ------------------------------------------------------------ types

    def resolve_type(self, t: Any, type_vars: Sequence[str] = ()) -> ir.Type:
        if isinstance(t, Token):
            raise self.error(t, f"unexpected {t}")
        kind = t.data
        if kind == "bool_type":
            return ir.BoolType()
        if kind == "error_type":
            return ir.ErrorType()
        if kind == "match_kind_type":
            return ir.MatchKindType()
        if kind == "string_type":
            return ir.StringType()
        if kind == "void_type":
            return ir.VoidType()
        if kind == "infint_type":
            return ir.InfIntType()
        if kind == "bit1_type":
            return ir.BitType(1)
        if kind in ("bit_type", "int_type"):
            width = self.const_int(
                t.children[-1]
                if not isinstance(t.children[-1], Token) or t.children[-1].type == "NUMBER"
                else t.children[1]
            )
            if width <= 0:
                raise self.error(t, f"width of {kind[:-5]}<{width}> must be positive")
            if width > subset.MAX_WIDTH:
                raise self.error(
                    t, f"unsupported: {kind[:-5]}<{width}> is wider than {subset.MAX_WIDTH} bits"
                )
            return ir.BitType(width, kind == "int_type")
        if kind == "varbit_type":
            width = self.const_int(t.children[-1])
            if width <= 0:
                raise self.error(t, f"varbit<{width}>: invalid type size")
            if width > subset.MAX_WIDTH:
                raise self.error(t, f"unsupported: varbit<{width}> is wider than {subset.MAX_WIDTH} bits")
            return ir.VarbitType(width)
        if kind == "tuple_type":
            raise self.error(t, "unsupported: tuple types")
        if kind == "named_type":
            name = str(t.children[0])
            if name in type_vars:
                return ir.TypeVar(name)
            found = self.types.get(name)
            if found is None:
                raise self.error(t, f"{name}: undeclared type")
            if isinstance(found, RefusedType):
                raise self.error(t, found.message)
            if isinstance(found, ExternInfo):
                return ir.ExternType(name)
            if isinstance(found, tuple):
                raise self.error(
                    t, f"unsupported: {found[0]} type {name} used as a value (nested parsers and controls)"
                )
            return found
        if kind == "generic_type":
            name = str(t.children[0])
            found = self.types.get(name)
            args = tuple(self.resolve_type(a, type_vars) for a in t.children[-1].children)
            if isinstance(found, ExternInfo):
                if len(args) != len(found.type_params):
                    raise self.error(
                        t, f"{name}: expects {len(found.type_params)} type arguments, got {len(args)}"
                    )
                return ir.ExternType(name, args)
            if found is None:
                raise self.error(t, f"{name}: undeclared type")
            if isinstance(found, tuple) and found[0] in ("parser", "control"):
                return ir.ExternType(name, args)
            raise self.error(t, f"unsupported: type arguments on {name}")
        if kind == "stack_type":
            elem = self.types.get(str(t.children[0]))
            if not isinstance(elem, ir.HeaderType) and not self.is_union(elem):
                raise self.error(t, f"{t.children[0]}: header stacks must hold headers or header unions")
            size = self.const_int(t.children[1])
            if not 0 < size <= subset.MAX_STACK_SIZE:
                raise self.error(t, f"unsupported: header stack size {size} (1 to {subset.MAX_STACK_SIZE})")
            return ir.StackType(elem, size)
        if kind == "dontcare_type":
            raise self.error(t, "unsupported: don't-care type arguments")
        raise self.error(t, f"unsupported type {kind}")

    def const_int(self, tree: Any) -> int:
        if isinstance(tree, Token):
            return self.literal(tree)[0]
        e = self.expr(tree, Context(self.globals, "global"), None)
        if not isinstance(e, ir.Const) or isinstance(e.value, bool):
            raise self.error(tree, "expected a compile-time integer constant")
        if isinstance(e.type, ir.BitType):
            return signed_value(int(e.value), e.type)
        return int(e.value)

    # ------------------------------------------------------------ simple declarations

    def decl_const_decl(self, d: Tree, scope: Scope | None = None) -> ir.ConstDecl:
        ann, t, name, value = d.children
        typ = self.resolve_type(t)
        target = scope or self.globals
        e = self.expr(value, Context(target, "global"), typ)
        if scope is None and str(name.children[0]) == "__v1model_version":
            self.check_v1model_version(e, value)
        e = self.coerce(e, typ, value)
        if not is_const(e):
            raise self.error(value, f"{name}: initializer is not a compile-time constant")
        decl = ir.ConstDecl(str(name.children[0]), typ, e, self.pos(d))
        if scope is None:
            self.declare_global(name, decl.name, e)
            self.constants.append(decl)
        else:
            self.declare_local(scope, name, decl.name, e)
        return decl

    def check_v1model_version(self, e: ir.Expr, value: Tree) -> None:
        """v1model.p4's `__v1model_version` (the program's V1MODEL_VERSION): one p4c knows, as p4c checks."""
        if not isinstance(e, ir.Const) or isinstance(e.value, bool) or int(e.value) < 0:
            raise self.error(value, "expected v1model version to be a non-negative number")
        first, latest = subset.V1MODEL_VERSIONS
        if not first <= int(e.value) <= latest:
            known = f"initial supported version is {first}, latest is {latest}"
            raise self.error(value, f"{e.value}: unknown v1model version; {known}")

    def decl_typedef_decl(self, d: Tree) -> None:
        _ann, t, name = d.children
        if isinstance(t, Tree) and t.data == "tuple_type":  # checked now, refused where it is used
            for arg in t.children[0].children:
                self.resolve_type(arg)
            self.declare_type(name, str(name.children[0]), RefusedType("unsupported: tuple types"))
            return
        self.declare_type(name, str(name.children[0]), self.resolve_type(t))

    def fields(self, items: list[Tree], owner: str) -> tuple[ir.Field, ...]:
        out: list[ir.Field] = []
        seen: set[str] = set()
        for f in items:
            ann, t, fname = f.children
            if str(fname) in seen:
                self.error(fname, f"{owner}.{fname}: duplicate field")
                continue
            seen.add(str(fname))
            typ = self.attempt(lambda t=t: self.resolve_type(t))
            annotations = self.annotations(ann)
            try:
                ir.field_lists(annotations)
            except ValueError:
                self.error(f, "unsupported: @field_list with an index that is not an integer literal")
            if typ is not None:
                out.append(ir.Field(str(fname), typ, annotations))
        return tuple(out)

    def decl_header_decl(self, d: Tree) -> None:
        ann, name, *rest = d.children
        hname = str(name.children[0])
        if rest and isinstance(rest[0], Tree) and rest[0].data == "type_params":
            raise self.error(d, "unsupported: generic headers")
        self.declare_type(name, hname, ir.HeaderType(hname))
        fields = self.fields(rest, hname)
        kept = tuple(f for f in fields if ir.is_scalar(f.type) or isinstance(f.type, ir.VarbitType))
        for f in fields:
            if f not in kept:
                self.error(
                    d,
                    f"unsupported: header field {hname}.{f.name} of type {type_str(f.type)} "
                    "(header fields are bit<W>, int<W>, bool, a serializable enum or varbit<W> here)",
                )
        decl = ir.HeaderDecl(hname, kept, self.pos(d), self.annotations(ann))
        self.check_varbit_header(d, decl)
        total = sum(ir.width_of(f.type) for f in ir.fixed_fields(decl))
        if total % 8:
            self.error(d, f"unsupported: header {hname} is {total} bits, not a whole number of bytes")
        self.headers[hname] = decl

    def check_varbit_header(self, d: Tree, decl: ir.HeaderDecl) -> None:
        """At most one varbit field (as p4c), starting on a byte, and none in a controller header."""
        varbits = [f.name for f in decl.fields if isinstance(f.type, ir.VarbitType)]
        if len(varbits) > 1:
            self.error(d, f"{' and '.join(varbits)}: multiple varbit fields in a header")
            return
        found = ir.varbit_field(decl)
        if found is None:
            return
        if found[0] % 8:
            self.error(d, f"unsupported: varbit field {decl.name}.{found[1].name} does not start on a byte")
        if has_annotation(decl.annotations, "controller_header"):
            self.error(d, f"unsupported: varbit field in controller header {decl.name}")

    def decl_struct_decl(self, d: Tree) -> None:
        ann, name, *rest = d.children
        sname = str(name.children[0])
        if rest and isinstance(rest[0], Tree) and rest[0].data == "type_params":
            raise self.error(d, "unsupported: generic structs")
        self.declare_type(name, sname, ir.StructType(sname))
        fields = self.fields(rest, sname)
        for f in fields:
            if isinstance(f.type, ir.VarbitType):
                self.error(d, f"unsupported: varbit field {sname}.{f.name} outside a header")
        self.structs[sname] = ir.StructDecl(sname, fields, self.pos(d))

    def decl_header_union_decl(self, d: Tree) -> None:
        """A header union: a struct of headers to the backends (ir.StructDecl.union); its semantics are
        written out on its members by `unions.lower` and `union_is_valid`."""
        ann, name, *rest = d.children
        uname = str(name.children[0])
        self.declare_type(name, uname, ir.StructType(uname))
        fields = self.fields(rest, uname)
        for f in fields:
            if not isinstance(f.type, ir.HeaderType):
                self.error(d, f"{uname}.{f.name}: the members of a header union must be headers")
        self.structs[uname] = ir.StructDecl(uname, fields, self.pos(d), union=True)

    @property
    def union_members(self) -> dict[str, ir.StructDecl]:
        """The program's header unions by name."""
        return {name: decl for name, decl in self.structs.items() if decl.union}

    def is_union(self, t: ir.Type) -> bool:
        decl = self.structs.get(t.name) if isinstance(t, ir.StructType) else None
        return decl is not None and decl.union

    def decl_enum_decl(self, d: Tree) -> None:
        ann, underlying, name, *members = d.children
        ename = str(name.children[0])
        base = None
        if underlying is not None:
            base = self.resolve_type(
                underlying.children[0] if underlying.data == "enum_underlying" else underlying
            )
            if not isinstance(base, ir.BitType):
                raise self.error(
                    underlying, f"{ename}: the underlying type of an enum must be bit<W> or int<W>"
                )
        self.declare_type(name, ename, ir.EnumType(ename, base))
        out: list[tuple[str, int | None]] = []
        for m in members:
            mname = str(m.children[0])
            if any(mname == n for n, _ in out):
                self.error(m, f"{ename}.{mname}: duplicate enum member")
                continue
            if base is None:
                if len(m.children) > 1:
                    self.error(m, f"{ename}.{mname}: only serializable enums (enum bit<W> ...) have values")
                out.append((mname, None))
            else:
                if len(m.children) < 2:
                    self.error(m, f"{ename}.{mname}: members of a serializable enum need a value")
                    continue
                value = self.attempt(lambda m=m: self.const_int(m.children[1]))
                if value is not None:
                    out.append((mname, fit(value, base)))
        self.enums[ename] = ir.EnumDecl(ename, base, tuple(out), self.pos(d))

    def decl_error_decl(self, d: Tree) -> None:
        for n in d.children:
            if str(n) in self.errors:
                self.error(n, f"error.{n}: duplicate declaration")
            else:
                self.errors.append(str(n))

    def decl_match_kind_decl(self, d: Tree) -> None:
        for n in d.children:
            if str(n) in self.match_kinds:
                self.error(n, f"{n}: duplicate match_kind")
            else:
                self.match_kinds.append(str(n))

    # ------------------------------------------------------------ externs

    def params(self, tree: Tree | None, type_vars: Sequence[str] = ()) -> tuple[ir.Param, ...]:
        if tree is None:
            return ()
        out: list[ir.Param] = []
        for p in tree.children:
            ann, direction, t, name, *default = p.children
            if default and default[0] is not None:
                raise self.error(p, "unsupported: parameters with default values")
            pname = str(name)
            if any(q.name == pname for q in out):
                raise self.error(name, f"{pname}: duplicate parameter")
            d = str(direction.children[0]) if direction is not None else ""
            out.append(
                ir.Param(pname, self.resolve_type(t, type_vars), d, self.annotations(ann), self.pos(p))
            )
        return tuple(out)

    @staticmethod
    def type_params(tree: Any) -> tuple[str, ...]:
        if isinstance(tree, Tree) and tree.data == "type_params":
            return tuple(str(n.children[0]) for n in tree.children)
        return ()

    def decl_extern_object_decl(self, d: Tree) -> None:
        ann, name, *rest = d.children
        ename = str(name.children[0])
        tparams: tuple[str, ...] = ()
        if rest and isinstance(rest[0], Tree) and rest[0].data == "type_params":
            tparams = self.type_params(rest.pop(0))
        info = ExternInfo(ename, tparams)
        self.declare_type(name, ename, info)
        for m in rest:
            if m.data == "extern_ctor":
                _a, cname, params = m.children
                if str(cname) != ename:
                    self.error(m, f"{cname}: constructor name must be {ename}")
                    continue
                info.constructors.append(ir.MethodDecl(ename, self.params(params, tparams), ir.VoidType()))
            elif m.data == "extern_method":
                mann, ret, mname, *mrest = m.children
                mtparams: tuple[str, ...] = ()
                if mrest and isinstance(mrest[0], Tree) and mrest[0].data == "type_params":
                    mtparams = self.type_params(mrest.pop(0))
                scope_vars = tparams + mtparams
                decl = ir.MethodDecl(
                    str(mname),
                    self.params(mrest[0], scope_vars),
                    self.resolve_type(ret, scope_vars),
                    mtparams,
                    self.annotations(mann),
                )
                info.methods.setdefault(str(mname), []).append(decl)
            else:
                self.error(m, "unsupported: abstract methods")
        methods = tuple(m for ms in info.methods.values() for m in ms)
        self.extern_decls.append(
            ir.ExternDecl(ename, tparams, tuple(info.constructors), methods, self.pos(d))
        )

    def decl_extern_function_decl(self, d: Tree) -> None:
        ann, ret, name, *rest = d.children
        fname = str(name.children[0])
        tparams: tuple[str, ...] = ()
        if rest and isinstance(rest[0], Tree) and rest[0].data == "type_params":
            tparams = self.type_params(rest.pop(0))
        decl = ir.MethodDecl(
            fname,
            self.params(rest[0], tparams),
            self.resolve_type(ret, tparams),
            tparams,
            self.annotations(ann),
        )
        overloads = self.functions.setdefault(fname, [])
        if any(len(o.params) == len(decl.params) for o in overloads):
            raise self.error(name, f"{fname}: duplicate declaration")
        if not overloads and (self.globals.lookup(fname) is not None or fname in self.types):
            raise self.error(name, f"{fname}: duplicate declaration")
        overloads.append(decl)
        self.function_decls.append(ir.ExternFunctionDecl(fname, decl, self.pos(d)))

    def decl_parser_type_decl(self, d: Tree) -> None:
        self.block_type(d, "parser")

    def decl_control_type_decl(self, d: Tree) -> None:
        self.block_type(d, "control")

    def decl_package_decl(self, d: Tree) -> None:
        self.block_type(d, "package")

    def block_type(self, d: Tree, kind: str) -> None:
        ann, name, *rest = d.children
        tparams: tuple[str, ...] = ()
        if rest and isinstance(rest[0], Tree) and rest[0].data == "type_params":
            tparams = self.type_params(rest.pop(0))
        params = self.params(rest[0], tparams)
        self.declare_type(name, str(name.children[0]), (kind, params))

    # ------------------------------------------------------------ scopes and variables

    def declare_local(self, scope: Scope, node: Any, name: str, value: Any) -> None:
        self.check_name(node, name)
        if name in scope.names:
            raise self.error(node, f"{name}: duplicate declaration")
        scope.names[name] = value

    def fresh(self, name: str) -> str:
        if name not in self.used_names:
            self.used_names.add(name)
            return name
        n = 1
        while f"{name}__{n}" in self.used_names:
            n += 1
        unique = f"{name}__{n}"
        self.used_names.add(unique)
        return unique

    def var_decl(self, d: Tree, ctx: Context) -> ir.VarDecl:
        ann, t, name, *init = d.children
        vname = str(name.children[0])
        typ = self.resolve_type(t)
        if isinstance(typ, ir.ExternType | ir.VoidType | ir.InfIntType | ir.StringType):
            raise self.error(t, f"{vname}: a variable cannot have type {type_str(typ)}")
        if isinstance(typ, ir.MatchKindType | ir.TupleType | ir.TypeVar):
            raise self.error(t, f"unsupported: a variable of type {type_str(typ)}")
        value = None
        if init and init[0] is not None:
            value = self.coerce(self.expr(init[0], ctx, typ), typ, init[0])
        unique = self.fresh(vname)
        var = ir.Var(unique, typ, "local", "", self.pos(name))
        self.declare_local(ctx.scope, name, vname, var)
        return ir.VarDecl(unique, typ, value, self.pos(d))

    # ------------------------------------------------------------ actions

    def decl_action_decl(self, d: Tree, scope: Scope | None = None, prefix: str = "") -> ir.ActionDecl:
        ann, name, params_tree, body = d.children
        aname = str(name)
        annotations = self.annotations(ann)
        params = self.params(params_tree)
        seen_directionless = False
        for p in params:
            if p.direction == "":
                seen_directionless = True
            elif seen_directionless:
                raise self.error(
                    params_tree, f"{aname}: directional parameters must precede directionless ones"
                )
            if isinstance(p.type, ir.ExternType):
                raise self.error(params_tree, f"{aname}.{p.name}: action parameters cannot be extern objects")
            if p.direction == "" and not ir.is_scalar(p.type):
                raise self.error(
                    p.pos or params_tree,
                    f"{aname}.{p.name}: a directionless action parameter must be bit<W>, int<W>, bool "
                    f"or a serializable enum, not {type_str(p.type)}",
                )
            if p.direction and not (
                ir.is_scalar(p.type) or isinstance(p.type, ir.HeaderType | ir.StructType | ir.ErrorType)
            ):
                raise self.error(
                    p.pos or params_tree, f"unsupported: action parameter {p.name} of type {type_str(p.type)}"
                )
        fq = self.fq_name(prefix, aname, annotations)
        outer = scope or self.globals
        info = ActionInfo(aname, fq, params)
        if scope is None:
            self.declare_global(name, aname, info)
            self.used_names = set()
        else:
            self.declare_local(scope, name, aname, info)
        self.action_trees[fq] = (d, outer)
        block = self.action_body(body, params, outer, {})
        decl = ir.ActionDecl(aname, fq, params, block, annotations, self.pos(d))
        if scope is None:
            self.actions.append(decl)
        return decl

    def action_body(
        self, body: Tree, params: Sequence[ir.Param], outer: Scope, bound: dict[str, ir.Expr]
    ) -> ir.Block:
        """An action's body; the parameters in `bound` stand for those arguments (a table's action list)."""
        inner = Scope(outer)
        for p in params:
            bound_to = bound.get(p.name)
            var = ir.Var(p.name, p.type, "action_param", p.direction, p.pos)
            inner.names[p.name] = var if bound_to is None else Alias(bound_to)
        return self.block(body, Context(inner, "action"))

    def bind_action(self, info: ActionInfo, a: Tree, arg_trees: list[Any], ctx: Context) -> None:
        """`actions = { a(x); }`: the action's directional parameters stand for those arguments from now
        on. Its declaration is checked again so (the same control-plane action, whose P4Info parameters
        are the directionless ones); a second list must bind the same arguments, and the action may
        not be called directly (`check_bound_actions`)."""
        directional = [p for p in info.params if p.direction]
        if len(arg_trees) != len(directional):
            count = f"{len(directional)} arguments, got {len(arg_trees)}"
            raise self.error(a, f"{info.name}: the action list binds {count}")
        args, _ = self.args(directional, arg_trees, a, ctx, info.name, {})
        before = self.bound_actions.get(info.fq_name)
        if before is not None:
            if not all(same_expr(x, y) for x, y in zip(before[0], args, strict=True)):
                message = f"unsupported: action {info.name} bound to other arguments in another table"
                raise self.error(a, message)
            return
        d, outer = self.action_trees[info.fq_name]
        bound = {p.name: e for p, e in zip(directional, args, strict=True)}
        body = self.action_body(d.children[3], info.params, outer, bound)
        self.bound_actions[info.fq_name] = (args, self.pos(a))
        parts = self.parts
        assert parts is not None
        old = next((x for x in (*parts.actions, *self.actions) if x.fq_name == info.fq_name), None)
        assert old is not None
        decl = dataclasses.replace(old, params=tuple(p for p in info.params if not p.direction), body=body)
        if old in parts.actions:
            parts.actions[parts.actions.index(old)] = decl
        else:  # a top-level action: the control's copy stands for it (it reads the control's arguments)
            parts.actions.append(decl)

    def check_bound_actions(self) -> None:
        """An action bound in a table's action list is that table's (its directional parameters stand
        for the list's arguments): calling it directly as well is refused."""
        if not self.bound_actions:
            return
        bodies = [*(a.body for a in self.actions)]
        for block in self.controls.values():
            bodies += [block.apply, *(a.body for a in block.actions)]
        for node in ir.walk(tuple(bodies)):
            if isinstance(node, ir.ActionCall) and node.action in self.bound_actions:
                where = self.bound_actions[node.action][1]
                message = f"unsupported: calling action {node.action}, bound in an action list at {where}"
                self.diagnostics.append(Diagnostic(node.pos, message))

    def check_direct_meters(self) -> None:
        """A direct meter as bmv2 takes it (p4c's DirectMeterMap): attached to one table by `meters =`,
        read by at least one call, every read into the same destination."""
        controls = list(self.controls.values())
        instances = [*self.instances, *(i for c in controls for i in c.instances)]
        for meter in (i for i in instances if i.extern == "direct_meter"):
            tables = [t for c in controls for t in c.tables if t.direct_meter == meter.fq_name]
            reads = self.meter_reads.get(meter.fq_name, [])
            name, problem = meter.name, None
            if len(tables) > 1:
                problem = f"direct meter {name} cannot be attached to more than one table ({tables[0].name})"
            elif tables and not reads:
                problem = f"table {tables[0].name} with direct meter {name} must have an action that reads it"
            elif reads and not tables:
                problem = f"direct meter {name} is read but not attached to a table (`meters = {name};`)"
            for dest, pos in reads[1:]:
                if not same_place(dest, reads[0][0]):
                    message = f"{name}: every read must write to the same destination (as at {reads[0][1]})"
                    self.diagnostics.append(Diagnostic(pos, message))
            if problem is not None:
                self.diagnostics.append(Diagnostic(tables[-1].pos if tables else meter.pos, problem))

    def check_control_plane_names(self) -> None:
        """Two declarations of one kind with one control-plane name (through @name, or within one
        control) are an error, as in p4c: P4Runtime could not tell them apart (actions: its
        "conflicting control plane name"; tables and extern instances: its P4Info's "used for
        multiple objects"). A table and an action may share a name, as in p4c's P4Info."""
        controls = list(self.controls.values())
        bound = {a for c in controls for a in c.actions if a.fq_name in self.bound_actions}
        kinds: dict[str, list[ir.ActionDecl | ir.TableDecl | ir.InstanceDecl]] = {
            "action": [*self.actions, *(a for c in controls for a in c.actions if a not in bound)],
            "table": [t for c in controls for t in c.tables],
        }
        for inst in [*self.instances, *(i for c in controls for i in c.instances)]:
            kinds.setdefault(inst.extern, []).append(inst)
        for decls in kinds.values():
            first: dict[str, ir.ActionDecl | ir.TableDecl | ir.InstanceDecl] = {}
            for decl in decls:
                other = first.setdefault(decl.fq_name, decl)
                if other is not decl:
                    message = f"{decl.fq_name}: conflicting control plane name (as at {other.pos})"
                    self.diagnostics.append(Diagnostic(decl.pos, message))

    @staticmethod
    def fq_name(prefix: str, name: str, annotations: Sequence[ir.Annotation]) -> str:
        given = annotation_value(annotations, "name")
        if given is not None:
            if given.startswith("."):
                return given[1:]
            name = given
        return f"{prefix}.{name}" if prefix else name

    # ------------------------------------------------------------ instantiations

    def decl_instantiation(
        self, d: Tree, scope: Scope | None = None, prefix: str = ""
    ) -> ir.InstanceDecl | None:
        ann, t, args, name = d.children
        iname = str(name.children[0])
        annotations = self.annotations(ann)
        if t.data in ("named_type", "generic_type"):
            found = self.types.get(str(t.children[0]))
            if isinstance(found, tuple) and found[0] == "package" and scope is None:
                self.package(d, found[1], iname)
                return None
            if isinstance(found, tuple):
                raise self.error(
                    d, f"unsupported: instantiating {found[0]} {t.children[0]} (nested parsers and controls)"
                )
        typ = self.resolve_type(t)
        if isinstance(typ, tuple) or not isinstance(typ, ir.ExternType):
            found = self.types.get(str(t.children[0])) if t.data == "named_type" else None
            if isinstance(found, tuple):
                raise self.error(d, f"unsupported: instantiating {found[0]} {t.children[0]}")
            raise self.error(t, f"{type_str(typ)} cannot be instantiated")
        if typ.name not in subset.EXTERNS:
            raise self.error(d, f"unsupported: extern {typ.name}")
        info = self.externs_info(typ.name)
        arg_trees = args.children if args is not None else []
        ctors = [c for c in info.constructors if len(c.params) == len(arg_trees)]
        if not ctors:
            raise self.error(d, f"{typ.name}: no constructor takes {len(arg_trees)} arguments")
        if info.type_params and not typ.type_args:
            raise self.error(t, f"{typ.name}: type arguments required, e.g. {typ.name}<bit<32>>")
        cell = typ.type_args[0] if typ.name == "register" else None
        if cell is not None and not (
            isinstance(cell, ir.BitType | ir.BoolType) or (isinstance(cell, ir.EnumType) and cell.underlying)
        ):
            # cells are integers (P4Runtime reads each as one bitstring); bmv2 cannot read a struct out either
            kinds = "bit<W>, int<W>, bool or a serializable enum"
            raise self.error(t, f"unsupported: register of {type_str(cell)} (cells of {kinds})")
        binding = dict(zip(info.type_params, typ.type_args, strict=False))
        ctx = Context(scope or self.globals, "global")
        out_args: list[ir.Expr] = []
        for p, a in zip(ctors[0].params, arg_trees, strict=True):
            ptype = self.subst(p.type, binding)
            e = self.coerce(self.expr(a, ctx, ptype), ptype, a)
            if not is_const(e):
                raise self.error(
                    a, f"{typ.name}: constructor argument {p.name} must be a compile-time constant"
                )
            out_args.append(e)
        decl = ir.InstanceDecl(
            iname,
            self.fq_name(prefix, iname, annotations),
            typ.name,
            typ.type_args,
            tuple(out_args),
            annotations,
            self.pos(d),
        )
        if scope is None:
            self.declare_global(name, iname, InstanceInfo(decl))
            self.instances.append(decl)
        else:
            self.declare_local(scope, name, iname, InstanceInfo(decl))
        return decl

    def externs_info(self, name: str) -> ExternInfo:
        found = self.types[name]
        assert isinstance(found, ExternInfo)
        return found

    def subst(self, t: ir.Type, binding: dict[str, ir.Type]) -> ir.Type:
        if isinstance(t, ir.TypeVar) and t.name in binding:
            return binding[t.name]
        return t

    def package(self, d: Tree, params: tuple[ir.Param, ...], iname: str) -> None:
        ann, t, args, name = d.children
        pname = str(t.children[0])
        type_args = None
        if t.data == "generic_type":
            if pname != "V1Switch":
                raise self.error(t, "unsupported: explicit type arguments on the package")
            type_args = tuple(self.resolve_type(a) for a in t.children[-1].children)
        if self.main is not None:
            raise self.error(d, "only one package instantiation is supported")
        if iname != "main":
            raise self.error(name, f"the package instance must be named main, not {iname}")
        arg_trees = args.children if args is not None else []
        if len(arg_trees) != len(params):
            raise self.error(d, f"{pname}: expects {len(params)} arguments, got {len(arg_trees)}")
        blocks: list[ir.PackageBinding] = []
        for p, a in zip(params, arg_trees, strict=True):
            if not (isinstance(a, Tree) and a.data == "ctor_call"):
                self.error(
                    a, f"{pname}: argument {p.name} must be a parser or control instantiation like X()"
                )
                continue
            bname = str(a.children[0])
            if not self.attempt(lambda a=a, bname=bname: self.construct_bound(bname, a)):
                continue
            expected = self.types.get(p.type.name) if isinstance(p.type, ir.ExternType) else None
            kind = "parser" if bname in self.parsers else "control" if bname in self.controls else None
            if kind is None:
                self.error(a, f"{bname}: not a parser or control")
                continue
            want = p.type
            want_kind = None
            want_params: tuple[ir.Param, ...] = ()
            if isinstance(want, ir.ExternType):
                found = self.types.get(want.name)
                if isinstance(found, tuple):
                    want_kind, want_params = found
            del expected
            if want_kind is not None and want_kind != kind:
                self.error(a, f"{pname}: argument {p.name} must be a {want_kind}, {bname} is a {kind}")
                continue
            block = self.parsers.get(bname) or self.controls.get(bname)
            assert block is not None
            if want_kind is not None and not self.signature_matches(block.params, want_params):
                self.error(
                    a,
                    f"{bname}: parameters ({self.sig(block.params)}) do not match "
                    f"{p.name}'s type ({self.sig(want_params)})",
                )
                continue
            blocks.append(ir.PackageBinding(p.name, bname, kind))
        if blocks and blocks[0].kind == "parser":
            self.check_headers_type(self.parsers[blocks[0].block], a=arg_trees[0])
            if type_args is not None:
                self.check_package_type_args(self.parsers[blocks[0].block], type_args, t)
        self.main = ir.PackageInstance(pname, iname, tuple(blocks), self.pos(d), self.package_info(ann))

    def construct_bound(self, bname: str, a: Tree) -> bool:
        """A block the package instantiates with constructor arguments (`MyParser(true)`): checked now,
        with them (False if it cannot be)."""
        given = list(a.children[1].children) if a.children[1] is not None else []
        if bname not in self.ctor_params:
            if given:
                raise self.error(a, f"{bname} takes no constructor arguments")
            return True
        if bname in self.parsers or bname in self.controls:
            raise self.error(a, f"unsupported: {bname} instantiated twice with constructor arguments")
        constructed = self.constructor_scope(bname, given, None, a)
        d = self.block_trees[bname]
        count = len(self.diagnostics)
        (self.decl_parser_decl if d.data == "parser_decl" else self.decl_control_decl)(d, constructed)
        return len(self.diagnostics) == count

    def check_package_type_args(self, parser: ir.ParserDecl, type_args: tuple[ir.Type, ...], t: Tree) -> None:
        """`V1Switch<H, M>(...)`: H and M must be the headers and metadata types the blocks take."""
        inferred = tuple(p.type for p in parser.params[1:3])
        if type_args != inferred:
            given = ", ".join(type_str(a) for a in type_args)
            message = f"V1Switch<{given}>: the blocks take V1Switch<{', '.join(map(type_str, inferred))}>"
            raise self.error(t, message)

    def check_headers_type(self, parser: ir.ParserDecl, a: Tree) -> None:
        """The packet's headers (the parser's second parameter) must be a struct of headers, header
        stacks and such structs: bmv2 refuses anything else ("a struct of headers, stacks, or unions")."""
        if len(parser.params) < 2:
            return
        param = parser.params[1]
        t = param.type

        def headers_only(t: ir.Type) -> bool:  # p4c flattens nested structs before it looks
            decl = self.structs.get(t.name) if isinstance(t, ir.StructType) else None
            return decl is not None and all(
                isinstance(f.type, ir.HeaderType | ir.StackType) or headers_only(f.type) for f in decl.fields
            )

        if not headers_only(t):
            message = (
                f"{type_str(t)}: the type of the headers ({parser.name}'s parameter {param.name}) "
                "should be a struct of headers and header stacks"
            )
            self.diagnostics.append(Diagnostic(param.pos or self.pos(a), message))

    def sig(self, params: Sequence[ir.Param]) -> str:
        return ", ".join(
            f"{p.direction + ' ' if p.direction else ''}{type_str(p.type)} {p.name}" for p in params
        )

    @staticmethod
    def signature_matches(have: Sequence[ir.Param], want: Sequence[ir.Param]) -> bool:
        if len(have) != len(want):
            return False
        binding: dict[str, ir.Type] = {}
        for h, w in zip(have, want, strict=True):
            if h.direction != w.direction:
                return False
            if isinstance(w.type, ir.TypeVar):
                if binding.setdefault(w.type.name, h.type) != h.type:
                    return False
            elif h.type != w.type:
                return False
        return True

    # ------------------------------------------------------------ parsers

    def block_params(self, params: tuple[ir.Param, ...], scope: Scope) -> None:
        for p in params:
            scope.names[p.name] = ir.Var(p.name, p.type, "param", p.direction, p.pos)
            self.used_names.add(p.name)

    def decl_parser_decl(self, d: Tree, constructed: Scope | None = None) -> None:
        """A parser; one with constructor parameters only where it is instantiated, its parameters
        then bound in `constructed` (`Inliner.constructor_scope`)."""
        ann, name, params_tree, ctor, *body = d.children
        pname = str(name.children[0])
        params = self.block_declared(d, "parser") if constructed is None else self.types[pname][1]
        if ctor is not None and constructed is None:
            return
        self.used_names = set()
        self.block_name = pname
        scope = Scope(constructed or self.globals)
        self.block_params(params, scope)
        ctx = Context(scope, "parser")
        state_trees = [item for item in body if item.data == "parser_state"]
        parts = BlockParts("parser", pname, scope, list(state_trees))
        names = {"accept", "reject"}
        for st in state_trees:
            sname = str(st.children[1].children[0])
            if sname in names:
                self.error(st.children[1], f"state {sname}: duplicate declaration")
            names.add(sname)
        self.state_names = set(names)
        self.parser_locals([item for item in body if item.data != "parser_state"], parts)
        if "start" not in names:
            self.error(d, f"parser {pname}: no start state")
        states: list[ir.ParserState] = []
        failed = False
        self.parts = parts
        try:
            for st in state_trees:
                s = self.attempt(lambda st=st: self.parser_state(st, ctx, names))
                failed |= s is None
                states += s or []
        finally:
            self.parts = None
        if not failed and "start" in names and not _reaches_accept(states):
            self.error(d, f"parser {pname}: no path from start reaches accept")
        self.parsers[pname] = ir.ParserDecl(
            pname,
            params,
            tuple(parts.locals),
            tuple(parts.instances),
            tuple(states),
            self.annotations(ann),
            self.pos(d),
        )

    def block_declared(self, d: Tree, kind: str) -> tuple[ir.Param, ...]:
        """A parser's or control's type: its parameters, and its constructor's (checked where it is
        instantiated: it has no body of its own before)."""
        _ann, name, params_tree, ctor, *_body = d.children
        bname = str(name.children[0])
        params = self.params(params_tree)
        self.declare_type(name, bname, (kind, params), overridable=True)
        self.block_trees[bname] = d
        if ctor is not None:
            self.ctor_params[bname] = self.constructor_params(ctor)
        return params

    def constructor_params(self, ctor: Tree) -> tuple[ir.Param, ...]:
        """Constructor parameters: compile-time values, or parsers and controls (instances)."""
        out: list[ir.Param] = []
        for p in ctor.children[0].children if ctor.children[0] is not None else []:
            _ann, direction, t, pname, *default = p.children
            if direction is not None:
                raise self.error(p, f"{pname}: constructor parameters have no direction")
            if default and default[0] is not None:
                raise self.error(p, "unsupported: parameters with default values")
            found = self.types.get(str(t.children[0])) if t.data == "named_type" else None
            if isinstance(found, tuple) and found[0] in ("parser", "control"):
                typ: ir.Type = ir.ExternType(str(t.children[0]))
            else:
                typ = self.resolve_type(t)
            out.append(ir.Param(str(pname), typ, "", (), self.pos(p)))
        return tuple(out)

    def check_constructed(self) -> None:
        """A parser or control with constructor parameters is checked where it is instantiated: one
        never instantiated could hide errors, so it is refused."""
        bound = {b.block for b in self.main.blocks} if self.main is not None else set()
        for name in self.ctor_params.keys() - self.inlined - bound:
            ctor = self.block_trees[name].children[3]
            self.error(ctor, f"unsupported: constructor parameters of {name}, never instantiated")

    def parser_locals(self, items: Sequence[Tree], parts: BlockParts) -> None:
        """A parser's local declarations (an inlined one's too) into `parts`."""
        ctx = Context(parts.scope, "parser")
        for item in items:
            if not self.block_local(item, parts, ctx):
                self.attempt(lambda item=item: self.declaration(item))
        self.expand_instances(parts)

    def block_local(self, item: Tree, parts: BlockParts, ctx: Context) -> bool:
        """A variable, constant or instance declared in a parser or control, into `parts` (False if
        `item` is none of them)."""
        if item.data == "var_decl":
            v = self.attempt(lambda: self.var_decl(item, ctx))
            if v is not None:
                parts.locals.append(v)
        elif item.data == "const_decl":
            self.attempt(lambda: self.decl_const_decl(item, parts.scope))
        elif item.data == "instantiation" and (sub := self.instantiated_block(item)) is not None:
            self.attempt(lambda: self.sub_block_instance(item, parts, sub))
        elif item.data == "instantiation":
            inst = self.attempt(lambda: self.decl_instantiation(item, parts.scope, parts.prefix))
            if inst is not None:
                parts.instances.append(inst)
        else:
            return False
        return True

    def instantiated_block(self, d: Tree) -> str | None:
        """The kind ("parser" or "control") that the instantiation `d` instantiates, if any."""
        t = d.children[1]
        found = self.types.get(str(t.children[0])) if t.data in ("named_type", "generic_type") else None
        if isinstance(found, tuple) and found[0] in ("parser", "control"):
            return str(found[0])
        return None

    def parser_state(
        self, st: Tree, ctx: Context, names: set[str], rename: dict[str, str] | None = None
    ) -> list[ir.ParserState]:
        """A parser state, as one IR state or, where it applies sub-parsers, several (`inline`);
        `rename` gives the names of an inlined parser's copy."""
        ann, name, *items = st.children
        sname = str(name.children[0])
        names_to = rename or {}
        transition = None
        if items and isinstance(items[-1], Tree) and items[-1].data in ("goto", "select_transition"):
            transition = items.pop()
        inner = Context(Scope(ctx.scope), "parser")
        out: list[ir.ParserState] = []
        current, stmts = names_to.get(sname, sname), []
        for item in items:
            try:
                split = self.sub_parser_split(item, inner)
            except Fail:
                continue
            if split is None:
                stmts += self.statements([item], inner)
                continue
            before, info, args = split
            after = self.fresh_state(f"{names_to.get(sname, sname)}_after_{info.name}")
            start, copies = self.sub_parser_states(info, after)
            goto = ir.Goto(start, self.pos(item))
            out.append(ir.ParserState(current, (*stmts, *before), goto, self.pos(st)))
            out += copies
            current, stmts = after, self.copy_out(info, args)
        pos = self.pos(st)
        if transition is not None and transition.data == "select_transition":
            before_select, select = self.select_lowered(transition, inner, names)
            final: ir.Goto | ir.Select = renamed_transition(select, names_to)
            stmts += before_select
        elif transition is None:  # p4c: an implicit transition to reject (with a warning)
            final = ir.Goto("reject", pos)
        else:
            target = str(transition.children[0].children[0])
            if target not in names:
                raise self.error(transition, f"{target}: no such parser state")
            final = renamed_transition(ir.Goto(target, self.pos(transition)), names_to)
        out.append(ir.ParserState(current, tuple(stmts), final, pos))
        return out

    def select_lowered(
        self, transition: Tree, ctx: Context, names: set[str]
    ) -> tuple[tuple[ir.Stmt, ...], ir.Select]:
        """The state's select, and the statements that first read its keys that index a header stack at
        run time into fresh locals (the keys are evaluated after the state's statements)."""
        self.lowering_select = True
        try:
            select = self.select(transition.children[0], ctx, names)
        finally:
            self.lowering_select = False
        if not stack_index.has_dynamic_index(select.keys):
            return (), select
        before: list[ir.Stmt] = []
        keys = []
        for k in select.keys:
            if stack_index.has_dynamic_index(k):
                var = ir.Var(self.fresh("select_key"), k.type, "local", "", k.pos)
                before += [ir.VarDecl(var.name, var.type, None, k.pos), ir.Assign(var, k, k.pos)]
                k = var
            keys.append(k)
        lowered = self.lower_stack_indices(transition, before, ctx)
        return tuple(lowered), dataclasses.replace(select, keys=tuple(keys))

    def select(self, sel: Tree, ctx: Context, names: set[str]) -> ir.Select:
        keys_tree, *cases = sel.children
        keys = tuple(self.expr(k, ctx, None) for k in keys_tree.children)
        for k, kt in zip(keys, keys_tree.children, strict=True):
            if not isinstance(k.type, ir.BitType | ir.BoolType | ir.EnumType):
                raise self.error(
                    kt, f"select key must be bit<W>, int<W>, bool or enum, not {type_str(k.type)}"
                )
        out: list[ir.SelectCase] = []
        for c in cases:
            keyset, target = c.children
            tname = str(target.children[0])
            if tname not in names:
                self.error(target, f"{tname}: no such parser state")
                continue
            parts = (
                keyset.children if isinstance(keyset, Tree) and keyset.data == "tuple_keyset" else [keyset]
            )
            if len(parts) == 1 and len(keys) > 1 and not self.is_default(parts[0]):
                self.error(keyset, f"select has {len(keys)} keys, this case gives 1")
                continue
            if len(parts) > 1 and len(parts) != len(keys):
                self.error(keyset, f"select has {len(keys)} keys, this case gives {len(parts)}")
                continue
            if len(parts) == 1 and self.is_default(parts[0]):
                sets = tuple(ir.KeysetDefault(self.pos(parts[0])) for _ in keys)
            else:
                sets = tuple(
                    ks
                    for ks in (
                        self.attempt(lambda p=p, k=k: self.keyset(p, k.type, ctx))
                        for p, k in zip(parts, keys, strict=True)
                    )
                    if ks is not None
                )
                if len(sets) != len(keys):
                    continue
            out.append(ir.SelectCase(sets, tname, self.pos(c)))
        return ir.Select(keys, tuple(out), self.pos(sel))

    @staticmethod
    def is_default(t: Any) -> bool:
        return isinstance(t, Tree) and t.data == "default_keyset"

    def keyset(self, t: Any, key_type: ir.Type, ctx: Context) -> ir.Keyset:
        if self.is_default(t):
            return ir.KeysetDefault(self.pos(t))
        if isinstance(t, Tree) and t.data == "mask_keyset":
            return ir.KeysetMask(
                self.keyset_value(t.children[0], key_type, ctx),
                self.keyset_value(t.children[1], key_type, ctx),
                self.pos(t),
            )
        if isinstance(t, Tree) and t.data == "range_keyset":
            return ir.KeysetRange(
                self.keyset_value(t.children[0], key_type, ctx),
                self.keyset_value(t.children[1], key_type, ctx),
                self.pos(t),
            )
        return ir.KeysetValue(self.keyset_value(t, key_type, ctx), self.pos(t))

    def keyset_value(self, t: Any, key_type: ir.Type, ctx: Context) -> int:
        e = self.coerce(self.expr(t, ctx, key_type), key_type, t)
        if isinstance(e, ir.Const):
            return int(e.value)
        if isinstance(e, ir.EnumValue) and e.value is not None:
            return e.value
        raise self.error(t, "keyset values must be compile-time constants")

    # ------------------------------------------------------------ controls

    def decl_control_decl(self, d: Tree, constructed: Scope | None = None) -> None:
        """A control; one with constructor parameters only where it is instantiated, its parameters
        then bound in `constructed` (`Inliner.constructor_scope`)."""
        ann, name, params_tree, ctor, *body = d.children
        cname = str(name.children[0])
        params = self.block_declared(d, "control") if constructed is None else self.types[cname][1]
        if ctor is not None and constructed is None:
            return
        self.used_names = set()
        self.block_name = cname
        self.block_tables = {}
        scope = Scope(constructed or self.globals)
        self.block_params(params, scope)
        apply_tree = body.pop()
        parts = BlockParts("control", cname, scope, [apply_tree])
        self.control_locals(body, parts)
        self.parts = parts
        try:
            apply = self.block(apply_tree, Context(Scope(scope), "control", in_apply=True))
        finally:
            self.parts = None
        self.controls[cname] = ir.ControlDecl(
            cname,
            params,
            tuple(parts.locals),
            tuple(parts.instances),
            tuple(parts.actions),
            tuple(parts.tables),
            apply,
            self.annotations(ann),
            self.pos(d),
        )

    def control_locals(self, items: Sequence[Tree], parts: BlockParts) -> None:
        """A control's local declarations (an inlined one's too) into `parts`."""
        ctx = Context(parts.scope, "control")
        saved, self.parts = self.parts, parts  # where a table's action list puts the actions it binds
        try:
            self.control_items(items, parts, ctx)
        finally:
            self.parts = saved
        self.expand_instances(parts)

    def control_items(self, items: Sequence[Tree], parts: BlockParts, ctx: Context) -> None:
        for item in items:
            kind = item.data
            if self.block_local(item, parts, ctx):
                continue
            if kind == "action_decl":
                a = self.attempt(lambda item=item: self.decl_action_decl(item, parts.scope, parts.prefix))
                if a is not None:
                    parts.actions.append(a)
            elif kind == "table_decl":
                t = self.attempt(lambda item=item: self.table(item, ctx, parts.prefix, parts.instances))
                if t is not None:
                    parts.tables.append(t)
            elif kind == "function_decl":
                self.error(
                    item, "unsupported: a function declared inside a control (declare it at top level)"
                )
            else:
                self.attempt(lambda item=item: self.declaration(item))

    # ------------------------------------------------------------ tables

    def table(self, d: Tree, ctx: Context, cname: str, instances: list[ir.InstanceDecl]) -> ir.TableDecl:
        ann, name, *props = d.children
        tname = str(name.children[0])
        annotations = self.annotations(ann)
        fq = self.fq_name(cname, tname, annotations)
        keys: list[ir.TableKey] = []
        actions: list[ir.TableActionRef] = []
        default: ir.TableActionCall | None = None
        default_const = False
        entries: list[ir.TableEntry] = []
        entries_const = False
        size: int | None = None
        direct_counter = direct_meter = None
        support_timeout = False
        largest_wins, delta = True, 1
        seen: set[str] = set()
        entries_tree: Tree | None = None
        default_tree: Tree | None = None
        for p in props:
            pname = {"table_key": "key", "table_actions": "actions", "table_entries": "entries"}.get(p.data)
            if pname is None:
                pname = str(p.children[2])
            if pname in seen:
                self.error(p, f"{tname}: duplicate table property {pname}")
                continue
            seen.add(pname)
            if p.data == "table_key":
                for k in p.children[1:]:
                    key = self.attempt(lambda k=k: self.table_key(k, ctx))
                    if key is not None:
                        if key.match_kind == "lpm" and any(other.match_kind == "lpm" for other in keys):
                            # which prefix would count first? bmv2 refuses it (p4c: "multiple LPM keys")
                            self.error(
                                k, f"unsupported: a second lpm key in table {tname} (bmv2 refuses it too)"
                            )
                        keys.append(key)
            elif p.data == "table_actions":
                for a in p.children[1:]:
                    ref = self.attempt(lambda a=a: self.action_ref(a, ctx))
                    if ref is not None:
                        if any(r.action == ref.action for r in actions):
                            self.error(a, f"{tname}: action {ref.action} listed twice")
                        else:
                            actions.append(ref)
            elif p.data == "table_entries":
                entries_const = p.children[1] is not None
                entries_tree = p
            else:
                _a, const_mark, _n, value = p.children
                if pname == "default_action":
                    default_const = const_mark is not None
                    default_tree = value
                elif pname == "size":
                    size = self.attempt(lambda value=value: self.const_int(value))
                    if size is not None and size <= 0:
                        self.error(value, f"{tname}: size must be positive")
                elif pname in ("counters", "meters"):
                    inst = self.attempt(
                        lambda value=value, pname=pname: self.direct_instance(value, ctx, pname)
                    )
                    if inst is not None:
                        if pname == "counters":
                            direct_counter = inst
                        else:
                            direct_meter = inst
                elif pname == "implementation":
                    self.error(p, "unsupported: table implementation (action profiles and selectors)")
                elif pname == "support_timeout":
                    support_timeout = self.flag_property(value, ctx, f"{tname}: {pname}", support_timeout)
                elif pname == "largest_priority_wins":
                    largest_wins = self.flag_property(value, ctx, f"{tname}: {pname}", largest_wins)
                elif pname == "priority_delta":
                    step = self.attempt(lambda value=value: self.const_int(value))
                    if step is not None and step <= 0:
                        self.error(value, f"{tname}: priority_delta must be a positive value")
                    elif step is not None:
                        delta = step
                else:
                    self.error(p, f"{tname}: unknown table property {pname}")
        if default_tree is not None:
            default = self.attempt(
                lambda: self.table_action_call(default_tree, ctx, actions, "default_action")
            )
            if default is not None:
                ref = next((r for r in actions if r.action == default.action), None)
                if ref is not None and ref.scope == "TABLE_ONLY":
                    self.error(
                        default_tree, f"{default.action} is @tableonly and cannot be the default action"
                    )
        else:  # p4c: NoAction becomes the default, and joins the actions as @defaultonly
            no_action = self.globals.lookup("NoAction")
            if not isinstance(no_action, ActionInfo):
                raise self.error(d, f"{tname}: no default_action and no NoAction to fall back to")
            if not any(r.action == no_action.fq_name for r in actions):
                actions.append(
                    ir.TableActionRef(
                        no_action.fq_name, "DEFAULT_ONLY", (ir.Annotation("defaultonly"),), self.pos(d)
                    )
                )
            default = ir.TableActionCall(no_action.fq_name, (), self.pos(d))
        if default is None:
            raise Fail()
        if entries_tree is not None:
            for e in entries_tree.children[2:]:
                entry = self.attempt(lambda e=e: self.table_entry(e, ctx, keys, actions))
                if entry is not None:
                    entries.append(entry)
            resolved, problems = table_entries.resolve(
                fq, tuple(keys), tuple(entries), entries_const, largest_wins, delta
            )
            self.diagnostics += problems
            entries = list(resolved)
            if len(entries) > (size or DEFAULT_TABLE_SIZE):
                capacity = size or DEFAULT_TABLE_SIZE
                self.error(entries_tree, f"{tname}: {len(entries)} entries do not fit its size {capacity}")
        del instances
        self.declare_local(ctx.scope, name, tname, TableInfo(tname, fq))
        decl = ir.TableDecl(
            tname,
            fq,
            tuple(keys),
            tuple(actions),
            default,
            default_const,
            tuple(entries),
            entries_const,
            size,
            direct_counter,
            direct_meter,
            annotations,
            self.pos(d),
            support_timeout,
        )
        self.block_tables[fq] = decl
        return decl

    def table_key(self, k: Tree, ctx: Context) -> ir.TableKey:
        ann, expr_tree, kind, ann_after = k.children
        annotations = self.annotations(ann) + self.annotations(ann_after)
        e = self.expr(expr_tree, ctx, None)
        if not isinstance(e.type, ir.BitType | ir.BoolType | ir.EnumType | ir.ErrorType):
            raise self.error(
                expr_tree, f"table keys must be bit<W>, int<W>, bool or enum, not {type_str(e.type)}"
            )
        if isinstance(e.type, ir.EnumType | ir.ErrorType) and not (
            isinstance(e.type, ir.EnumType) and e.type.underlying is not None
        ):
            raise self.error(expr_tree, "unsupported: keys of non-serializable enum or error type")
        if str(kind) not in self.match_kinds:
            raise self.error(kind, f"{kind}: unknown match kind")
        if str(kind) == "selector":
            raise self.error(kind, "unsupported: selector match (action selectors)")
        name = annotation_value(annotations, "name")
        if name is None:
            name = self.key_name(expr_tree, ctx)
        return ir.TableKey(e, str(kind), name, annotations, self.pos(k))

    def key_name(self, t: Any, ctx: Context) -> str:
        """The match field name p4c gives a key without @name (frontends/p4/tableKeyNames.cpp)."""
        kind = t.data if isinstance(t, Tree) else ""
        if kind in ("name_ref", "dot_name_ref"):
            return source_text(t)
        if kind == "int_lit":
            return source_text(t)
        if kind == "member":
            base_t, field_tok = t.children
            base = self.expr(base_t, ctx, None)
            field = str(field_tok)
            if isinstance(base.type, ir.HeaderType | ir.StructType):
                decl = (
                    self.headers[base.type.name]
                    if isinstance(base.type, ir.HeaderType)
                    else self.structs[base.type.name]
                )
                found = next((f for f in decl.fields if f.name == field), None)
                given = annotation_value(found.annotations, "name") if found is not None else None
                if given is not None:
                    if given.startswith("."):
                        return given[1:]
                    field = given
            return f"{self.key_name(base_t, ctx)}.{field}"
        if kind == "call" and t.children[1] is None and t.children[0].data == "member":
            target_t, method = t.children[0].children
            if str(method) == "isValid":
                return f"{self.key_name(target_t, ctx)}.$valid$"
        if kind == "slice":
            base_t, hi_t, lo_t = t.children
            return f"{self.key_name(base_t, ctx)}[{self.key_name(hi_t, ctx)}:{self.key_name(lo_t, ctx)}]"
        if kind == "index":
            return f"{self.key_name(t.children[0], ctx)}[{self.key_name(t.children[1], ctx)}]"
        if kind == "binop" and str(t.children[1]) == "&":
            return f"{self.key_name(t.children[0], ctx)} & {self.key_name(t.children[2], ctx)}"
        raise self.error(t, f"{source_text(t)}: a complex key expression needs a @name annotation")

    def action_ref(self, a: Tree, ctx: Context) -> ir.TableActionRef:
        ann, name, *args = a.children
        annotations = self.annotations(ann)
        info = ctx.scope.lookup(str(name))
        if not isinstance(info, ActionInfo):
            raise self.error(name, f"{name}: {'not an action' if info is not None else 'undeclared action'}")
        arg_trees = list(args[0].children) if args and args[0] is not None else []
        if arg_trees or any(p.direction for p in info.params):
            self.bind_action(info, a, arg_trees, ctx)
        scope = "TABLE_AND_DEFAULT"
        for a_name, s in _TABLE_SCOPES.items():
            if has_annotation(annotations, a_name):
                scope = s
        return ir.TableActionRef(info.fq_name, scope, annotations, self.pos(a))

    def table_action_call(
        self, t: Tree, ctx: Context, actions: list[ir.TableActionRef], what: str
    ) -> ir.TableActionCall:
        if t.data == "call":
            callee, args_tree = t.children
            arg_trees = args_tree.children if args_tree is not None else []
        else:
            callee, arg_trees = t, []
        name = str(callee.children[0]) if callee.data in ("name_ref", "dot_name_ref") else None
        info = ctx.scope.lookup(name) if name is not None else None
        if callee.data == "dot_name_ref":
            info = self.globals.lookup(str(name))
        if not isinstance(info, ActionInfo):
            raise self.error(t, f"{what}: {source_text(callee)} is not an action")
        if not any(r.action == info.fq_name for r in actions):
            raise self.error(t, f"{what}: action {info.name} is not in the table's actions list")
        params = [p for p in info.params if p.direction == ""]
        bound = self.bound_actions.get(info.fq_name)
        if bound is not None and len(arg_trees) == len(info.params):  # the list's arguments again, first
            given = self.args(info.params[: len(bound[0])], arg_trees[: len(bound[0])], t, ctx, what, {})[0]
            if not all(same_expr(x, y) for x, y in zip(bound[0], given, strict=True)):
                raise self.error(t, f"{what}: {info.name} is bound to other arguments in the action list")
            arg_trees = arg_trees[len(bound[0]) :]
        elif any(p.direction != "" for p in info.params):
            raise self.error(t, f"{what}: action {info.name} has directional parameters")
        if len(arg_trees) != len(params):
            raise self.error(
                t, f"{what}: action {info.name} takes {len(params)} arguments, got {len(arg_trees)}"
            )
        args: list[ir.Expr] = []
        for p, a in zip(params, arg_trees, strict=True):
            e = self.coerce(self.expr(a, ctx, p.type), p.type, a)
            if not is_const(e):
                raise self.error(a, f"{what}: argument {p.name} must be a compile-time constant")
            if isinstance(e, ir.ErrorValue) or (isinstance(e, ir.EnumValue) and e.value is None):
                # the control plane passes action data as bitstrings: these types have none
                raise self.error(a, f"unsupported: {what} argument {p.name} of type {type_str(e.type)}")
            args.append(e)
        return ir.TableActionCall(info.fq_name, tuple(args), self.pos(t))

    def flag_property(self, value: Any, ctx: Context, what: str, default: bool) -> bool:
        """A table property that is `true` or `false` (an error, and `default`, if it is anything else)."""
        flag = self.attempt(lambda: self.expr(value, ctx, ir.BoolType()))
        if flag is None:
            return default
        if not (isinstance(flag, ir.Const) and isinstance(flag.value, bool)):
            self.error(value, f"{what} must be true or false")
            return default
        return bool(flag.value)

    def table_entry(
        self, e: Tree, ctx: Context, keys: list[ir.TableKey], actions: list[ir.TableActionRef]
    ) -> ir.TableEntry:
        ann, _const, priority_t, keyset, aname, args, ann_after = e.children
        parts = keyset.children if isinstance(keyset, Tree) and keyset.data == "tuple_keyset" else [keyset]
        if len(parts) != len(keys):
            raise self.error(keyset, f"entry has {len(parts)} keys, the table has {len(keys)}")
        sets = tuple(self.keyset(p, k.expr.type, ctx) for p, k in zip(parts, keys, strict=True))
        for p, k, ks in zip(parts, keys, sets, strict=True):
            allowed = _ENTRY_KEYSETS.get(k.match_kind)
            if allowed is not None and not isinstance(ks, allowed):
                what = {ir.KeysetDefault: "`_`", ir.KeysetMask: "a mask", ir.KeysetRange: "a range"}[type(ks)]
                raise self.error(
                    p, f"unsupported: {what} on the {k.match_kind} key {k.name} (bmv2 refuses it too)"
                )
        call_tree = Tree("call", [Tree("name_ref", [aname], e.meta), args], e.meta)
        call = self.table_action_call(call_tree, ctx, actions, "entry")
        ref = next(r for r in actions if r.action == call.action)
        if ref.scope == "DEFAULT_ONLY":
            raise self.error(aname, f"{aname} is @defaultonly and cannot be used in an entry")
        priority = None
        if priority_t is not None:
            priority = self.const_int(priority_t.children[0])
            if priority <= 0:
                raise self.error(priority_t, f"entry priority {priority} must be positive")
        return ir.TableEntry(
            sets, call, priority, self.annotations(ann) + self.annotations(ann_after), self.pos(e)
        )

    def direct_instance(self, value: Any, ctx: Context, prop: str) -> str:
        want = "direct_counter" if prop == "counters" else "direct_meter"
        info = ctx.scope.lookup(str(value.children[0])) if value.data == "name_ref" else None
        if not isinstance(info, InstanceInfo) or info.decl.extern != want:
            raise self.error(value, f"{prop} must name a {want} instance")
        return info.decl.fq_name

    # ------------------------------------------------------------ statements

    def block(self, t: Tree, ctx: Context) -> ir.Block:
        inner = dataclasses.replace(ctx, scope=Scope(ctx.scope))
        return ir.Block(self.statements(t.children, inner), self.pos(t))

    def statements(self, items: Sequence[Any], ctx: Context) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in items:
            out += self.statement_and_calls(s, ctx)
        return tuple(out)

    def statement_and_calls(self, s: Tree, ctx: Context) -> list[ir.Stmt]:
        """A statement, preceded by the calls of the functions its expressions call (in order)."""
        saved, self.hoisted = self.hoisted, []
        try:
            r = self.attempt(lambda: self.statement(s, ctx))
            hoisted = self.hoisted
        finally:
            self.hoisted = saved
        if r is not None and hoisted:
            self.check_call_order(s, r, hoisted)
        out = [*hoisted, r] if r is not None else []
        if self.union_members:
            out = self.lower_unions(s, out)
        if any(stack_index.has_dynamic_index(x) for x in out):
            return self.lower_stack_indices(s, out, ctx)
        return out

    def lower_unions(self, s: Tree, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """Statements with the semantics of header unions written out on their members (`unions`)."""
        try:
            return [x for stmt in stmts for x in unions.lower(stmt, self.union_members)]
        except unions.Unsupported as exc:
            raise self.error(s, f"unsupported: {exc}") from None

    def lower_stack_indices(self, s: Tree, stmts: list[ir.Stmt], ctx: Context) -> list[ir.Stmt]:
        """Statements whose header stack indices are all constants (`stack_index`)."""
        try:
            return [x for stmt in stmts for x in stack_index.lower(stmt, self.fresh, ctx.block == "parser")]
        except stack_index.TooManyBranches:
            raise self.error(
                s, "unsupported: too many header stack elements indexed at run time here"
            ) from None

    def check_call_order(self, s: Tree, stmt: ir.Stmt, hoisted: list[ir.Stmt]) -> None:
        """Calls run before their statement; P4 runs them where they are, left to right. The two agree
        unless the rest of the statement reads a place a call changes (an out or inout argument):
        refused, not run in another order."""
        written = self.written_by(hoisted)
        if not written:
            return
        part = {
            ir.Assign: lambda: stmt.rhs,
            ir.VarDecl: lambda: stmt.init,
            ir.If: lambda: stmt.cond,
            ir.Switch: lambda: stmt.expr,
            ir.CallStmt: lambda: stmt.call,
            ir.Block: lambda: stmt.stmts[0].rhs,  # `return e;` in a function
        }.get(type(stmt), lambda: None)()
        for path in reads(part):
            if any(overlaps(path, w) for w in written):
                message = (
                    f"unsupported: {'.'.join(path)} is read in a statement whose function call changes it"
                )
                raise self.error(s, message)

    def statement(self, s: Tree, ctx: Context) -> ir.Stmt | None:
        kind = s.data
        if kind == "block":
            return self.block(s, ctx)
        if kind == "annotated_block":  # `@atomic { ... }`: the annotation changes nothing here
            return self.block(s.children[1], ctx)
        if kind == "op_assignment":
            return self.assignment(self.op_assignment(s), ctx)
        if kind == "var_decl":
            return self.var_decl(s, ctx)
        if kind == "const_decl":
            self.decl_const_decl(s, ctx.scope)
            return None
        if kind == "empty_stmt":
            return None
        if kind == "assignment":
            return self.assignment(s, ctx)
        if kind == "call_stmt":
            return self.call_stmt(s, ctx)
        if kind == "if_stmt":
            cond_t, then_t, *else_t = s.children
            cond = self.expect_bool(self.expr(cond_t, ctx, ir.BoolType()), cond_t, "if condition")
            then = self.as_block(then_t, ctx)
            other = self.as_block(else_t[0], ctx) if else_t and else_t[0] is not None else None
            return ir.If(cond, then, other, self.pos(s))
        if kind == "switch_stmt":
            if ctx.block == "action":  # p4c's bmv2 backend refuses it (it has no branches inside actions)
                raise self.error(s, "unsupported: switch statements in actions (bmv2 refuses them too)")
            return self.switch(s, ctx)
        if kind in ("for_stmt", "for_in_stmt"):
            raise self.error(s, "unsupported: for loops")
        if kind == "exit_stmt":
            if ctx.block == "parser":
                raise self.error(s, "exit is not allowed in a parser")
            return ir.Exit(self.pos(s))
        if kind == "return_stmt":
            if ctx.block == "parser":
                raise self.error(s, "return is not allowed in a parser")
            value_t = s.children[0] if s.children else None
            if ctx.returns is not None and not isinstance(ctx.returns, ir.VoidType):
                if value_t is None:
                    raise self.error(s, f"return needs a value of type {type_str(ctx.returns)}")
                value = self.coerce(self.expr(value_t, ctx, ctx.returns), ctx.returns, value_t)
                result = ir.Var(RESULT, ctx.returns, "action_param", "out", self.pos(s))
                return ir.Block(
                    (ir.Assign(result, value, self.pos(s)), ir.Return(None, self.pos(s))), self.pos(s)
                )
            if value_t is not None:
                raise self.error(s, "return with a value is only allowed in functions that return one")
            return ir.Return(None, self.pos(s))
        raise self.error(s, f"unsupported statement {kind}")

    def as_block(self, t: Tree, ctx: Context) -> ir.Block:
        if t.data == "block":
            return self.block(t, ctx)
        inner = dataclasses.replace(ctx, scope=Scope(ctx.scope))
        return ir.Block(tuple(self.statement_and_calls(t, inner)), self.pos(t))

    def assignment(self, s: Tree, ctx: Context) -> ir.Assign:
        lhs_t, rhs_t = s.children
        lhs = self.expr(lhs_t, ctx, None)
        self.check_lvalue(lhs, lhs_t)
        rhs = self.coerce(self.expr(rhs_t, ctx, lhs.type), lhs.type, rhs_t)
        return ir.Assign(lhs, rhs, self.pos(s))

    def op_assignment(self, s: Tree) -> Tree:
        """`a op= b` as `a = a op b` (P4_16 1.2.4), refused where evaluating `a` twice could differ."""
        lhs_t, op_tok, rhs_t = s.children
        if any(isinstance(n, Tree) and n.data in _CALLS for n in lhs_t.iter_subtrees()):
            raise self.error(lhs_t, f"unsupported: a call on the left of {op_tok}")
        op = Token("OP", str(op_tok)[:-1])
        op.line, op.column = op_tok.line, op_tok.column
        return Tree("assignment", [lhs_t, Tree("binop", [lhs_t, op, rhs_t], s.meta)], s.meta)

    def check_lvalue(self, e: ir.Expr, t: Any) -> None:
        root = lvalue_root(e)
        if isinstance(e, ir.HeaderMethod | ir.ExternMethodCall | ir.ApplyResultMember):
            raise self.error(t, "cannot assign to the result of a call")
        if not isinstance(root, ir.Var):
            if is_const(root):
                raise self.error(t, f"cannot assign to constant {source_text(t)}")
            raise self.error(t, f"{source_text(t)} is not an l-value")
        if root.direction == "in":
            raise self.error(t, f"cannot assign to {root.name}: it is an 'in' parameter")
        if root.kind == "action_param" and root.direction == "":
            raise self.error(
                t, f"cannot assign to {root.name}: directionless action parameters are read-only"
            )
        if isinstance(root.type, ir.ExternType):
            raise self.error(t, f"cannot assign to extern object {root.name}")

    def call_stmt(self, s: Tree, ctx: Context) -> ir.Stmt | None:
        t = s.children[0]
        if not (isinstance(t, Tree) and t.data in _CALLS):
            raise self.error(s, "expression statement must be a call")
        inlined = self.sub_block_apply(t, ctx)
        if inlined is not None:
            return inlined
        verify = self.verify(t, ctx) if t.data == "call" else None
        if verify is not None:
            return verify
        call = self.call(t, ctx, statement=True)
        if isinstance(call, ir.Const):  # static_assert, already checked
            return None
        return ir.CallStmt(call, self.pos(s))

    def verify(self, t: Tree, ctx: Context) -> ir.Verify | None:
        callee = t.children[0]
        if not (callee.data == "name_ref" and str(callee.children[0]) == _BUILTIN_VERIFY):
            return None
        if ctx.block != "parser":
            raise self.error(t, "verify is only allowed in parsers")
        args = t.children[1].children if t.children[1] is not None else []
        if len(args) != 2:
            raise self.error(t, f"verify takes 2 arguments, got {len(args)}")
        cond = self.expect_bool(self.expr(args[0], ctx, ir.BoolType()), args[0], "verify condition")
        err = self.expr(args[1], ctx, ir.ErrorType())
        if not isinstance(err, ir.ErrorValue):
            raise self.error(
                args[1], "the second argument of verify must be an error constant such as error.NoMatch"
            )
        return ir.Verify(cond, err, self.pos(t))

    def switch(self, s: Tree, ctx: Context) -> ir.Switch:
        subject_t, *case_trees = s.children
        subject = self.expr(subject_t, ctx, None)
        table_switch = isinstance(subject, ir.ApplyResultMember) and subject.member == "action_run"
        if not table_switch and not isinstance(subject.type, ir.BitType | ir.EnumType):
            raise self.error(subject_t, "switch needs table.apply().action_run or a bit<W>/enum expression")
        table_actions: tuple[str, ...] = ()
        if table_switch:
            assert isinstance(subject, ir.ApplyResultMember)
            table_actions = tuple(r.action for r in self.block_tables[subject.apply.table].actions)
        cases: list[ir.SwitchCase] = []
        seen: set[Any] = set()
        for c in case_trees:
            label_t = c.children[0]
            body = self.block(c.children[1], ctx) if c.data == "switch_case_body" else None
            if isinstance(label_t, Tree) and label_t.data == "default_label":
                if "default" in seen:
                    self.error(label_t, "duplicate default label")
                seen.add("default")
                cases.append(ir.SwitchCase((), True, body, self.pos(c)))
                continue
            if table_switch:
                name = str(label_t.children[0]) if label_t.data == "name_ref" else None
                info = ctx.scope.lookup(name) if name else None
                if not isinstance(info, ActionInfo) or info.fq_name not in table_actions:
                    self.error(label_t, f"{source_text(label_t)} is not an action of the switched table")
                    continue
                label: ir.Expr = ir.ActionRef(info.fq_name, ir.VoidType(), self.pos(label_t))
                key: Any = info.fq_name
            else:
                label = self.coerce(self.expr(label_t, ctx, subject.type), subject.type, label_t)
                if not is_const(label):
                    self.error(label_t, "switch labels must be compile-time constants")
                    continue
                key = label
            if key in seen:
                self.error(label_t, f"duplicate switch label {source_text(label_t)}")
                continue
            seen.add(key)
            cases.append(ir.SwitchCase((label,), False, body, self.pos(c)))
        if cases and cases[-1].body is None:
            self.error(case_trees[-1], "the last switch case needs a body")
        return ir.Switch(subject, tuple(cases), self.pos(s))

    # ------------------------------------------------------------ expressions

    def expect_bool(self, e: ir.Expr, t: Any, what: str) -> ir.Expr:
        if not isinstance(e.type, ir.BoolType):
            hint = " (compare with == 1 or cast with (bool))" if e.type == ir.BitType(1) else ""
            raise self.error(t, f"{what} must be bool, not {type_str(e.type)}{hint}")
        return e

    def coerce(self, e: ir.Expr, want: ir.Type, t: Any) -> ir.Expr:
        """`e` as a value of type `want`: int literals adapt, everything else must already match."""
        if e.type == want or isinstance(want, ir.TypeVar):
            return e
        if isinstance(e, ir.Const) and isinstance(e.type, ir.InfIntType):
            if isinstance(want, ir.BitType):
                value = int(e.value)
                lo = -(1 << (want.width - 1)) if want.signed else -(1 << want.width) + 1
                if value >= (1 << want.width) or value < lo:
                    raise self.error(t, f"value {value} does not fit in {type_str(want)}")
                return ir.Const(want, fit(value, want), e.pos)
            if isinstance(want, ir.InfIntType):
                return e
        if isinstance(want, ir.InfIntType) and isinstance(e, ir.Const) and isinstance(e.type, ir.BitType):
            return e
        if isinstance(e, ir.ListExpr) and self.is_union(want):
            raise self.error(t, f"a header union ({want.name}) cannot be initialized with a list")
        if (
            isinstance(e, ir.ListExpr)
            and isinstance(want, ir.HeaderType)
            and ir.varbit_field(self.headers[want.name])
        ):
            raise self.error(t, f"unsupported: a list assigned to {want.name}, which has a varbit field")
        if isinstance(e, ir.ListExpr) and isinstance(want, ir.HeaderType | ir.StructType):
            fields = (self.headers if isinstance(want, ir.HeaderType) else self.structs)[want.name].fields
            if len(fields) != len(e.elements):
                raise self.error(t, f"{want.name} has {len(fields)} fields, the list gives {len(e.elements)}")
            elements = tuple(self.coerce(x, f.type, t) for x, f in zip(e.elements, fields, strict=True))
            return ir.ListExpr(elements, want, e.pos)
        raise self.error(t, self.mismatch(want, e.type))

    def coerce_soft(self, e: ir.Expr, want: ir.Type | None, t: Any) -> ir.Expr:
        """An int literal takes the width a struct initializer's field gives it; nothing else changes."""
        if want is not None and isinstance(e, ir.Const) and isinstance(e.type, ir.InfIntType):
            return self.coerce(e, want, t)
        return e

    @staticmethod
    def mismatch(want: ir.Type, got: ir.Type) -> str:
        msg = f"type mismatch: expected {type_str(want)}, got {type_str(got)}"
        if (
            isinstance(want, ir.BitType)
            and isinstance(got, ir.BitType | ir.BoolType)
            or (isinstance(want, ir.BoolType) and isinstance(got, ir.BitType))
        ):
            msg += f" (use an explicit cast: ({type_str(want)}) ...)"
        return msg

    def expr(self, t: Any, ctx: Context, want: ir.Type | None) -> ir.Expr:
        kind = t.data
        handler = getattr(self, "e_" + kind, None)
        if handler is None:
            raise self.error(t, f"unsupported expression: {kind.replace('_', ' ')}")
        return handler(t, ctx, want)

    def literal(self, t: Tree | Token) -> tuple[int, ir.Type]:
        """An integer literal's value and type; one too wide to compute with is refused where it is."""
        try:
            return parse_int(str(t.children[0] if isinstance(t, Tree) else t))
        except ConstTooWide as wide:
            raise self.error(t, f"unsupported: {wide}") from None

    def e_int_lit(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        value, typ = self.literal(t)
        if isinstance(typ, ir.BitType):
            if value >= (1 << typ.width):
                raise self.error(t, f"value {value} does not fit in {type_str(typ)}")
            return ir.Const(typ, value, self.pos(t))
        return ir.Const(typ, value, self.pos(t))

    def e_true_lit(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        return ir.Const(ir.BoolType(), True, self.pos(t))

    def e_false_lit(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        return ir.Const(ir.BoolType(), False, self.pos(t))

    def e_string_lit(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        return ir.StringLit(str(t.children[0])[1:-1], ir.StringType(), self.pos(t))

    def e_name_ref(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        name = str(t.children[0])
        found = ctx.scope.lookup(name)
        if found is None:
            if name in self.functions:
                raise self.error(t, f"{name} is a function: call it with ()")
            raise self.error(t, f"{name}: undeclared name")
        if isinstance(found, ir.Var):
            return ir.Var(found.name, found.type, found.kind, found.direction, self.pos(t))
        if isinstance(found, ir.Const):
            return ir.Const(found.type, found.value, self.pos(t))
        if isinstance(found, ir.EnumValue | ir.ErrorValue):
            return found
        if isinstance(found, Alias):  # a parameter of an inlined block that stands for its argument
            return found.expr
        what = {TableInfo: "a table", ActionInfo: "an action", InstanceInfo: "an extern instance"}.get(
            type(found)
        )
        raise self.error(t, f"{name} is {what or 'not a value'} and cannot be used as a value here")

    def e_dot_name_ref(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        return self.e_name_ref(t, Context(self.globals, ctx.block, ctx.in_apply), want)

    def e_type_member(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        tname, member = str(t.children[0]), str(t.children[1])
        typ = self.types.get(tname)
        if isinstance(typ, ir.EnumType):
            decl = self.enums[tname]
            for m, v in decl.members:
                if m == member:
                    return ir.EnumValue(typ, m, v, self.pos(t))
            raise self.error(t.children[1], f"{tname}.{member}: no such enum member")
        raise self.error(t, f"{tname}.{member}: {tname} is not an enum")

    def e_error_member(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        name = str(t.children[0])
        if name not in self.errors:
            raise self.error(t.children[0], f"error.{name}: no such error")
        return ir.ErrorValue(name, ir.ErrorType(), self.pos(t))

    def e_ctor_call(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        raise self.error(t, f"unsupported: instantiating {t.children[0]} in an expression")

    def e_list_expr(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        items = t.children[0].children if t.children[0] is not None else []
        wants: list[ir.Type | None] = [None] * len(items)
        if isinstance(want, ir.HeaderType | ir.StructType):
            fields = (self.headers if isinstance(want, ir.HeaderType) else self.structs)[want.name].fields
            if len(fields) == len(items):
                wants = [f.type for f in fields]
        elems = tuple(self.coerce_soft(self.expr(i, ctx, w), w, i) for i, w in zip(items, wants, strict=True))
        for e, i in zip(elems, items, strict=True):
            if isinstance(e.type, ir.InfIntType):
                raise self.error(i, "list elements need a width: write 8w5 or cast the constant")
        return ir.ListExpr(elems, ir.TupleType(tuple(e.type for e in elems)), self.pos(t))

    def e_struct_expr(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        """`{f1 = a, f2 = b}`: a list of the struct's or header's fields in their order, each named once."""
        if not isinstance(want, ir.HeaderType | ir.StructType):
            raise self.error(t, "a structure expression {f = ...} needs a struct or header type here")
        fields = (self.headers if isinstance(want, ir.HeaderType) else self.structs)[want.name].fields
        given: dict[str, Any] = {}
        for item in t.children:
            fname = str(item.children[0])
            if fname in given:
                raise self.error(item, f"{fname}: given twice")
            if all(f.name != fname for f in fields):
                raise self.error(item, f"{fname}: no field {fname} in {want.name}")
            given[fname] = item.children[1]
        missing = [f.name for f in fields if f.name not in given]
        if missing:
            raise self.error(t, f"{type_str(want)}: no value for {', '.join(missing)}")
        items = Tree("expression_list", [given[f.name] for f in fields], t.meta)
        return self.e_list_expr(Tree("list_expr", [items], t.meta), ctx, want)

    def e_member(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        base_t, name_tok = t.children
        name = str(name_tok)
        if base_t.data in _CALLS:
            base = self.call(base_t, ctx, statement=False)
            if isinstance(base, ir.TableApply):
                if name in ("hit", "miss"):
                    return ir.ApplyResultMember(base, name, ir.BoolType(), self.pos(t))
                if name == "action_run":
                    return ir.ApplyResultMember(base, name, ir.ActionEnumType(base.table), self.pos(t))
                raise self.error(name_tok, f"{name}: table.apply() has only hit, miss and action_run")
            if not isinstance(base, ir.Lookahead):
                raise self.error(name_tok, f"{name}: no such member of {type_str(base.type)}")
        else:
            base = self.expr(base_t, ctx, None)
        typ = base.type
        if isinstance(typ, ir.HeaderType | ir.StructType):
            decl = self.headers[typ.name] if isinstance(typ, ir.HeaderType) else self.structs[typ.name]
            for f in decl.fields:
                if f.name == name:
                    return ir.Member(base, name, f.type, self.pos(t))
            raise self.error(name_tok, f"{name}: no field {name} in {typ.name}")
        if isinstance(typ, ir.StackType):
            if name in ("next", "last", "lastIndex"):
                if ctx.block != "parser":
                    raise self.error(name_tok, f"{source_text(base_t)}.{name} is only allowed in parsers")
                if name == "next" and not ctx.extract_target:
                    raise self.error(name_tok, f"unsupported: {source_text(base_t)}.next outside extract")
                mtype: ir.Type = ir.BitType(32) if name == "lastIndex" else typ.element
                return ir.StackMember(base, name, mtype, self.pos(t))
            if name == "size":
                return ir.Const(ir.BitType(32), typ.size, self.pos(t))
        raise self.error(
            name_tok, f"{name}: {source_text(base_t)} of type {type_str(typ)} has no member {name}"
        )

    def e_index(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        base = self.expr(t.children[0], ctx, None)
        if not isinstance(base.type, ir.StackType):
            raise self.error(t, f"{source_text(t.children[0])} is not a header stack (for bits use [hi:lo])")
        index = self.expr(t.children[1], ctx, ir.BitType(32))
        if not isinstance(index.type, ir.BitType | ir.InfIntType):
            message = f"a header stack index must be bit<W>, int<W> or an integer, not {type_str(index.type)}"
            raise self.error(t.children[1], message)
        if not isinstance(index, ir.Const):
            if self.is_union(base.type.element):  # p4c: "Target expects constant array indices ..."
                message = (
                    f"unsupported: an index into a header union stack ({type_str(base.type)}) that is not "
                    "a constant (bmv2 needs one; p4c refuses what its constant folding does not make one)"
                )
                raise self.error(t.children[1], message)
            if self.hoisted is None and not self.lowering_select:
                raise self.error(
                    t.children[1],
                    "unsupported: a header stack index that is not a constant outside statements",
                )
            # the statement is lowered to constant indices (stack_index.lower) once it is checked
            return ir.StackIndex(base, index, base.type.element, self.pos(t))
        if not 0 <= int(index.value) < base.type.size:
            raise self.error(t.children[1], f"index {index.value} out of range for {type_str(base.type)}")
        return ir.StackIndex(base, index, base.type.element, self.pos(t))

    def e_slice(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        base = self.expr(t.children[0], ctx, None)
        hi, lo = self.const_int(t.children[1]), self.const_int(t.children[2])
        if lo < 0 or hi < lo:
            raise self.error(t, f"slice [{hi}:{lo}]: bounds must satisfy hi >= lo >= 0")
        if hi - lo + 1 > subset.MAX_WIDTH:
            raise self.error(t, f"unsupported: slice [{hi}:{lo}] wider than {subset.MAX_WIDTH} bits")
        if isinstance(base, ir.Const) and isinstance(base.type, ir.InfIntType):
            return ir.Const(
                ir.BitType(hi - lo + 1), (int(base.value) >> lo) & ((1 << (hi - lo + 1)) - 1), self.pos(t)
            )
        if not isinstance(base.type, ir.BitType):
            raise self.error(t, f"cannot slice a value of type {type_str(base.type)}")
        if not (0 <= lo <= hi < base.type.width):
            raise self.error(t, f"slice [{hi}:{lo}] out of range for {type_str(base.type)}")
        if isinstance(base, ir.Const):
            return ir.Const(
                ir.BitType(hi - lo + 1), (int(base.value) >> lo) & ((1 << (hi - lo + 1)) - 1), self.pos(t)
            )
        return ir.Slice(base, hi, lo, ir.BitType(hi - lo + 1), self.pos(t))

    def e_cast(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        typ = self.resolve_type(t.children[0])
        e = self.expr(t.children[1], ctx, typ)
        src = e.type
        if src == typ:
            return e
        ok = False
        if isinstance(typ, ir.BitType):
            ok = (
                isinstance(src, ir.BitType | ir.InfIntType)
                or (src == ir.BoolType() and typ.width == 1)
                or (isinstance(src, ir.EnumType) and src.underlying is not None)
            )
        elif isinstance(typ, ir.BoolType):
            ok = src == ir.BitType(1) or (
                isinstance(e, ir.Const) and isinstance(src, ir.InfIntType) and e.value in (0, 1)
            )
        elif isinstance(typ, ir.EnumType) and typ.underlying is not None:
            ok = isinstance(src, ir.BitType | ir.InfIntType)
        if not ok:
            raise self.error(t, f"cannot cast {type_str(src)} to {type_str(typ)}")
        if isinstance(e, ir.Const) and isinstance(typ, ir.BitType):
            return ir.Const(typ, fit(self.int_value(e), typ), self.pos(t))
        if isinstance(e, ir.Const) and isinstance(typ, ir.BoolType):
            return ir.Const(typ, bool(e.value), self.pos(t))
        return ir.Cast(typ, e, self.pos(t))

    @staticmethod
    def int_value(e: ir.Const) -> int:
        if isinstance(e.type, ir.BitType):
            return signed_value(int(e.value), e.type)
        return int(e.value)

    def e_not_op(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        e = self.expect_bool(self.expr(t.children[-1], ctx, ir.BoolType()), t.children[-1], "operand of !")
        if isinstance(e, ir.Const):
            return ir.Const(ir.BoolType(), not e.value, self.pos(t))
        return ir.Unary("!", e, ir.BoolType(), self.pos(t))

    def e_compl_op(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        e = self.expr(t.children[-1], ctx, want)
        if isinstance(e.type, ir.InfIntType) and isinstance(want, ir.BitType):
            e = self.coerce(e, want, t)
        if not isinstance(e.type, ir.BitType):
            raise self.error(t, f"~ needs a bit<W> or int<W> operand, not {type_str(e.type)}")
        if isinstance(e, ir.Const):
            return ir.Const(e.type, fit(~int(e.value), e.type), self.pos(t))
        return ir.Unary("~", e, e.type, self.pos(t))

    def e_neg_op(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        e = self.expr(t.children[-1], ctx, want)
        if isinstance(e, ir.Const) and isinstance(e.type, ir.InfIntType):
            return ir.Const(e.type, -int(e.value), self.pos(t))
        if not isinstance(e.type, ir.BitType):
            raise self.error(t, f"unary - needs a numeric operand, not {type_str(e.type)}")
        if isinstance(e, ir.Const):
            return ir.Const(e.type, fit(-int(e.value), e.type), self.pos(t))
        return ir.Unary("-", e, e.type, self.pos(t))

    def e_plus_op(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        return self.expr(t.children[-1], ctx, want)

    def e_mux(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        c_t, a_t, b_t = t.children
        cond = self.expect_bool(self.expr(c_t, ctx, ir.BoolType()), c_t, "condition of ?:")
        a = self.conditional(a_t, ctx, want, "in a branch of ?:")
        b = self.conditional(b_t, ctx, want, "in a branch of ?:")
        a, b = self.unify(a, b, a_t, b_t, "?:")
        if isinstance(a.type, ir.InfIntType) and not isinstance(cond, ir.Const):
            raise self.error(t, "the branches of ?: need a width: cast one of the constants")
        if isinstance(cond, ir.Const):
            return a if cond.value else b
        return ir.Mux(cond, a, b, a.type, self.pos(t))

    def unify(self, a: ir.Expr, b: ir.Expr, a_t: Any, b_t: Any, op: str) -> tuple[ir.Expr, ir.Expr]:
        if a.type == b.type:
            return a, b
        if isinstance(a.type, ir.InfIntType):
            return self.coerce(a, b.type, a_t), b
        if isinstance(b.type, ir.InfIntType):
            return a, self.coerce(b, a.type, b_t)
        raise self.error(
            b_t,
            f"{op}: operands have different types {type_str(a.type)} and {type_str(b.type)}"
            + (
                " (use an explicit cast)"
                if isinstance(a.type, ir.BitType | ir.BoolType)
                and isinstance(b.type, ir.BitType | ir.BoolType)
                else ""
            ),
        )

    def e_binop(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        a_t, op_tok, b_t = t.children
        op = str(op_tok)
        pos = self.pos(op_tok)
        if op in LOGIC:
            a = self.expect_bool(self.expr(a_t, ctx, ir.BoolType()), a_t, f"operand of {op}")
            b = self.expect_bool(
                self.conditional(b_t, ctx, ir.BoolType(), f"on the right of {op}"), b_t, f"operand of {op}"
            )
            if ir.contains_apply(b):  # both backends apply tables before the expression: no short circuit
                raise self.error(b_t, f"unsupported: table apply on the right of {op}")
            if isinstance(a, ir.Const) and isinstance(b, ir.Const):
                value = (a.value and b.value) if op == "&&" else (a.value or b.value)
                return ir.Const(ir.BoolType(), bool(value), pos)
            return ir.Binary(op, a, b, ir.BoolType(), pos)
        operand_want = want if op in ARITH | BITWISE else None
        a = self.expr(a_t, ctx, operand_want)
        if op in SHIFT:
            a, b = self.right_operand(a, b_t, ctx, None)
            if (
                isinstance(b.type, ir.BitType)
                and b.type.signed
                or (isinstance(b, ir.Const) and isinstance(b.type, ir.InfIntType) and int(b.value) < 0)
            ):
                raise self.error(b_t, "shift amount must be unsigned")
            if not isinstance(b.type, ir.BitType | ir.InfIntType):
                raise self.error(b_t, f"shift amount must be a number, not {type_str(b.type)}")
            if isinstance(a.type, ir.InfIntType) and not (
                isinstance(a, ir.Const) and isinstance(b, ir.Const)
            ):
                raise self.error(
                    a_t, "shifting an int constant by a variable needs a width: cast the constant"
                )
            if not isinstance(a.type, ir.BitType | ir.InfIntType):
                raise self.error(a_t, f"cannot shift a value of type {type_str(a.type)}")
            if isinstance(a, ir.Const) and isinstance(b, ir.Const):
                return self.fold(op, a, b, a.type, pos)
            return ir.Binary(op, a, b, a.type, pos)
        a, b = self.right_operand(
            a, b_t, ctx, a.type if not isinstance(a.type, ir.InfIntType) else operand_want
        )
        if isinstance(a.type, ir.InfIntType) and not isinstance(b.type, ir.InfIntType):
            a = self.coerce(a, b.type, a_t)
        if op == "++":
            for e, et in ((a, a_t), (b, b_t)):
                if not isinstance(e.type, ir.BitType):
                    raise self.error(et, f"++ needs bit<W> or int<W> operands, not {type_str(e.type)}")
            assert isinstance(a.type, ir.BitType) and isinstance(b.type, ir.BitType)
            typ = ir.BitType(a.type.width + b.type.width, a.type.signed)
            if isinstance(a, ir.Const) and isinstance(b, ir.Const):
                return ir.Const(typ, (int(a.value) << b.type.width) | int(b.value), pos)
            return ir.Binary(op, a, b, typ, pos)
        a, b = self.unify(a, b, a_t, b_t, op)
        typ = a.type
        if op in EQUALITY:
            if not isinstance(
                typ, ir.BitType | ir.InfIntType | ir.BoolType | ir.EnumType | ir.ErrorType | ir.VarbitType
            ):
                raise self.error(t, f"{op} is not defined on {type_str(typ)}")
            if is_const(a) and is_const(b):
                return ir.Const(ir.BoolType(), (a == b or self.same_const(a, b)) == (op == "=="), pos)
            return ir.Binary(op, a, b, ir.BoolType(), pos)
        if not isinstance(typ, ir.BitType | ir.InfIntType):
            raise self.error(t, f"{op} is not defined on {type_str(typ)}")
        if op in ORDER:
            if isinstance(a, ir.Const) and isinstance(b, ir.Const):
                x, y = self.int_value(a), self.int_value(b)
                value = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
                return ir.Const(ir.BoolType(), value, pos)
            return ir.Binary(op, a, b, ir.BoolType(), pos)
        if op in ("/", "%"):
            if not (isinstance(b, ir.Const) and int(b.value) > 0):
                raise self.error(b_t, f"unsupported: {op} by a non-constant or zero divisor")
            if isinstance(typ, ir.BitType) and typ.signed:
                raise self.error(t, f"unsupported: {op} on signed values")
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return self.fold(op, a, b, typ, pos)
        return ir.Binary(op, a, b, typ, pos)

    @staticmethod
    def same_const(a: ir.Expr, b: ir.Expr) -> bool:
        return (
            getattr(a, "value", None) == getattr(b, "value", None)
            and a.type == b.type
            and (
                getattr(a, "member", None) == getattr(b, "member", None)
                and getattr(a, "name", None) == getattr(b, "name", None)
            )
        )

    def too_wide(self, pos: ir.Pos) -> Fail:
        """A folded `int` constant too wide to compute with (p4c, too, stops at 2048 bits)."""
        self.diagnostics.append(Diagnostic(pos, f"unsupported: a constant wider than {MAX_CONST_BITS} bits"))
        return Fail()

    def fold(self, op: str, a: ir.Const, b: ir.Const, typ: ir.Type, pos: ir.Pos) -> ir.Const:
        x, y = self.int_value(a), self.int_value(b)
        if op == "<<" and isinstance(typ, ir.BitType) and y >= typ.width:
            return ir.Const(typ, 0, pos)  # every bit shifted out (without computing x << y first)
        if op == "<<" and x and x.bit_length() + y > MAX_CONST_BITS:
            raise self.too_wide(pos)
        if op in ("|+|", "|-|") and isinstance(typ, ir.BitType):
            r = x + y if op == "|+|" else x - y
            lo, hi = (
                (-(1 << (typ.width - 1)), (1 << (typ.width - 1)) - 1)
                if typ.signed
                else (0, (1 << typ.width) - 1)
            )
            r = min(max(r, lo), hi)
        else:
            r = {
                "+": lambda: x + y,
                "-": lambda: x - y,
                "*": lambda: x * y,
                "/": lambda: x // y,
                "%": lambda: x % y,
                "&": lambda: x & y,
                "|": lambda: x | y,
                "^": lambda: x ^ y,
                "<<": lambda: x << y,
                ">>": lambda: x >> y,
                "|+|": lambda: x + y,
                "|-|": lambda: x - y,
            }[op]()
        if isinstance(typ, ir.BitType):
            return ir.Const(typ, fit(r, typ), pos)
        if r.bit_length() > MAX_CONST_BITS:
            raise self.too_wide(pos)
        return ir.Const(typ, r, pos)

    def e_call(self, t: Tree, ctx: Context, want: ir.Type | None) -> ir.Expr:
        call = self.call(t, ctx, statement=False)
        if isinstance(call.type, ir.VoidType):
            raise self.error(t, f"{source_text(t)} returns no value")
        return call

    e_generic_call = e_call
    e_generic_method_call = e_call

    @staticmethod
    def call_parts(t: Tree) -> tuple[Tree, Tree | None, list[Any] | None]:
        """(callee as a member/name_ref tree, args tree, explicit type argument trees or None)."""
        if t.data == "call":
            return t.children[0], t.children[1], None
        if t.data == "generic_call":
            tok, type_args, args = t.children
            name = Token("NAME", str(tok).rstrip("< \t"))
            name.line, name.column = tok.line, tok.column
            return Tree("name_ref", [name], t.meta), args, list(type_args.children)
        target, tok, type_args, args = t.children
        name = Token("NAME", str(tok).rstrip("< \t"))
        name.line, name.column = tok.line, tok.column
        return Tree("member", [target, name], t.meta), args, list(type_args.children)

    # ------------------------------------------------------------ calls

    def call(self, t: Tree, ctx: Context, *, statement: bool) -> ir.Expr:
        callee, args_tree, type_arg_trees = self.call_parts(t)
        arg_trees = list(args_tree.children) if args_tree is not None else []
        pos = self.pos(t)
        type_args = None if type_arg_trees is None else tuple(self.resolve_type(a) for a in type_arg_trees)
        if callee.data == "member":
            target_t, mname_tok = callee.children
            mname = str(mname_tok)
            target = self.callee_target(target_t, ctx)
            if isinstance(target, TableInfo):
                if mname != "apply":
                    raise self.error(mname_tok, f"{mname}: tables have only apply()")
                if arg_trees:
                    raise self.error(t, "apply() takes no arguments")
                if (
                    not ctx.in_apply and ctx.block == "control"
                ):  # a table key, a control's local: P4 allows it
                    raise self.error(t, f"unsupported: applying table {target.name} outside an apply block")
                if not ctx.in_apply:
                    where = {"action": "an action", "parser": "a parser"}.get(ctx.block, "here")
                    raise self.error(t, f"{target.name}.apply() cannot be called from {where}")
                return ir.TableApply(target.fq_name, ir.ApplyResultType(target.fq_name), pos)
            if isinstance(target, InstanceInfo):
                return self.extern_method(target.decl, mname, mname_tok, arg_trees, t, ctx, type_args)
            if isinstance(target, ir.Expr):
                return self.value_method(target, target_t, mname, mname_tok, arg_trees, t, ctx, type_args)
            raise self.error(target_t, f"{source_text(target_t)} has no methods")
        if callee.data in ("name_ref", "dot_name_ref"):
            name = str(callee.children[0])
            scope = self.globals if callee.data == "dot_name_ref" else ctx.scope
            found = scope.lookup(name)
            if isinstance(found, ActionInfo):
                if ctx.block == "parser":
                    raise self.error(t, f"actions cannot be called from a parser ({name})")
                return self.action_call(found, arg_trees, t, ctx)
            if isinstance(found, FunctionInfo):
                return self.user_function_call(found, arg_trees, t, ctx, statement)
            if found is None and name in self.functions:
                return self.function_call(name, arg_trees, t, ctx, type_args)
            if type_args is not None and found is not None:
                raise self.error(t, f"{name} takes no type arguments")
            if found is None:
                raise self.error(callee, f"{name}: undeclared name")
            raise self.error(callee, f"{name} is not callable")
        raise self.error(t, f"unsupported call of {source_text(callee)}")

    def callee_target(self, target_t: Tree, ctx: Context) -> Any:
        if target_t.data == "name_ref":
            found = ctx.scope.lookup(str(target_t.children[0]))
            if isinstance(found, TableInfo | InstanceInfo):
                return found
        return self.expr(target_t, ctx, None)

    def args(
        self,
        params: Sequence[ir.Param],
        arg_trees: Sequence[Any],
        t: Tree,
        ctx: Context,
        what: str,
        binding: dict[str, ir.Type],
    ) -> tuple[tuple[ir.Expr, ...], tuple[str, ...]]:
        if len(params) != len(arg_trees):
            raise self.error(t, f"{what}: expects {len(params)} arguments, got {len(arg_trees)}")
        out: list[ir.Expr] = []
        for p, a in zip(params, arg_trees, strict=True):
            if isinstance(a, Tree) and a.data == "dontcare_arg":
                raise self.error(a, "unsupported: don't-care arguments (_)")
            if isinstance(a, Tree) and a.data == "named_arg":
                raise self.error(a, "unsupported: named arguments")
            ptype = self.subst(p.type, binding)
            e = self.expr(a, ctx, None if isinstance(ptype, ir.TypeVar) else ptype)
            if isinstance(ptype, ir.TypeVar):
                bound = binding.get(ptype.name)
                if bound is None:
                    binding[ptype.name] = e.type
                else:
                    e = self.coerce(e, bound, a)
            else:
                try:
                    e = self.coerce(e, ptype, a)
                except Fail:
                    self.diagnostics[-1] = Diagnostic(
                        self.pos(a), f"{what}: argument {p.name}: " + self.diagnostics[-1].message
                    )
                    raise
            if p.direction in ("out", "inout"):
                try:
                    self.check_lvalue(e, a)
                except Fail:
                    self.diagnostics[-1] = Diagnostic(
                        self.pos(a),
                        f"{what}: argument {p.name} is '{p.direction}' and needs an l-value; "
                        + self.diagnostics[-1].message,
                    )
                    raise
            out.append(e)
        return tuple(out), tuple(p.direction for p in params)

    def extern_method(
        self,
        inst: ir.InstanceDecl,
        mname: str,
        mname_tok: Any,
        arg_trees: list[Any],
        t: Tree,
        ctx: Context,
        type_args: tuple[ir.Type, ...] | None = None,
    ) -> ir.Expr:
        info = self.externs_info(inst.extern)
        overloads = [m for m in info.methods.get(mname, []) if len(m.params) == len(arg_trees)]
        if not overloads:
            if mname not in info.methods:
                raise self.error(mname_tok, f"{mname}: {inst.extern} has no method {mname}")
            counts = sorted({len(m.params) for m in info.methods[mname]})
            raise self.error(
                t,
                f"{inst.name}.{mname}: expects {' or '.join(map(str, counts))} arguments, "
                f"got {len(arg_trees)}",
            )
        if ctx.block == "global":
            raise self.error(t, "extern methods cannot be called here")
        if (inst.extern, mname) not in _EXTERN_METHODS:
            raise self.error(mname_tok, f"unsupported: {inst.extern}.{mname}")
        m = overloads[0]
        binding = dict(zip(info.type_params, inst.type_args, strict=False))
        if type_args is not None:
            if len(type_args) != len(m.type_params):
                raise self.error(t, f"{inst.name}.{mname}: expects {len(m.type_params)} type arguments")
            binding.update(zip(m.type_params, type_args))
        args, dirs = self.args(m.params, arg_trees, t, ctx, f"{inst.name}.{mname}", binding)
        ret = self.subst(m.return_type, binding)
        if inst.extern == "direct_meter" and mname == "read":
            self.meter_reads.setdefault(inst.fq_name, []).append((args[0], self.pos(t)))
        return ir.ExternMethodCall(
            inst.fq_name,
            inst.extern,
            mname,
            args,
            dirs,
            ret,
            tuple(binding.get(p, ir.VoidType()) for p in m.type_params),
            self.pos(t),
        )

    def value_method(
        self,
        target: ir.Expr,
        target_t: Any,
        mname: str,
        mname_tok: Any,
        arg_trees: list[Any],
        t: Tree,
        ctx: Context,
        type_args: tuple[ir.Type, ...] | None = None,
    ) -> ir.Expr:
        typ = target.type
        pos = self.pos(t)
        if isinstance(typ, ir.ExternType) and typ.name == "packet_in" and mname == "lookahead":
            return self.lookahead(target, type_args, arg_trees, t, ctx)
        if type_args is not None:
            if not (isinstance(typ, ir.ExternType) and (typ.name, mname) in _GENERIC_PACKET_METHODS):
                raise self.error(t, f"unsupported: explicit type arguments on {mname}")
            # packet.extract<T>(h) and emit<T>(h): T is the type of h, given rather than inferred
            call = self.value_method(target, target_t, mname, mname_tok, arg_trees, t, ctx)
            data = call.header if isinstance(call, ir.Extract | ir.Emit) else None
            if data is not None and (len(type_args) != 1 or data.type != type_args[0]):
                given = ", ".join(type_str(a) for a in type_args)
                raise self.error(t, f"{mname}<{given}>: the argument has type {type_str(data.type)}")
            return call
        if self.is_union(typ) and mname == "isValid":
            if arg_trees:
                raise self.error(t, f"{mname}() takes no arguments")
            return unions.is_valid(target, self.structs[typ.name], pos)
        if isinstance(typ, ir.HeaderType):
            if mname in ("isValid", "setValid", "setInvalid"):
                if arg_trees:
                    raise self.error(t, f"{mname}() takes no arguments")
                if mname != "isValid":
                    self.check_lvalue(target, target_t)
                rtype: ir.Type = ir.BoolType() if mname == "isValid" else ir.VoidType()
                return ir.HeaderMethod(target, mname, rtype, pos)
            raise self.error(mname_tok, f"{mname}: headers have isValid, setValid and setInvalid")
        if isinstance(typ, ir.StackType):
            if mname not in ("push_front", "pop_front"):
                raise self.error(mname_tok, f"{mname}: header stacks have push_front and pop_front")
            if len(arg_trees) != 1:
                raise self.error(t, f"{mname} takes 1 argument, got {len(arg_trees)}")
            count = self.const_int(arg_trees[0])
            if count <= 0:
                raise self.error(arg_trees[0], f"{mname}: the count must be a positive constant")
            self.check_lvalue(target, target_t)
            return ir.StackOp(target, mname, count, ir.VoidType(), pos)
        if isinstance(typ, ir.ExternType) and isinstance(target, ir.Var):
            if typ.name == "packet_in" and mname == "extract":
                if ctx.block != "parser":
                    raise self.error(t, "extract is only allowed in parsers")
                if len(arg_trees) not in (1, 2):
                    raise self.error(t, f"extract expects 1 or 2 arguments, got {len(arg_trees)}")
                target_ctx = Context(ctx.scope, ctx.block, ctx.in_apply, extract_target=True)
                hdr = self.expr(arg_trees[0], target_ctx, None)
                if not isinstance(hdr.type, ir.HeaderType):
                    raise self.error(arg_trees[0], f"extract needs a header, not {type_str(hdr.type)}")
                size = self.extract_size(hdr.type, arg_trees, t, ctx)
                element = hdr.expr if isinstance(hdr, ir.Member) and self.is_union(hdr.expr.type) else hdr
                if isinstance(element, ir.StackMember) and element.member != "next":
                    raise self.error(arg_trees[0], f"unsupported: extract into .{element.member}")
                self.check_lvalue(hdr, arg_trees[0])
                return ir.Extract(target.name, hdr, ir.VoidType(), pos, size)
            if typ.name == "packet_out" and mname == "emit":
                if len(arg_trees) != 1:
                    raise self.error(t, f"emit expects 1 argument, got {len(arg_trees)}")
                hdr = self.expr(arg_trees[0], ctx, None)
                if not isinstance(hdr.type, ir.HeaderType | ir.StructType | ir.StackType):
                    raise self.error(arg_trees[0], f"emit needs a header or struct, not {type_str(hdr.type)}")
                return ir.Emit(target.name, hdr, ir.VoidType(), pos)
            info = self.types.get(typ.name)
            if isinstance(info, ExternInfo) and mname in info.methods:
                raise self.error(mname_tok, f"unsupported: {typ.name}.{mname}")
        raise self.error(
            mname_tok, f"{mname}: {source_text(target_t)} of type {type_str(typ)} has no method {mname}"
        )

    def extract_size(self, typ: ir.HeaderType, arg_trees: list[Any], t: Tree, ctx: Context) -> ir.Expr | None:
        """The size argument of `extract(h, size)` (bit<32>): given exactly when h has a varbit field."""
        varbit = ir.varbit_field(self.headers[typ.name])
        if len(arg_trees) == 1:
            if varbit is not None:
                message = f"{typ.name} has a varbit field: extract it with its size, extract(h, bits)"
                raise self.error(t, message)
            return None
        if varbit is None:
            raise self.error(t, f"{typ.name}: extract with a size needs a header with a varbit field")
        return self.coerce(self.expr(arg_trees[1], ctx, ir.BitType(32)), ir.BitType(32), arg_trees[1])

    def static_assert(self, args: tuple[ir.Expr, ...], t: Tree) -> ir.Const:
        cond = args[0]
        if not isinstance(cond, ir.Const):
            raise self.error(t, "static_assert needs a compile-time condition")
        if not cond.value:
            message = args[1].value if len(args) > 1 and isinstance(args[1], ir.StringLit) else ""
            raise self.error(t, f"static_assert failed{': ' + message if message else ''}")
        return ir.Const(ir.BoolType(), True, self.pos(t))

    def check_function_args(self, name: str, args: tuple[ir.Expr, ...], arg_trees: list[Any]) -> None:
        """What the executor needs of v1model calls beyond their types: known algorithms, flat data."""
        if name in ("hash", "verify_checksum", "update_checksum"):
            algo, algo_t = (args[1], arg_trees[1]) if name == "hash" else (args[3], arg_trees[3])
            known = subset.HASH_ALGORITHMS if name == "hash" else subset.CHECKSUM_ALGORITHMS
            if not isinstance(algo, ir.EnumValue):
                raise self.error(algo_t, f"unsupported: {name} with a non-constant algorithm")
            if algo.member not in known:
                raise self.error(algo_t, f"unsupported: {name} with HashAlgorithm.{algo.member}")
            data_i = 3 if name == "hash" else 1
            self.require_flat(args[data_i], arg_trees[data_i])
            out_i = 0 if name == "hash" else 2
            if not isinstance(args[out_i].type, ir.BitType):
                raise self.error(
                    arg_trees[out_i], f"unsupported: {name} result of type {type_str(args[out_i].type)}"
                )
        if name == "hash":
            for i in (2, 4):
                if not isinstance(args[i].type, ir.BitType | ir.InfIntType):
                    raise self.error(arg_trees[i], f"hash: argument {i + 1} must be a number")
        if name in subset.FIELD_LIST_CALLS:
            if not isinstance(args[subset.FIELD_LIST_CALLS[name]], ir.Const):
                raise self.error(
                    arg_trees[subset.FIELD_LIST_CALLS[name]],
                    f"unsupported: {name} with a non-constant field list index",
                )
        if name == "digest":
            data_type = args[1].type
            fields = self.structs[data_type.name].fields if isinstance(data_type, ir.StructType) else ()
            if not fields or not all(isinstance(f.type, ir.BitType) for f in fields):
                raise self.error(
                    arg_trees[1],
                    f"unsupported: digest of {type_str(data_type)} "
                    "(a struct of bit<W>/int<W> fields is supported, as P4Runtime servers deliver)",
                )
        if name == "random" and not isinstance(args[0].type, ir.BitType):
            raise self.error(arg_trees[0], f"unsupported: random of type {type_str(args[0].type)}")

    def require_flat(self, e: ir.Expr, t: Any) -> None:
        """`e` is a list, header or struct whose leaves are all fixed-width (hash and checksum data)."""
        if isinstance(e, ir.ListExpr):
            for item in e.elements:
                self.require_flat(item, t)
            return
        for leaf in self.leaf_types(e.type):
            if not ir.is_scalar(leaf) and not isinstance(leaf, ir.VarbitType):
                raise self.error(t, f"unsupported: {type_str(leaf)} in hash or checksum data")

    def leaf_types(self, typ: ir.Type) -> list[ir.Type]:
        if isinstance(typ, ir.HeaderType):
            return [f.type for f in self.headers[typ.name].fields]
        if isinstance(typ, ir.StructType):
            return [leaf for f in self.structs[typ.name].fields for leaf in self.leaf_types(f.type)]
        return [typ]

    def lookahead(
        self,
        packet: ir.Var,
        type_args: tuple[ir.Type, ...] | None,
        arg_trees: list[Any],
        t: Tree,
        ctx: Context,
    ) -> ir.Expr:
        if ctx.block != "parser":
            raise self.error(t, "lookahead is only allowed in parsers")
        if type_args is None or len(type_args) != 1 or arg_trees:
            raise self.error(t, "lookahead takes one type argument and no arguments: lookahead<T>()")
        (typ,) = type_args
        if not isinstance(typ, ir.HeaderType | ir.BitType) or (
            isinstance(typ, ir.HeaderType) and ir.varbit_field(self.headers[typ.name]) is not None
        ):
            raise self.error(
                t, f"unsupported: lookahead of {type_str(typ)} (a header or bit<W> is supported)"
            )
        return ir.Lookahead(packet.name, typ, self.pos(t))

    def right_operand(
        self, a: ir.Expr, b_t: Any, ctx: Context, want: ir.Type | None
    ) -> tuple[ir.Expr, ir.Expr]:
        """The right operand of a binary operator, after the left one, as P4 orders them: should it
        call a function that changes what the left one reads, the left one's value is taken first
        (into a fresh local, before that call)."""
        before = len(self.hoisted or ())
        b = self.expr(b_t, ctx, want)
        if self.hoisted is None or len(self.hoisted) == before or is_const(a):
            return a, b
        written = self.written_by(self.hoisted[before:])
        if any(overlaps(path, w) for path in reads(a) for w in written):
            left = ir.Var(self.fresh("left"), a.type, "local", "", a.pos)
            self.hoisted.insert(before, ir.VarDecl(left.name, a.type, a, a.pos))
            a = left
        return a, b

    @staticmethod
    def written_by(hoisted: Sequence[ir.Stmt]) -> list[PlacePath]:
        """The places the hoisted function calls change: their out and inout arguments."""
        return [
            path
            for call in (h.call for h in hoisted if isinstance(h, ir.CallStmt))
            if isinstance(call, ir.ActionCall)
            for arg, direction in zip(call.args[:-1], call.directions, strict=False)
            if direction in ("out", "inout") and (path := place_path(arg)) is not None
        ]

    def conditional(self, t: Any, ctx: Context, want: ir.Type | None, where: str) -> ir.Expr:
        """An expression that may not be evaluated (right of && or ||, a branch of ?:): the functions
        it calls run before the statement, so each must have no effect but its result."""
        before = len(self.hoisted or ())
        e = self.expr(t, ctx, want)
        for stmt in (self.hoisted or [])[before:]:
            call = stmt.call if isinstance(stmt, ir.CallStmt) else None
            if isinstance(call, ir.ActionCall) and not self.pure.get(call.action, False):
                raise self.error(t, f"unsupported: a call of a function with effects {where}")
        return e

    def user_function_call(
        self, info: FunctionInfo, arg_trees: list[Any], t: Tree, ctx: Context, statement: bool
    ) -> ir.Expr:
        """A call of a P4 function: a call of its hidden action, whose last argument takes the result.

        In an expression the call runs just before the statement (`hoisted`), into a fresh local
        the expression then reads: P4 evaluates a call's arguments, then the call, left to right.
        """
        if self.hoisted is None or ctx.block not in ("control", "action"):
            raise self.error(
                t, f"unsupported: calling function {info.name} here (only in controls and actions)"
            )
        before = len(self.hoisted)
        args, dirs = self.args(info.params, arg_trees, t, ctx, info.name, {})
        written = self.written_by(self.hoisted[before:])  # by calls in the arguments, which run first
        for path in (p for arg in args for p in reads(arg)):
            if any(overlaps(path, w) for w in written):
                changed = f"{'.'.join(path)} is passed to {info.name} and changed by a call in its arguments"
                raise self.error(t, f"unsupported: {changed}")
        pos = self.pos(t)
        if isinstance(info.returns, ir.VoidType):
            return ir.ActionCall(info.fq_name, args, dirs, ir.VoidType(), pos)
        result = ir.Var(self.fresh(f"{info.name}_result"), info.returns, "local", "", pos)
        self.hoisted.append(ir.VarDecl(result.name, info.returns, None, pos))
        call = ir.ActionCall(info.fq_name, (*args, result), (*dirs, "out"), ir.VoidType(), pos)
        if statement:  # the result is not used
            return call
        self.hoisted.append(ir.CallStmt(call, pos))
        return result

    def decl_function_decl(self, d: Tree) -> None:
        """A P4 function, checked as a hidden action (not in the P4Info, as p4c inlines functions)
        with an `out` parameter for the result: `return e;` assigns it and returns."""
        ann, ret_t, name, *tparams, params_tree, body = d.children  # type_params? is absent, not None
        fname = str(name.children[0])
        if tparams:
            raise self.error(tparams[0], "unsupported: generic functions")
        returns = self.resolve_type(ret_t)
        params = tuple(
            dataclasses.replace(p, direction=p.direction or "in") for p in self.params(params_tree)
        )  # directionless function parameters are `in`
        for p in params:
            if not (ir.is_scalar(p.type) or isinstance(p.type, ir.HeaderType | ir.StructType | ir.ErrorType)):
                raise self.error(
                    p.pos or params_tree,
                    f"unsupported: function parameter {p.name} of type {type_str(p.type)}",
                )
        if not isinstance(returns, ir.VoidType) and not (
            ir.is_scalar(returns) or isinstance(returns, ir.HeaderType | ir.StructType)
        ):
            raise self.error(ret_t, f"unsupported: a function returning {type_str(returns)}")
        if any(p.name == RESULT for p in params):
            raise self.error(params_tree, f"unsupported: a function parameter named {RESULT}")
        self.used_names = set()
        inner = Scope(self.globals)
        for p in params:
            inner.names[p.name] = ir.Var(p.name, p.type, "action_param", p.direction, p.pos)
        block = self.block(body, Context(inner, "action", returns=returns))
        lowered = params if isinstance(returns, ir.VoidType) else (*params, ir.Param(RESULT, returns, "out"))
        annotations = (*self.annotations(ann), ir.Annotation("hidden"))
        self.actions.append(ir.ActionDecl(fname, fname, tuple(lowered), block, annotations, self.pos(d)))
        self.pure[fname] = not any(p.direction in ("out", "inout") for p in params) and all(
            self.without_effect(n) for n in ir.walk(block)
        )
        self.declare_global(name, fname, FunctionInfo(fname, fname, params, returns, self.pure[fname]))

    def without_effect(self, node: object) -> bool:
        """Whether an IR node in a function's body leaves no trace outside the function's locals."""
        if isinstance(node, ir.ExternFunctionCall):
            return node.name in PURE_EXTERN_CALLS
        if isinstance(node, ir.ActionCall):
            return self.pure.get(node.action, False)
        return not isinstance(node, ir.ExternMethodCall | ir.Exit)

    def action_call(self, info: ActionInfo, arg_trees: list[Any], t: Tree, ctx: Context) -> ir.Expr:
        args, dirs = self.args(info.params, arg_trees, t, ctx, info.name, {})
        return ir.ActionCall(info.fq_name, args, dirs, ir.VoidType(), self.pos(t))

    def function_call(
        self,
        name: str,
        arg_trees: list[Any],
        t: Tree,
        ctx: Context,
        type_args: tuple[ir.Type, ...] | None = None,
    ) -> ir.Expr:
        if name in subset.DEPRECATED_FIELD_LIST_CALLS:
            raise self.error(t, f"unsupported: {name} (use {subset.DEPRECATED_FIELD_LIST_CALLS[name]})")
        if name not in subset.FUNCTIONS:
            raise self.error(t, f"unsupported: extern function {name}")
        overloads = [f for f in self.functions[name] if len(f.params) == len(arg_trees)]
        if not overloads:
            counts = sorted({len(f.params) for f in self.functions[name]})
            raise self.error(
                t, f"{name}: expects {' or '.join(map(str, counts))} arguments, got {len(arg_trees)}"
            )
        if ctx.block == "global":
            raise self.error(t, f"{name} cannot be called here")
        if ctx.block == "parser" and name in subset.CONTROL_ONLY_CALLS:
            raise self.error(t, f"unsupported: {name} in a parser (call it in ingress or egress)")
        f = overloads[0]
        binding: dict[str, ir.Type] = {}
        if type_args is not None:
            if len(type_args) != len(f.type_params):
                raise self.error(
                    t, f"{name}: expects {len(f.type_params)} type arguments, got {len(type_args)}"
                )
            binding.update(zip(f.type_params, type_args))
        args, dirs = self.args(f.params, arg_trees, t, ctx, name, binding)
        if name == "static_assert":
            return self.static_assert(args, t)
        self.check_function_args(name, args, arg_trees)
        return ir.ExternFunctionCall(
            name,
            args,
            dirs,
            self.subst(f.return_type, binding),
            tuple(binding.get(p, ir.VoidType()) for p in f.type_params),
            self.pos(t),
        )
