"""Where every value of a packet's state lives in the flat list ("the vector") the generated code uses.

Roots are the blocks' header, metadata and standard_metadata parameters and,
for each composite (header, struct or header stack) local variable or action
parameter, a root of its own, so that every header field, validity bit and
stack index has one fixed position. Paths are tuples of names from a root;
stack elements are named by their index ("0", "1", ...), and a stack's
hidden next index is the scalar at `path + ("$next",)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from softswitch import ir

Path = tuple[str, ...]
NEXT = "$next"
_STRUCT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


@dataclass
class HeaderSlots:
    """Where one header instance lives in the vector."""

    type_name: str
    valid: int
    fields: list[tuple[str, int, int, ir.Type]]  # (name, index, width, type); a varbit field's width: 0
    nbytes: int  # without the varbit field's bytes
    struct_format: str | None  # all fields unsigned 8/16/32/64-bit words: one struct call
    varbit: int | None = None  # the slot of the varbit field's value; its length in bits is the next one


@dataclass
class StackSlots:
    """A header stack: `size` elements of `stride` slots from `first`, and its next index."""

    first: int
    stride: int
    size: int
    next: int
    element: str


@dataclass
class Layout:
    """Index of every scalar of the packet state."""

    size: int = 0
    scalars: dict[Path, tuple[int, ir.Type]] = field(default_factory=dict)
    headers: dict[Path, HeaderSlots] = field(default_factory=dict)
    stacks: dict[Path, StackSlots] = field(default_factory=dict)
    composites: dict[Path, tuple[int, int]] = field(default_factory=dict)  # [start, end)
    initial: list[Any] = field(default_factory=list)

    def take(self, initial: Any) -> int:
        self.initial.append(initial)
        self.size += 1
        return self.size - 1

    def leaves(self, path: Path) -> list[tuple[int, ir.Type]]:
        """The scalar slots under `path` in declaration order (validity bits excluded)."""
        if path in self.scalars:
            return [self.scalars[path]]
        start, end = self.composites[path]
        return [(i, t) for p, (i, t) in self.scalars.items() if start <= i < end and p[-1] != NEXT]


def zero(t: ir.Type) -> Any:
    """The value a fresh scalar of type `t` holds."""
    return False if isinstance(t, ir.BoolType) else 0


def build_layout(program: ir.Program, roots: Iterable[tuple[Path, ir.Type]]) -> Layout:
    layout = Layout()
    headers = {h.name: h for h in program.headers}
    structs = {s.name: s for s in program.structs}

    def place(path: Path, t: ir.Type) -> None:
        start = layout.size
        if isinstance(t, ir.HeaderType):
            decl = headers[t.name]
            valid = layout.take(False)
            fields = []
            varbit = None
            for f in decl.fields:
                index = layout.take(zero(f.type))
                layout.scalars[path + (f.name,)] = (index, f.type)
                if isinstance(f.type, ir.VarbitType):  # (value, length): the length is the next slot
                    varbit = index
                    layout.take(0)
                fields.append((f.name, index, 0 if varbit == index else ir.width_of(f.type), f.type))
            total = sum(w for _, _, w, _ in fields)
            fmt = None
            if varbit is None and all(
                w in _STRUCT_CODES and isinstance(ft, ir.BitType) for _, _, w, ft in fields
            ):
                fmt = ">" + "".join(_STRUCT_CODES[w] for _, _, w, _ in fields)
            layout.headers[path] = HeaderSlots(t.name, valid, fields, total // 8, fmt, varbit)
        elif isinstance(t, ir.StructType):
            for f in structs[t.name].fields:
                place(path + (f.name,), f.type)
        elif isinstance(t, ir.StackType):
            for i in range(t.size):
                place(path + (str(i),), t.element)
            stride = (layout.size - start) // t.size
            nxt = layout.take(0)
            layout.scalars[path + (NEXT,)] = (nxt, ir.BitType(32))
            layout.stacks[path] = StackSlots(start, stride, t.size, nxt, t.element.name)
        else:
            layout.scalars[path] = (layout.take(zero(t)), t)
            return
        layout.composites[path] = (start, layout.size)

    for path, t in roots:
        place(path, t)
    return layout


def composite_locals(program: ir.Program) -> list[tuple[Path, ir.Type]]:
    """Roots for every header/struct/stack-typed local variable and directional action parameter.

    A local is keyed by its owner: the parser or control (whose locals,
    including those of its actions, have unique names) or, for an action
    declared at top level, the action itself.
    """
    roots: list[tuple[Path, ir.Type]] = []
    for block in (*program.parsers, *program.controls):
        owner = block.name
        bodies: list[Any] = list(block.locals)
        if isinstance(block, ir.ParserDecl):
            bodies += [st for s in block.states for st in s.stmts]
        else:
            bodies.append(block.apply)
            for action in block.actions:
                bodies.append(action.body)
                roots += _action_params(action)
        roots += [(local_root(owner, d.name), d.type) for d in _var_decls(bodies)]
    for action in program.actions:
        roots += [(local_root(action.fq_name, d.name), d.type) for d in _var_decls([action.body])]
        roots += _action_params(action)
    return roots


def local_root(owner: str, name: str) -> Path:
    return ("$local", owner, name)


def param_root(action: str, name: str) -> Path:
    return ("$param", action, name)


def is_composite(t: ir.Type) -> bool:
    return isinstance(t, ir.HeaderType | ir.StructType | ir.StackType)


def _action_params(action: ir.ActionDecl) -> list[tuple[Path, ir.Type]]:
    return [(param_root(action.fq_name, p.name), p.type) for p in action.params if is_composite(p.type)]


def _var_decls(nodes: Iterable[Any]) -> list[ir.VarDecl]:
    found: list[ir.VarDecl] = []
    for node in nodes:
        if isinstance(node, ir.VarDecl):
            if is_composite(node.type):
                found.append(node)
        elif isinstance(node, ir.Block):
            found += _var_decls(node.stmts)
        elif isinstance(node, ir.If):
            found += _var_decls([node.then] + ([node.else_] if node.else_ is not None else []))
        elif isinstance(node, ir.Switch):
            found += _var_decls([c.body for c in node.cases if c.body is not None])
    return found
