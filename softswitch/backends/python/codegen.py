"""Compile a checked v1model program (softswitch.ir) into Python functions.

The executor never walks the IR per packet. Instead this module writes, once
per loaded program, Python source for the six v1model blocks and `exec`s it:

* **Packet state is one flat list** ("the vector"): every field of every
  header and struct reachable from the blocks' parameters (headers,
  user metadata, standard_metadata) and every header's validity bit has a
  fixed index, so `hdr.ipv4.ttl` becomes `V[17]`. Replicating a packet for
  multicast is `V.copy()`.
* **Scalar locals are Python locals**; actions are inlined where they are
  called (from a table or directly), so `exit` is a plain `return`.
* **Tables** are `state.Table.lookup(key_tuple)` followed by an if/elif
  chain on the action id; directionless action arguments come from the
  entry's `args` tuple.
* **Registers and counters** are the runtime state's own Python lists,
  bound into the generated functions' globals, so P4Runtime writes are seen
  at once and packets pay one list index per access.

Values are Python ints holding the unsigned bit pattern of their type;
`int<W>` is sign-converted only where the operation needs it (comparison,
right shift, saturation, widening casts). Anything outside the supported
subset raises `UnsupportedError` at load time, never a wrong result later.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from finsy.proto import p4i

from softswitch import ir
from softswitch.runtime import state as st

DROP_PORT = 511  # bmv2's default drop port (egress_spec value of mark_to_drop)
STD_ROOT = "standard_metadata"


class UnsupportedError(Exception):
    """The program uses a construct this executor does not implement."""


# ----------------------------------------------------------------- helpers used by generated code


def _sx(value: int, width: int) -> int:
    """Two's-complement value of a `width`-bit pattern."""
    return value - (1 << width) if value >> (width - 1) else value


def _csum16(value: int, width: int) -> int:
    """Internet checksum (ones' complement of the ones' complement sum) of a `width`-bit string."""
    if width % 16:
        value <<= 16 - width % 16
        width += 16 - width % 16
    total = 0
    while width:
        width -= 16
        total += (value >> width) & 0xFFFF
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _crc16(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected), bmv2's `crc16`."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _hash(algorithm: str, value: int, width: int) -> int:
    data = value.to_bytes((width + 7) // 8, "big")
    if algorithm == "crc32":
        return zlib.crc32(data)
    if algorithm == "crc16":
        return _crc16(data)
    if algorithm == "csum16":
        return _csum16(value, width)
    if algorithm == "identity":
        return value
    raise UnsupportedError(f"hash algorithm {algorithm}")


RUNTIME_HELPERS = {
    "_sx": _sx,
    "_csum16": _csum16,
    "_hash": _hash,
    "_unpack": struct.unpack_from,
    "_pack": struct.pack,
}


# ----------------------------------------------------------------------------- layout


@dataclass
class HeaderSlots:
    """Where one header instance lives in the vector."""

    type_name: str
    valid: int
    fields: list[tuple[str, int, int]]  # (name, index, width)
    nbytes: int
    struct_format: str | None  # all fields byte-aligned 8/16/32/64 bits: one struct call


@dataclass
class Layout:
    """Index of every scalar of the packet state; paths are tuples of names from a root."""

    size: int = 0
    scalars: dict[tuple[str, ...], tuple[int, ir.Type]] = field(default_factory=dict)
    headers: dict[tuple[str, ...], HeaderSlots] = field(default_factory=dict)
    structs: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)  # [start, end)
    initial: list[Any] = field(default_factory=list)

    def _take(self, initial: Any) -> int:
        self.initial.append(initial)
        self.size += 1
        return self.size - 1


_STRUCT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


def _zero(t: ir.Type) -> Any:
    return False if isinstance(t, ir.BoolType) else 0


def build_layout(program: ir.Program, roots: dict[str, ir.Type]) -> Layout:
    layout = Layout()
    headers = {h.name: h for h in program.headers}
    structs = {s.name: s for s in program.structs}

    def place(path: tuple[str, ...], t: ir.Type) -> None:
        if isinstance(t, ir.HeaderType):
            decl = headers[t.name]
            start = layout.size
            valid = layout._take(False)
            fields = []
            widths = []
            for f in decl.fields:
                width = ir.width_of(f.type)
                index = layout._take(0)
                layout.scalars[path + (f.name,)] = (index, f.type)
                fields.append((f.name, index, width))
                widths.append(width)
            total = sum(widths)
            if total % 8:
                raise UnsupportedError(f"header {t.name} is {total} bits, not a whole number of bytes")
            fmt = None
            if all(w in _STRUCT_CODES for w in widths):
                fmt = ">" + "".join(_STRUCT_CODES[w] for w in widths)
            layout.headers[path] = HeaderSlots(t.name, valid, fields, total // 8, fmt)
            layout.structs[path] = (start, layout.size)
        elif isinstance(t, ir.StructType):
            start = layout.size
            for f in structs[t.name].fields:
                place(path + (f.name,), f.type)
            layout.structs[path] = (start, layout.size)
        elif isinstance(t, ir.StackType):
            raise UnsupportedError("header stacks")
        else:
            layout.scalars[path] = (layout._take(_zero(t)), t)

    for root, t in roots.items():
        place((root,), t)
    return layout


# ----------------------------------------------------------------------------- the compiler


@dataclass
class Block:
    """Per parser/control compilation context."""

    name: str
    params: dict[str, str]  # parameter name -> layout root
    std: str | None  # the name of the standard_metadata parameter, if any


class Compiler:
    """Writes the Python source of one program; `compile()` returns the namespace with the functions."""

    def __init__(self, program: ir.Program, info: p4i.P4Info, runtime: st.RuntimeState) -> None:
        self.program = program
        self.runtime = runtime
        self.ids = {
            p.preamble.name: p.preamble.id
            for p in (*info.tables, *info.actions, *info.registers, *info.counters)
        }
        self.actions = {a.fq_name: a for a in program.actions}
        self.tables: dict[str, ir.TableDecl] = {}
        self.instances: dict[str, ir.InstanceDecl] = {i.fq_name: i for i in program.instances}
        for block in (*program.controls, *program.parsers):
            self.instances.update({i.fq_name: i for i in block.instances})
        for control in program.controls:
            self.actions.update({a.fq_name: a for a in control.actions})
            self.tables.update({t.fq_name: t for t in control.tables})
        self.errors = {name: code for code, name in enumerate(program.errors)}
        self.enums = {e.name: e for e in program.enums}
        std_type = ir.StructType("standard_metadata_t")
        p, ig = program.block("p"), program.block("ig")
        self.roots: dict[str, ir.Type] = {
            "hdr": p.params[1].type,
            "meta": p.params[2].type,
            STD_ROOT: std_type,
        }
        if ig.params[1].type != self.roots["meta"] or ig.params[0].type != self.roots["hdr"]:
            raise UnsupportedError("ingress and parser disagree on the headers/metadata types")
        self.layout = build_layout(program, self.roots)
        self.globals: dict[str, Any] = dict(RUNTIME_HELPERS)
        self.lines: list[str] = []
        self.counter = itertools.count()
        self.env: list[dict[str, str]] = []
        self.block: Block | None = None

    # ------------------------------------------------------------------ entry
    def compile(self) -> dict[str, Any]:
        v1 = {
            "p": ("parse", 1),
            "vr": ("verify_checksum", 0),
            "ig": ("ingress", 0),
            "eg": ("egress", 0),
            "ck": ("compute_checksum", 0),
            "dep": ("deparse", 1),
        }
        for binding in self.program.main.blocks:
            fn, first = v1[binding.param]
            decl = self.program.block(binding.param)
            roots = ["hdr", "meta", STD_ROOT]
            params = {prm.name: roots[i] for i, prm in enumerate(decl.params[first:]) if i < 3}
            std = next((n for n, r in params.items() if r == STD_ROOT), None)
            self.block = Block(decl.name, params, std)
            if isinstance(decl, ir.ParserDecl):
                self._parser(fn, decl)
            elif binding.param == "dep":
                self._deparser(fn, decl)
            else:
                self._control(fn, decl)
        source = "\n".join(self.lines) + "\n"
        namespace = self.globals
        exec(compile(source, f"<p4 {self.program.source}>", "exec"), namespace)  # noqa: S102
        namespace["__source__"] = source
        return namespace

    # -------------------------------------------------------------- emitting
    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def tmp(self, prefix: str = "t") -> str:
        return f"_{prefix}{next(self.counter)}"

    def bind(self, prefix: str, obj: Any) -> str:
        name = f"{prefix}{next(self.counter)}"
        self.globals[name] = obj
        return name

    def std(self, fieldname: str) -> int:
        return self.layout.scalars[(STD_ROOT, fieldname)][0]

    # -------------------------------------------------------------- blocks
    def _locals(self, depth: int, decls: tuple[ir.VarDecl, ...]) -> None:
        for decl in decls:
            self._stmt(depth, decl)

    def _control(self, fn: str, decl: ir.ControlDecl) -> None:
        self.emit(0, f"def {fn}(V, plen):")
        self.env = [{}]
        self._locals(1, decl.locals)
        self._block(1, decl.apply)
        self.emit(1, "return")

    def _parser(self, fn: str, decl: ir.ParserDecl) -> None:
        states = {s.name: i for i, s in enumerate(decl.states)}
        self.env = [{}]
        pe = self.std("parser_error")
        self.emit(0, f"def {fn}(V, buf, n):")
        self.emit(1, "off = 0")
        self._locals(1, decl.locals)
        self.emit(1, f"state = {states['start']}")
        self.emit(1, "while True:")
        for s in decl.states:
            self.emit(2, f"if state == {states[s.name]}:  # {s.name}")
            for stmt in s.stmts:
                self._stmt(3, stmt)
            self._transition(3, s.transition, states, pe)
        self.emit(2, f"V[{pe}] = {self.errors.get('NoMatch', 2)}")
        self.emit(2, "return off")

    def _transition(self, depth: int, tr: ir.Goto | ir.Select, states: dict[str, int], pe: int) -> None:
        def goto(d: int, target: str) -> None:
            if target == "accept":
                self.emit(d, "return off")
            elif target == "reject":
                self.emit(d, "return off")  # bmv2: ingress still runs, parser_error says why
            else:
                self.emit(d, f"state = {states[target]}")
                self.emit(d, "continue")

        if isinstance(tr, ir.Goto):
            goto(depth, tr.next)
            return
        keys = []
        for key in tr.keys:
            name = self.tmp("k")
            self.emit(depth, f"{name} = {self.expr(key)}")
            keys.append(name)
        for case in tr.cases:
            tests = []
            for key, ks in zip(keys, case.keysets):
                if isinstance(ks, ir.KeysetValue):
                    tests.append(f"{key} == {ks.value}")
                elif isinstance(ks, ir.KeysetMask):
                    tests.append(f"{key} & {ks.mask} == {ks.value & ks.mask}")
                elif isinstance(ks, ir.KeysetRange):
                    tests.append(f"{ks.lo} <= {key} <= {ks.hi}")
            self.emit(depth, f"if {' and '.join(tests) or 'True'}:")
            goto(depth + 1, case.next)
        self.emit(depth, f"V[{pe}] = {self.errors.get('NoMatch', 2)}")
        self.emit(depth, "return off")

    def _deparser(self, fn: str, decl: ir.ControlDecl) -> None:
        self.env = [{}]
        self.emit(0, f"def {fn}(V, out):")
        self._block(1, decl.apply)
        self.emit(1, "return")

    # ------------------------------------------------------------ statements
    def _block(self, depth: int, block: ir.Block) -> None:
        if not block.stmts:
            self.emit(depth, "pass")
        for stmt in block.stmts:
            self._stmt(depth, stmt)

    def _stmt(self, depth: int, s: ir.Stmt) -> None:
        if isinstance(s, ir.Block):
            self._block(depth, s)
        elif isinstance(s, ir.Assign):
            self._assign(depth, s.lhs, s.rhs)
        elif isinstance(s, ir.VarDecl):
            self._vardecl(depth, s)
        elif isinstance(s, ir.If):
            cond = self.expr(s.cond, depth)
            self.emit(depth, f"if {cond}:")
            self._block(depth + 1, s.then)
            if s.else_ is not None and s.else_.stmts:
                self.emit(depth, "else:")
                self._block(depth + 1, s.else_)
        elif isinstance(s, ir.CallStmt):
            self._call(depth, s.call)
        elif isinstance(s, ir.Exit):
            self.emit(depth, "return")
        elif isinstance(s, ir.Return):
            if s.value is not None:
                raise UnsupportedError(f"return with a value at {s.pos}")
            self.emit(depth, "break" if self._in_action_loop else "return")
        elif isinstance(s, ir.Switch):
            self._switch(depth, s)
        elif isinstance(s, ir.Verify):
            pe = self.std("parser_error")
            self.emit(depth, f"if not ({self.expr(s.cond, depth)}):")
            self.emit(depth + 1, f"V[{pe}] = {self.errors[s.error.name]}")
            self.emit(depth + 1, "return off")
        else:
            raise UnsupportedError(f"statement {type(s).__name__} at {s.pos}")

    _in_action_loop = False

    def _vardecl(self, depth: int, s: ir.VarDecl) -> None:
        if isinstance(s.type, ir.HeaderType | ir.StructType):
            raise UnsupportedError(f"local variable {s.name} of header/struct type at {s.pos}")
        name = self._fresh_local(s.name)
        value = self.expr(s.init, depth) if s.init is not None else repr(_zero(s.type))
        self.emit(depth, f"{name} = {value}")

    def _fresh_local(self, name: str) -> str:
        if len(self.env) == 1:
            py = f"l_{name}"
        else:
            py = f"l_{name}_{next(self.counter)}"
        self.env[-1][name] = py
        return py

    def _assign(self, depth: int, lhs: ir.Expr, rhs: ir.Expr) -> None:
        path = self._path(lhs)
        if path is not None and (path in self.layout.structs and path not in self.layout.scalars):
            src = self._path(rhs)
            if src is None or src not in self.layout.structs:
                raise UnsupportedError(f"assignment of a composite value at {lhs.pos}")
            a, b = self.layout.structs[path]
            c, d = self.layout.structs[src]
            self.emit(depth, f"V[{a}:{b}] = V[{c}:{d}]")
            return
        self.emit(depth, f"{self.lvalue(lhs)} = {self.expr(rhs, depth)}")

    def _switch(self, depth: int, s: ir.Switch) -> None:
        subject = self.expr(s.expr, depth)
        name = self.tmp("sw")
        self.emit(depth, f"{name} = {subject}")
        pending: list[str] = []
        first = True
        for case in s.cases:
            for label in case.labels:
                if isinstance(label, ir.ActionRef):
                    pending.append(str(self.ids[label.action]))
                else:
                    pending.append(self.expr(label, depth))
            if case.body is None:
                continue
            if case.is_default:
                self.emit(depth, "else:" if not first else "if True:")
            else:
                keyword = "if" if first else "elif"
                self.emit(depth, f"{keyword} {name} in ({', '.join(pending)},):")
            self._block(depth + 1, case.body)
            pending = []
            first = False

    # ------------------------------------------------------------------ calls
    def _call(self, depth: int, call: ir.Expr) -> None:
        if isinstance(call, ir.TableApply):
            self._apply(depth, call.table)
        elif isinstance(call, ir.ActionCall):
            self._inline_action(depth, self.actions[call.action], call.args, None)
        elif isinstance(call, ir.ExternMethodCall):
            self._extern_method(depth, call)
        elif isinstance(call, ir.ExternFunctionCall):
            self._extern_function(depth, call)
        elif isinstance(call, ir.HeaderMethod):
            hs = self.layout.headers[self._need_path(call.header)]
            if call.method == "setValid":
                self.emit(depth, f"V[{hs.valid}] = True")
            elif call.method == "setInvalid":
                self.emit(depth, f"V[{hs.valid}] = False")
            else:
                raise UnsupportedError(f"header method {call.method} as a statement at {call.pos}")
        elif isinstance(call, ir.Extract):
            self._extract(depth, call)
        elif isinstance(call, ir.Emit):
            self._emit_header(depth, call)
        else:
            raise UnsupportedError(f"call {type(call).__name__} at {call.pos}")

    def _apply(self, depth: int, table_name: str) -> tuple[str, str]:
        """Emit a table application; returns (hit variable, action id variable)."""
        table = self.tables[table_name]
        runtime = self.runtime.tables[self.ids[table_name]]
        tvar = self.bind("T", runtime)
        keys = [self.expr(k.expr, depth) for k in table.keys]
        keys = [
            f"int({k})" if isinstance(k_.expr.type, ir.BoolType) else k for k, k_ in zip(keys, table.keys)
        ]
        entry, action, hit = self.tmp("e"), self.tmp("a"), self.tmp("hit")
        key_tuple = f"({', '.join(keys)},)" if keys else "()"
        self.emit(depth, f"{entry} = {tvar}.lookup({key_tuple})")
        self.emit(depth, f"if {entry} is None:")
        self.emit(depth + 1, f"{action} = {tvar}.default_action")
        self.emit(depth + 1, f"{hit} = False")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{action} = {entry}.action")
        self.emit(depth + 1, f"{hit} = True")
        if runtime.has_direct_counter:
            self.emit(depth + 1, f"{entry}.packets += 1")
            self.emit(depth + 1, f"{entry}.bytes += plen")
        aid = self.tmp("aid")
        self.emit(depth, f"{aid} = {action}.action_id")
        first = True
        for ref in table.actions:
            decl = self.actions[ref.action]
            self.emit(depth, f"{'if' if first else 'elif'} {aid} == {self.ids[ref.action]}:  # {ref.action}")
            self._inline_action(depth + 1, decl, (), f"{action}.args")
            first = False
        return hit, aid

    def _inline_action(
        self, depth: int, decl: ir.ActionDecl, args: tuple[ir.Expr, ...], entry_args: str | None
    ) -> None:
        scope: dict[str, str] = {}
        copy_back: list[tuple[ir.Expr, str]] = []
        directional = [p for p in decl.params if p.direction]
        for prm, arg in zip(directional, args):
            py = f"p_{prm.name}_{next(self.counter)}"
            scope[prm.name] = py
            if prm.direction in ("in", "inout"):
                self.emit(depth, f"{py} = {self.expr(arg, depth)}")
            else:
                self.emit(depth, f"{py} = {_zero(prm.type)!r}")
            if prm.direction in ("out", "inout"):
                copy_back.append((arg, py))
        directionless = [p for p in decl.params if not p.direction]
        if directionless:
            names = [f"p_{prm.name}_{next(self.counter)}" for prm in directionless]
            scope.update((prm.name, py) for prm, py in zip(directionless, names))
            if entry_args is not None:  # one tuple unpack of the entry's arguments
                self.emit(depth, f"{', '.join(names)}, = {entry_args}")
            else:
                for py, value in zip(names, args[len(directional) :]):
                    self.emit(depth, f"{py} = {self.expr(value, depth)}")
        self.env.append(scope)
        has_return = _contains_return(decl.body)
        saved = self._in_action_loop
        if has_return:
            self.emit(depth, "while True:")
            self._in_action_loop = True
            self._block(depth + 1, decl.body)
            self.emit(depth + 1, "break")
        else:
            self._block(depth, decl.body)
        self._in_action_loop = saved
        self.env.pop()
        for arg, py in copy_back:
            self.emit(depth, f"{self.lvalue(arg)} = {py}")

    def _index(self, depth: int, expr: ir.Expr) -> str:
        code = self.expr(expr, depth)
        if code.isidentifier() or code.isdigit():
            return code
        name = self.tmp("i")
        self.emit(depth, f"{name} = {code}")
        return name

    def _extern_method(self, depth: int, call: ir.ExternMethodCall) -> None:
        inst = self.instances[call.instance]
        if call.extern == "register":
            reg = self.runtime.registers[self.ids[call.instance]]
            rvar = self.bind("R", reg.values)
            if call.method == "read":
                idx = self._index(depth, call.args[1])
                target = self.lvalue(call.args[0])
                if idx.isdigit():  # a constant index is checked here, once
                    self.emit(depth, f"{target} = {rvar}[{idx}]" if int(idx) < reg.size else f"{target} = 0")
                else:
                    self.emit(depth, f"{target} = {rvar}[{idx}] if {idx} < {reg.size} else 0")
            elif call.method == "write":
                idx = self._index(depth, call.args[0])
                value = self.expr(call.args[1], depth)
                if idx.isdigit():
                    if int(idx) < reg.size:
                        self.emit(depth, f"{rvar}[{idx}] = {value}")
                else:
                    self.emit(depth, f"if {idx} < {reg.size}:")
                    self.emit(depth + 1, f"{rvar}[{idx}] = {value}")
            else:
                raise UnsupportedError(f"register.{call.method} at {call.pos}")
        elif call.extern == "counter" and call.method == "count":
            ctr = self.runtime.counters[self.ids[call.instance]]
            pvar, bvar = self.bind("Cp", ctr.packets), self.bind("Cb", ctr.bytes)
            idx = self._index(depth, call.args[0])
            if idx.isdigit():
                if int(idx) < ctr.size:
                    self.emit(depth, f"{pvar}[{idx}] += 1")
                    self.emit(depth, f"{bvar}[{idx}] += plen")
            else:
                self.emit(depth, f"if {idx} < {ctr.size}:")
                self.emit(depth + 1, f"{pvar}[{idx}] += 1")
                self.emit(depth + 1, f"{bvar}[{idx}] += plen")
        elif call.extern == "direct_counter" and call.method == "count":
            self.emit(depth, "pass  # direct counters count on table hits")
        else:
            raise UnsupportedError(f"extern {inst.extern}.{call.method} at {call.pos}")

    def _extern_function(self, depth: int, call: ir.ExternFunctionCall) -> None:
        name = call.name
        if name == "mark_to_drop":
            self.emit(depth, f"V[{self.std('egress_spec')}] = {DROP_PORT}")
            self.emit(depth, f"V[{self.std('mcast_grp')}] = 0")
        elif name in ("verify_checksum", "update_checksum"):
            cond, data, target, algo = call.args
            if not isinstance(algo, ir.EnumValue) or algo.member != "csum16":
                raise UnsupportedError(f"{name} supports HashAlgorithm.csum16 only, at {call.pos}")
            value, width = self._concat(depth, data)
            self.emit(depth, f"if {self.expr(cond, depth)}:")
            if name == "verify_checksum":
                self.emit(depth + 1, f"if _csum16({value}, {width}) != {self.expr(target, depth)}:")
                self.emit(depth + 2, f"V[{self.std('checksum_error')}] = 1")
            else:
                self.emit(depth + 1, f"{self.lvalue(target)} = _csum16({value}, {width})")
        elif name == "hash":
            result, algo, base, data, maximum = call.args
            assert isinstance(algo, ir.EnumValue)
            value, width = self._concat(depth, data)
            out_width = ir.width_of(result.type)
            h = f"_hash({algo.member!r}, {value}, {width})"
            b, m = self.expr(base, depth), self.expr(maximum, depth)
            self.emit(
                depth, f"{self.lvalue(result)} = ({b} + ({h} % {m} if {m} else {h})) & {_mask(out_width)}"
            )
        elif name in ("log_msg", "assume", "assert"):
            self.emit(depth, "pass  # " + name)
        else:
            raise UnsupportedError(f"extern function {name} at {call.pos}")

    def _concat(self, depth: int, data: ir.Expr) -> tuple[str, int]:
        items = data.elements if isinstance(data, ir.ListExpr) else (data,)
        parts = []
        total = 0
        for item in reversed(items):
            w = ir.width_of(item.type)
            code = self.expr(item, depth)
            if isinstance(item.type, ir.BoolType):
                code = f"int({code})"
            parts.append(f"({code} << {total})" if total else f"({code})")
            total += w
        return "(" + " | ".join(parts) + ")", total

    # ----------------------------------------------------------- parse/deparse
    def _extract(self, depth: int, call: ir.Extract) -> None:
        hs = self.layout.headers[self._need_path(call.header)]
        pe = self.std("parser_error")
        self.emit(depth, f"if off + {hs.nbytes} > n:")
        self.emit(depth + 1, f"V[{pe}] = {self.errors['PacketTooShort']}")
        self.emit(depth + 1, "return off")
        first, last = hs.fields[0][1], hs.fields[-1][1]
        if hs.struct_format:
            self.emit(depth, f"V[{first}:{last + 1}] = _unpack({hs.struct_format!r}, buf, off)")
        else:
            x = self.tmp("x")
            self.emit(depth, f"{x} = int.from_bytes(buf[off:off + {hs.nbytes}], 'big')")
            shift = hs.nbytes * 8
            for _name, index, width in hs.fields:
                shift -= width
                self.emit(
                    depth,
                    f"V[{index}] = ({x} >> {shift}) & {_mask(width)}"
                    if shift
                    else f"V[{index}] = {x} & {_mask(width)}",
                )
        self.emit(depth, f"V[{hs.valid}] = True")
        self.emit(depth, f"off += {hs.nbytes}")

    def _emit_header(self, depth: int, call: ir.Emit) -> None:
        path = self._need_path(call.header)
        targets = (
            [path]
            if path in self.layout.headers
            else [p for p in self.layout.headers if p[: len(path)] == path]
        )
        for p in targets:
            hs = self.layout.headers[p]
            self.emit(depth, f"if V[{hs.valid}]:")
            first, last = hs.fields[0][1], hs.fields[-1][1]
            if hs.struct_format:
                self.emit(depth + 1, f"out.append(_pack({hs.struct_format!r}, *V[{first}:{last + 1}]))")
            else:
                shift = hs.nbytes * 8
                parts = []
                for _name, index, width in hs.fields:
                    shift -= width
                    parts.append(f"(V[{index}] << {shift})" if shift else f"V[{index}]")
                self.emit(depth + 1, f"out.append(({' | '.join(parts)}).to_bytes({hs.nbytes}, 'big'))")

    # ------------------------------------------------------------ expressions
    def _path(self, e: ir.Expr) -> tuple[str, ...] | None:
        if isinstance(e, ir.Var) and self.block is not None and e.name in self.block.params:
            return (self.block.params[e.name],)
        if isinstance(e, ir.Member):
            base = self._path(e.expr)
            return None if base is None else base + (e.field,)
        return None

    def _need_path(self, e: ir.Expr) -> tuple[str, ...]:
        path = self._path(e)
        if path is None:
            raise UnsupportedError(f"expected a header or field of the packet at {getattr(e, 'pos', None)}")
        return path

    def lvalue(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Var) and not (self.block and e.name in self.block.params):
            return self._local(e.name)
        path = self._path(e)
        if path is not None and path in self.layout.scalars:
            return f"V[{self.layout.scalars[path][0]}]"
        raise UnsupportedError(f"cannot assign to {type(e).__name__} at {getattr(e, 'pos', None)}")

    def _local(self, name: str) -> str:
        for scope in reversed(self.env):
            if name in scope:
                return scope[name]
        py = f"l_{name}"
        self.env[0][name] = py
        return py

    def expr(self, e: ir.Expr, depth: int = 0) -> str:
        if isinstance(e, ir.Const):
            if isinstance(e.value, bool):
                return repr(e.value)
            if isinstance(e.type, ir.BitType):
                return str(e.value & _mask(e.type.width))
            return str(e.value)
        if isinstance(e, ir.ErrorValue):
            return str(self.errors[e.name])
        if isinstance(e, ir.EnumValue):
            if e.value is not None:
                return str(e.value)
            return str([m for m, _ in self.enums[e.type.name].members].index(e.member))
        if isinstance(e, ir.Var | ir.Member):
            return self.lvalue(e)
        if isinstance(e, ir.HeaderMethod):
            if e.method != "isValid":
                raise UnsupportedError(f"{e.method} in an expression at {e.pos}")
            return f"V[{self.layout.headers[self._need_path(e.header)].valid}]"
        if isinstance(e, ir.ApplyResultMember):
            hit, aid = self._apply(depth, e.apply.table)
            if e.member == "hit":
                return hit
            if e.member == "miss":
                return f"(not {hit})"
            return aid
        if isinstance(e, ir.Unary):
            return self._unary(e, depth)
        if isinstance(e, ir.Binary):
            return self._binary(e, depth)
        if isinstance(e, ir.Cast):
            return self._cast(e, depth)
        if isinstance(e, ir.Slice):
            inner = self.expr(e.expr, depth)
            return f"(({inner} >> {e.lo}) & {_mask(e.hi - e.lo + 1)})"
        if isinstance(e, ir.Mux):
            return (
                f"({self.expr(e.then, depth)} if {self.expr(e.cond, depth)} else {self.expr(e.else_, depth)})"
            )
        raise UnsupportedError(f"expression {type(e).__name__} at {getattr(e, 'pos', None)}")

    def _unary(self, e: ir.Unary, depth: int) -> str:
        x = self.expr(e.expr, depth)
        if e.op == "!":
            return f"(not {x})"
        if isinstance(e.type, ir.BitType):
            m = _mask(e.type.width)
            return f"({x} ^ {m})" if e.op == "~" else f"((-{x}) & {m})"
        return f"(~{x})" if e.op == "~" else f"(-{x})"

    def _binary(self, e: ir.Binary, depth: int) -> str:
        op = e.op
        if op in ("&&", "||") and _contains_apply(e.right):
            raise UnsupportedError(f"table apply on the right of {op} at {e.pos}")
        a, b = self.expr(e.left, depth), self.expr(e.right, depth)
        if op == "&&":
            return f"({a} and {b})"
        if op == "||":
            return f"({a} or {b})"
        lt = e.left.type
        signed = isinstance(lt, ir.BitType) and lt.signed
        if op in ("==", "!="):
            return f"({a} {op} {b})"
        if op in ("<", "<=", ">", ">="):
            if signed:
                w = lt.width  # type: ignore[union-attr]
                return f"(_sx({a}, {w}) {op} _sx({b}, {w}))"
            return f"({a} {op} {b})"
        t = e.type
        if not isinstance(t, ir.BitType):
            return f"({a} {_PY_OPS.get(op, op)} {b})"
        w, m = t.width, _mask(t.width)
        if op == "++":
            return f"(({a} << {ir.width_of(e.right.type)}) | {b})"
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("+", "-", "*"):
            return f"(({a} {op} {b}) & {m})"
        if op == "<<":
            return f"(({a} << {b}) & {m})"
        if op == ">>":
            return f"((_sx({a}, {w}) >> {b}) & {m})" if t.signed else f"({a} >> {b})"
        if op in ("/", "%"):
            if t.signed:
                raise UnsupportedError(f"{op} on signed values at {e.pos}")
            return f"({a} {'//' if op == '/' else '%'} {b})"
        if op in ("|+|", "|-|"):
            pyop = "+" if op == "|+|" else "-"
            if t.signed:
                lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
                return f"(min(max(_sx({a}, {w}) {pyop} _sx({b}, {w}), {lo}), {hi}) & {m})"
            return f"min({a} + {b}, {m})" if pyop == "+" else f"max({a} - {b}, 0)"
        raise UnsupportedError(f"operator {op} at {e.pos}")

    def _cast(self, e: ir.Cast, depth: int) -> str:
        x = self.expr(e.expr, depth)
        src, dst = e.expr.type, e.type
        if isinstance(dst, ir.BoolType):
            return f"({x} != 0)" if not isinstance(src, ir.BoolType) else x
        if isinstance(dst, ir.BitType):
            if isinstance(src, ir.BoolType):
                return f"int({x})"
            if isinstance(src, ir.BitType):
                if src.signed and dst.width > src.width:
                    return f"(_sx({x}, {src.width}) & {_mask(dst.width)})"
                if dst.width < src.width:
                    return f"({x} & {_mask(dst.width)})"
                return x
            return f"({x} & {_mask(dst.width)})"
        if isinstance(dst, ir.EnumType):
            return x
        raise UnsupportedError(f"cast to {dst} at {e.pos}")


_PY_OPS = {"/": "//"}


def _mask(width: int) -> int:
    return (1 << width) - 1


def _contains_return(node: Any) -> bool:
    if isinstance(node, ir.Return):
        return True
    if isinstance(node, ir.Block):
        return any(_contains_return(s) for s in node.stmts)
    if isinstance(node, ir.If):
        return _contains_return(node.then) or (node.else_ is not None and _contains_return(node.else_))
    if isinstance(node, ir.Switch):
        return any(c.body is not None and _contains_return(c.body) for c in node.cases)
    return False


def _contains_apply(node: Any) -> bool:
    if isinstance(node, ir.ApplyResultMember | ir.TableApply):
        return True
    if isinstance(node, ir.Binary):
        return _contains_apply(node.left) or _contains_apply(node.right)
    if isinstance(node, ir.Unary | ir.Cast):
        return _contains_apply(node.expr)
    return False
