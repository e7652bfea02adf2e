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
import random
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.common import (
    CLONE_SESSION_MASK,
    DROP_PORT,
    STD_ROOT,
    V1MODEL_BLOCKS,
    UnsupportedError,
    Walker,
    all_actions,
    all_instances,
    block_roots,
    contains,
    digest_widths,
    may_exit,
    packet_types,
    preserved_fields,
    switch_arms,
)
from softswitch.backends.python.layout import (
    Path,
    build_layout,
    composite_locals,
    is_composite,
    local_root,
    param_root,
    zero,
)
from softswitch.runtime import state as st

__all__ = ["DROP_PORT", "Compiler", "UnsupportedError"]


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


def _digest(values: tuple[int, ...], widths: tuple[int, ...]) -> bytes:
    """A digest's data: each member big-endian in whole bytes (runtime.pipeline.DIGEST_PORT_BASE)."""
    return b"".join(v.to_bytes((w + 7) // 8, "big") for v, w in zip(values, widths, strict=True))


RUNTIME_HELPERS = {
    "_random": random.Random().randint,
    "_sx": _sx,
    "_csum16": _csum16,
    "_hash": _hash,
    "_unpack": struct.unpack_from,
    "_pack": struct.pack,
    "_digest": _digest,
}


# ----------------------------------------------------------------------------- the compiler


@dataclass
class Block:
    """Per parser/control compilation context."""

    name: str
    params: dict[str, str]  # parameter name -> layout root
    std: str | None  # the name of the standard_metadata parameter, if any


class Compiler(Walker):
    """Writes the Python source of one program; `compile()` returns the namespace with the functions."""

    def __init__(self, program: ir.Program, info: p4i.P4Info, runtime: st.RuntimeState) -> None:
        self.program = program
        self.runtime = runtime
        # P4Info ids by name, one map per kind: a table and an action may share a name (as in p4c)
        self.action_ids = {p.preamble.name: p.preamble.id for p in info.actions}
        self.table_ids = {p.preamble.name: p.preamble.id for p in info.tables}
        self.register_ids = {p.preamble.name: p.preamble.id for p in info.registers}
        self.counter_ids = {p.preamble.name: p.preamble.id for p in info.counters}
        self.actions = all_actions(program)
        self.tables: dict[str, ir.TableDecl] = {t.fq_name: t for c in program.controls for t in c.tables}
        self.instances: dict[str, ir.InstanceDecl] = all_instances(program)
        self.errors = {name: code for code, name in enumerate(program.errors)}
        self.enums = {e.name: e for e in program.enums}
        std_type = ir.StructType("standard_metadata_t")
        hdr_type, meta_type = packet_types(program)
        roots: list[tuple[Path, ir.Type]] = [
            (("hdr",), hdr_type),
            (("meta",), meta_type),
            ((STD_ROOT,), std_type),
        ]
        self.layout = build_layout(program, roots + composite_locals(program))
        # resubmit/recirculate requests of the pass: 0, or the field list index + 1 (the last call wins)
        self.resubmit_slot = self.layout.take(0)
        self.recirculate_slot = self.layout.take(0)
        # clone requests of the pass: 0, or the session + 1; and 0 or the field list index + 1
        self.clone_slot = self.layout.take(0)
        self.clone_list_slot = self.layout.take(0)
        # digest request of the pass: 0, or (the digest's index, its data packed when digest was called)
        self.digest_slot = self.layout.take(0)
        self.digests = digest_widths(info)
        self.global_actions = {a.fq_name for a in program.actions}
        self.owners: list[str] = []  # block name, or the top-level action being inlined
        self.inlining: list[str] = []  # fq names of the actions being inlined, innermost last
        self.exit_flags: list[str] = []  # per enclosing inlined action with `exit`: its flag
        self.globals: dict[str, Any] = dict(RUNTIME_HELPERS)
        self.lines: list[str] = []
        self.counter = itertools.count()
        self.env: list[dict[str, str]] = []
        self.block: Block | None = None
        self.template = self.bind("Z", self.layout.initial)

    # ------------------------------------------------------------------ entry
    def compile(self) -> dict[str, Any]:
        for binding in self.program.main.blocks:
            fn, first = V1MODEL_BLOCKS[binding.param]
            decl = self.program.block(binding.param)
            params = block_roots(decl, first)
            std = next((n for n, r in params.items() if r == STD_ROOT), None)
            self.block = Block(decl.name, params, std)
            self.owners = [decl.name]
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

    def preserved_slots(self) -> dict[int, list[int]]:
        """Field list index -> the vector slots of the metadata fields it preserves."""
        out: dict[int, list[int]] = {}
        for index, paths in preserved_fields(self.program).items():
            slots = out.setdefault(index, [])
            for path in paths:
                full = ("meta", *path)
                if full in self.layout.scalars:
                    slots.append(self.layout.scalars[full][0])
                else:
                    start, end = self.layout.composites[full]
                    slots += range(start, end)
        return out

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
            self.emit(depth, f"{name} = {self.expr(key, depth)}")
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

    def _nested_block(self, depth: int, block: ir.Block) -> None:
        self._block(depth, block)

    def _if(self, depth: int, cond: str, then: ir.Block, other: ir.Block | None, s: ir.If) -> None:
        self.emit(depth, f"if {cond}:")
        self._block(depth + 1, then)
        if other is not None:
            self.emit(depth, "else:")
            self._block(depth + 1, other)

    def _exit(self, depth: int) -> None:
        if self.exit_flags:  # leave the inlined action through its copy-out (P4_16 6.8.1)
            self.emit(depth, f"{self.exit_flags[-1]} = True")
            self.emit(depth, "break")
        else:
            self.emit(depth, "return")

    def _return(self, depth: int) -> None:
        self.emit(depth, "break" if self._in_action_loop else "return")

    def _verify(self, depth: int, cond: str, error: int, s: ir.Verify) -> None:
        self.emit(depth, f"if not ({cond}):")
        self.emit(depth + 1, f"V[{self.std('parser_error')}] = {error}")
        self.emit(depth + 1, "return off")

    _in_action_loop = False

    def _vardecl(self, depth: int, s: ir.VarDecl) -> None:
        if is_composite(s.type):
            var = ir.Var(s.name, s.type, "local", "", s.pos)
            a, b = self.layout.composites[self._need_path(var)]
            self.emit(depth, f"V[{a}:{b}] = {self.template}[{a}:{b}]")
            if s.init is not None:
                self._assign(depth, var, s.init)
            return
        name = self._fresh_local(s.name)
        fresh = "(0, 0)" if isinstance(s.type, ir.VarbitType) else repr(zero(s.type))  # varbit: no bits
        value = self.expr(s.init, depth) if s.init is not None else fresh
        self.emit(depth, f"{name} = {value}")

    def _fresh_local(self, name: str) -> str:
        if len(self.env) == 1:
            py = f"l_{name}"
        else:
            py = f"l_{name}_{next(self.counter)}"
        self.env[-1][name] = py
        return py

    def _assign(self, depth: int, lhs: ir.Expr, rhs: ir.Expr) -> None:
        if not is_composite(lhs.type):
            self.store(depth, lhs, self.expr(rhs, depth))
            return
        if _in_element(lhs) or _in_element(rhs):  # under `s.last`, found when run
            (a, b), (c, d) = self._span(lhs, depth), self._span(rhs, depth)
            self.emit(depth, f"V[{a}:{b}] = V[{c}:{d}]")
            return
        path = self._need_path(lhs)
        a, b = self.layout.composites[path]
        if isinstance(rhs, ir.ListExpr):  # {f1, f2, ...}: each field; a header becomes valid
            if path in self.layout.headers:
                self.emit(depth, f"V[{self.layout.headers[path].valid}] = True")
            decls = self._fields_of(lhs.type)
            for (fname, ftype), item in zip(decls, rhs.elements):
                self._assign(depth, ir.Member(lhs, fname, ftype, rhs.pos), item)
            return
        if isinstance(rhs, ir.Lookahead):
            hs = self.layout.headers[path]
            value = self._lookahead_bits(depth, rhs)
            self.emit(depth, f"V[{hs.valid}] = True")
            shift = hs.nbytes * 8
            for _name, index, width, ftype in hs.fields:
                shift -= width
                self.emit(depth, f"V[{index}] = {_from_bits(f'({value} >> {shift})', width, ftype)}")
            return
        src = self._need_path(rhs)
        c, d = self.layout.composites[src]
        self.emit(depth, f"V[{a}:{b}] = V[{c}:{d}]")

    def _span(self, e: ir.Expr, depth: int) -> tuple[str, str]:
        """Code of the vector slice [start, end) holding a composite value, `stack.last` included."""
        found = self._element(e, depth)
        if found is not None:
            path, offset = found
            a, b = self.layout.composites[path]
            return f"{a} + {offset}", f"{b} + {offset}"
        a, b = self.layout.composites[self._need_path(e)]
        return str(a), str(b)

    def _fields_of(self, t: ir.Type) -> list[tuple[str, ir.Type]]:
        if isinstance(t, ir.HeaderType):
            return [(f.name, f.type) for f in self.program.header(t.name).fields]
        return [(f.name, f.type) for f in self.program.struct(t.name).fields]

    def store(self, depth: int, lhs: ir.Expr, value: str) -> None:
        """Emit `lhs = value` for a scalar l-value (local, field, or a slice of either); a varbit
        field's value is the pair (bits, length), in two slots."""
        if isinstance(lhs.type, ir.VarbitType) and not isinstance(lhs, ir.Var):
            slot = self._varbit_slot(lhs, depth)
            self.emit(depth, f"V[{slot}], V[{slot} + 1] = {value}")
            return
        if isinstance(lhs, ir.Slice):
            whole = self.expr(lhs.expr, depth)
            m = _mask(lhs.hi - lhs.lo + 1)
            keep = _mask(ir.width_of(lhs.expr.type)) ^ (m << lhs.lo)
            self.store(depth, lhs.expr, f"(({whole}) & {keep}) | ((({value}) & {m}) << {lhs.lo})")
            return
        self.emit(depth, f"{self.lvalue(lhs, depth)} = {value}")

    def _switch(self, depth: int, s: ir.Switch) -> None:
        subject = self.expr(s.expr, depth)
        name = self.tmp("sw")
        self.emit(depth, f"{name} = {subject}")
        for i, (labels, body) in enumerate(switch_arms(s.cases, lambda e: self._label(e, depth))):
            if labels is None:
                self.emit(depth, "else:" if i else "if True:")
            else:
                self.emit(depth, f"{'elif' if i else 'if'} {name} in ({', '.join(labels)},):")
            self._block(depth + 1, body)

    def _label(self, label: ir.Expr, depth: int) -> str:
        return (
            str(self.action_ids[label.action]) if isinstance(label, ir.ActionRef) else self.expr(label, depth)
        )

    # ------------------------------------------------------------------ calls
    def _set_valid(self, depth: int, header: ir.Expr, valid: bool) -> None:
        self.emit(depth, f"V[{self._valid(header, depth)}] = {valid}")

    def _action_call(self, depth: int, call: ir.ActionCall) -> None:
        self._inline_action(depth, self.actions[call.action], call.args, None)

    def _apply(self, depth: int, table_name: str) -> tuple[str, str]:
        """Emit a table application; returns (hit variable, action id variable)."""
        table = self.tables[table_name]
        runtime = self.runtime.tables[self.table_ids[table_name]]
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
            self.emit(depth + 1, f"{entry}.cell[0] += 1")
            self.emit(depth + 1, f"{entry}.cell[1] += plen")
        aid = self.tmp("aid")
        self.emit(depth, f"{aid} = {action}.action_id")
        first = True
        for ref in table.actions:
            decl = self.actions[ref.action]
            self.emit(
                depth, f"{'if' if first else 'elif'} {aid} == {self.action_ids[ref.action]}:  # {ref.action}"
            )
            self._inline_action(depth + 1, decl, (), f"{action}.args")
            first = False
        return hit, aid

    def _inline_action(
        self, depth: int, decl: ir.ActionDecl, args: tuple[ir.Expr, ...], entry_args: str | None
    ) -> None:
        """The action's body in place, between copy-in and copy-out of its directional arguments."""
        scope: dict[str, str] = {}
        copy_back: list[tuple[ir.Expr, str]] = []
        composite_back: list[tuple[ir.Expr, tuple[int, int]]] = []
        listed: list[tuple[ir.Var, ir.Expr]] = []
        # Arguments are evaluated where the call is: before the callee's names (its composite
        # parameters and locals) are in force, as an argument may be the caller's own parameter.
        directional = [p for p in decl.params if p.direction]
        for prm, arg in zip(directional, args):
            if is_composite(prm.type):
                a, b = self.layout.composites[param_root(decl.fq_name, prm.name)]
                if prm.direction == "out":
                    self.emit(depth, f"V[{a}:{b}] = {self.template}[{a}:{b}]")
                elif isinstance(arg, ir.ListExpr):  # `{...}`: assigned field by field below
                    listed.append((ir.Var(prm.name, prm.type, "action_param", prm.direction, prm.pos), arg))
                else:
                    c, d = self._span(arg, depth)
                    self.emit(depth, f"V[{a}:{b}] = V[{c}:{d}]")
                if prm.direction in ("out", "inout"):
                    composite_back.append((arg, (a, b)))
                continue
            py = f"p_{prm.name}_{next(self.counter)}"
            scope[prm.name] = py
            if prm.direction in ("in", "inout"):
                self.emit(depth, f"{py} = {self.expr(arg, depth)}")
            else:
                self.emit(depth, f"{py} = {zero(prm.type)!r}")
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
        self.inlining.append(decl.fq_name)
        if decl.fq_name in self.global_actions:
            self.owners.append(decl.fq_name)
        for var, arg in listed:
            self._assign(depth, var, arg)
        self.env.append(scope)
        has_return = contains(decl.body, ir.Return)
        has_exit = may_exit(self.actions, decl.fq_name)
        saved = self._in_action_loop
        flag = None
        if has_exit:
            flag = self.tmp("exit")
            self.emit(depth, f"{flag} = False")
            self.exit_flags.append(flag)
        if has_return or has_exit:  # `return` and `exit` leave the loop, then copy-out runs
            self.emit(depth, "while True:")
            self._in_action_loop = True
            self._block(depth + 1, decl.body)
            self.emit(depth + 1, "break")
        else:
            self._block(depth, decl.body)
        self._in_action_loop = saved
        self.env.pop()
        if decl.fq_name in self.global_actions:
            self.owners.pop()
        self.inlining.pop()
        for arg, py in copy_back:
            self.store(depth, arg, py)
        for arg, (a, b) in composite_back:
            c, d = self._span(arg, depth)
            self.emit(depth, f"V[{c}:{d}] = V[{a}:{b}]")
        if flag is not None:
            self.exit_flags.pop()
            self.emit(depth, f"if {flag}:")
            self._stmt(depth + 1, ir.Exit())

    def _index(self, depth: int, expr: ir.Expr) -> str:
        code = self.expr(expr, depth)
        if code.isidentifier() or code.isdigit():
            return code
        name = self.tmp("i")
        self.emit(depth, f"{name} = {code}")
        return name

    def _extern_method(self, depth: int, call: ir.ExternMethodCall) -> None:
        if call.extern == "register":
            reg = self.runtime.registers[self.register_ids[call.instance]]
            rvar = self.bind("R", reg.values)
            if call.method == "read":
                idx = self._index(depth, call.args[1])
                if idx.isdigit():  # a constant index is checked here, once
                    value = f"{rvar}[{idx}]" if int(idx) < reg.size else "0"
                else:
                    value = f"({rvar}[{idx}] if {idx} < {reg.size} else 0)"
                self.store(depth, call.args[0], value)
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
                raise UnsupportedError.at(f"register.{call.method}", call)
        elif call.extern == "counter" and call.method == "count":
            ctr = self.runtime.counters[self.counter_ids[call.instance]]
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
        elif (call.extern, call.method) in (("meter", "execute_meter"), ("direct_meter", "read")):
            # No P4Runtime client can configure a meter here (MeterEntry is UNIMPLEMENTED), and an
            # unconfigured bmv2 meter marks every packet GREEN (0).
            self.store(depth, call.args[-1], "0")
        else:
            raise UnsupportedError.at(f"extern {call.extern}.{call.method}", call)

    def _extern_function(self, depth: int, call: ir.ExternFunctionCall) -> None:
        name = call.name
        if name == "mark_to_drop":
            self.emit(depth, f"V[{self.std('egress_spec')}] = {DROP_PORT}")
            self.emit(depth, f"V[{self.std('mcast_grp')}] = 0")
        elif name in ("verify_checksum", "update_checksum"):
            cond, data, target, algo = call.args
            if not isinstance(algo, ir.EnumValue) or algo.member != "csum16":
                raise UnsupportedError.at(f"{name} supports HashAlgorithm.csum16 only", call)
            value, width = self._concat(depth, data)
            self.emit(depth, f"if {self.expr(cond, depth)}:")
            if name == "verify_checksum":
                self.emit(depth + 1, f"if _csum16({value}, {width}) != {self.expr(target, depth)}:")
                self.emit(depth + 2, f"V[{self.std('checksum_error')}] = 1")
            else:
                self.store(depth + 1, target, f"_csum16({value}, {width})")
        elif name == "hash":
            result, algo, base, data, maximum = call.args
            assert isinstance(algo, ir.EnumValue)
            value, width = self._concat(depth, data)
            out_width = ir.width_of(result.type)
            h = f"_hash({algo.member!r}, {value}, {width})"
            b, m = self.expr(base, depth), self.expr(maximum, depth)
            self.store(depth, result, f"({b} + ({h} % {m} if {m} else {h})) & {_mask(out_width)}")
        elif name == "random":
            result, lo, hi = call.args
            low, high = self.expr(lo, depth), self.expr(hi, depth)
            self.store(depth, result, f"(_random({low}, {high}) if {low} <= {high} else {low})")
        elif name in ("log_msg", "assume", "assert"):
            self.emit(depth, "pass  # " + name)
        elif name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            slot = self.resubmit_slot if name.startswith("resubmit") else self.recirculate_slot
            (index,) = call.args
            assert isinstance(index, ir.Const)
            self.emit(depth, f"V[{slot}] = {(int(index.value) & 0xFF) + 1}")
        elif name in ("clone", "clone_preserving_field_list"):
            session, index = call.args[1], call.args[2] if len(call.args) > 2 else None
            self.emit(
                depth, f"V[{self.clone_slot}] = ({self.expr(session, depth)} & {CLONE_SESSION_MASK}) + 1"
            )
            listed = 0 if index is None else (int(index.value) & 0xFF) + 1  # type: ignore[attr-defined]
            self.emit(depth, f"V[{self.clone_list_slot}] = {listed}")
        elif name == "digest":
            assert isinstance(call.type_args[0], ir.StructType)
            index, widths = self.digests[call.type_args[0].name]
            values = ", ".join(code for code, _ in self._leaf_codes(depth, call.args[1]))
            self.emit(depth, f"V[{self.digest_slot}] = ({index}, _digest(({values},), {widths}))")
        else:
            raise UnsupportedError.at(f"extern function {name}", call)

    def _concat(self, depth: int, data: ir.Expr) -> tuple[str, str]:
        """The bits of a list, header or struct as one integer (first element most significant), and
        code of their number (a varbit field counts the bits it holds)."""
        leaves = self._leaf_codes(depth, data)
        parts = []
        static, dynamic = 0, []
        for code, t in reversed(leaves):
            total = " + ".join([str(static), *dynamic]) if dynamic else str(static)
            if isinstance(t, ir.VarbitType):
                pair = self.tmp("vb")
                self.emit(depth, f"{pair} = {code}")
                code = f"{pair}[0]"
                dynamic.append(f"{pair}[1]")
            else:
                static += ir.width_of(t)
            if isinstance(t, ir.BoolType):
                code = f"int({code})"
            parts.append(f"({code} << ({total}))" if total != "0" else f"({code})")
        total = " + ".join([str(static), *dynamic]) if dynamic else str(static)
        return "(" + " | ".join(parts or ["0"]) + ")", total

    def _leaf_codes(self, depth: int, data: ir.Expr) -> list[tuple[str, ir.Type]]:
        """The scalars of a list, header or struct, first element first: (code, type)."""
        leaves: list[tuple[str, ir.Type]] = []
        for item in data.elements if isinstance(data, ir.ListExpr) else (data,):
            if is_composite(item.type):
                leaves += [
                    (f"(V[{i}], V[{i + 1}])" if isinstance(t, ir.VarbitType) else f"V[{i}]", t)
                    for i, t in self.layout.leaves(self._need_path(item))
                ]
            else:
                leaves.append((self.expr(item, depth), item.type))
        return leaves

    # ----------------------------------------------------------- parse/deparse
    def _parser_error(self, depth: int, condition: str, error: str) -> None:
        self.emit(depth, f"if {condition}:")
        self.emit(depth + 1, f"V[{self.std('parser_error')}] = {self.errors[error]}")
        self.emit(depth + 1, "return off")

    def _extract(self, depth: int, call: ir.Extract) -> None:
        offset = ""
        stack = None
        found = self._element(call.header, depth)  # extract(s.next) or (s.next.member): element nextIndex
        if found is not None:
            path, code = found
            element = call.header.expr if isinstance(call.header, ir.Member) else call.header
            assert isinstance(element, ir.StackMember)
            stack = self.layout.stacks[self._need_path(element.expr)]
            offset = self.tmp("o")
            self.emit(depth, f"{offset} = {code}")
            hs = self.layout.headers[path]
        else:
            hs = self.layout.headers[self._need_path(call.header)]
        at = (lambda i: f"{i} + {offset}") if offset else str
        if call.size is not None:
            self._extract_varbit(depth, call.size, hs, at)
        else:
            self._extract_fixed(depth, hs, at)
        self.emit(depth, f"V[{at(hs.valid)}] = True")
        if stack is not None:
            self.emit(depth, f"V[{stack.next}] += 1")

    def _extract_varbit(self, depth: int, size_expr: ir.Expr, hs: Any, at: Any) -> None:
        """extract(h, size): the checks in bmv2's order (ir.Extract), then the fields, last first."""
        size, nbytes, x = self.tmp("sz"), self.tmp("nb"), self.tmp("x")
        self.emit(depth, f"{size} = {self.expr(size_expr, depth)}")
        self._parser_error(depth, f"{size} % 8", "ParserInvalidArgument")
        self.emit(depth, f"{nbytes} = {hs.nbytes} + ({size} >> 3)")
        self._parser_error(depth, f"off + {nbytes} > n", "PacketTooShort")
        varbit = next(t for _, i, _, t in hs.fields if i == hs.varbit)
        self._parser_error(depth, f"{size} > {varbit.max_width}", "HeaderTooShort")
        self.emit(depth, f"{x} = int.from_bytes(buf[off:off + {nbytes}], 'big')")
        for _name, index, width, ftype in reversed(hs.fields):
            if index == hs.varbit:
                self.emit(depth, f"V[{at(index)}], V[{at(index + 1)}] = {x} & ((1 << {size}) - 1), {size}")
                self.emit(depth, f"{x} >>= {size}")
            elif width:
                self.emit(depth, f"V[{at(index)}] = {_from_bits(x, width, ftype)}")
                self.emit(depth, f"{x} >>= {width}")
        self.emit(depth, f"off += {nbytes}")

    def _extract_fixed(self, depth: int, hs: Any, at: Any) -> None:
        self._parser_error(depth, f"off + {hs.nbytes} > n", "PacketTooShort")
        if hs.struct_format and hs.fields:  # (a header without fields only becomes valid)
            first, last = hs.fields[0][1], hs.fields[-1][1]
            self.emit(depth, f"V[{at(first)}:{at(last + 1)}] = _unpack({hs.struct_format!r}, buf, off)")
        elif hs.fields:
            x = self.tmp("x")
            self.emit(depth, f"{x} = int.from_bytes(buf[off:off + {hs.nbytes}], 'big')")
            shift = hs.nbytes * 8
            for _name, index, width, ftype in hs.fields:
                shift -= width
                source = f"({x} >> {shift})" if shift else x
                self.emit(depth, f"V[{at(index)}] = {_from_bits(source, width, ftype)}")
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
            if not hs.fields:
                continue
            self.emit(depth, f"if V[{hs.valid}]:")
            first, last = hs.fields[0][1], hs.fields[-1][1]
            if hs.struct_format:
                self.emit(depth + 1, f"out.append(_pack({hs.struct_format!r}, *V[{first}:{last + 1}]))")
            else:  # from the last field: a varbit field's length shifts the fields before it
                shift, parts = "0", []
                for _name, index, width, ftype in reversed(hs.fields):
                    value = f"int(V[{index}])" if isinstance(ftype, ir.BoolType) else f"V[{index}]"
                    parts.append(f"({value} << ({shift}))" if shift != "0" else value)
                    if index == hs.varbit:
                        shift = f"V[{index + 1}]" if shift == "0" else f"{shift} + V[{index + 1}]"
                    elif width:
                        shift = str(width) if shift == "0" else f"{shift} + {width}"
                nbytes = f"{hs.nbytes} + (V[{hs.varbit + 1}] >> 3)" if hs.varbit is not None else hs.nbytes
                self.emit(depth + 1, f"out.append(({' | '.join(parts)}).to_bytes({nbytes}, 'big'))")

    def _lookahead_bits(self, depth: int, e: ir.Lookahead) -> str:
        """The next width_of(T) bits of the packet as an integer, the packet long enough or an error."""
        width = self._bits_of(e.type)
        nbytes = (width + 7) // 8
        self._parser_error(depth, f"off + {nbytes} > n", "PacketTooShort")
        value = self.tmp("la")
        drop = nbytes * 8 - width
        read = f"int.from_bytes(buf[off:off + {nbytes}], 'big')"
        self.emit(depth, f"{value} = {read} >> {drop}" if drop else f"{value} = {read}")
        return value

    def _lookahead_field(self, e: ir.Member, depth: int) -> str:
        assert isinstance(e.expr, ir.Lookahead) and isinstance(e.expr.type, ir.HeaderType)
        value = self._lookahead_bits(depth, e.expr)
        shift = self._bits_of(e.expr.type)
        for f in self.program.header(e.expr.type.name).fields:
            shift -= ir.width_of(f.type)
            if f.name == e.field:
                return "(" + _from_bits(f"({value} >> {shift})", ir.width_of(f.type), f.type) + ")"
        raise UnsupportedError.at(f"no field {e.field}", e)

    def _bits_of(self, t: ir.Type) -> int:
        if isinstance(t, ir.HeaderType):
            return sum(ir.width_of(f.type) for f in self.program.header(t.name).fields)
        return ir.width_of(t)

    def _stack_op(self, depth: int, op: ir.StackOp) -> None:
        s = self.layout.stacks[self._need_path(op.stack)]
        n = min(op.count, s.size)
        end = s.first + s.size * s.stride
        moved = (s.size - n) * s.stride
        if op.op == "push_front":
            if moved:
                self.emit(depth, f"V[{s.first + n * s.stride}:{end}] = V[{s.first}:{s.first + moved}]")
            cleared = range(s.first, s.first + n * s.stride)
            self.emit(depth, f"V[{s.next}] = min(V[{s.next}] + {op.count}, {s.size})")
        else:
            if moved:
                self.emit(depth, f"V[{s.first}:{s.first + moved}] = V[{s.first + n * s.stride}:{end}]")
            cleared = range(s.first + moved, end)
            self.emit(depth, f"V[{s.next}] = max(V[{s.next}] - {op.count}, 0)")
        a, b = cleared.start, cleared.stop
        self.emit(depth, f"V[{a}:{b}] = {self.template}[{a}:{b}]")

    # ------------------------------------------------------------ expressions
    def _path(self, e: ir.Expr) -> Path | None:
        """The static layout path of `e`, or None (a scalar local, or a stack's dynamic `.last`)."""
        if isinstance(e, ir.Var):
            if self.block is not None and e.name in self.block.params and e.kind == "param":
                return (self.block.params[e.name],)
            if is_composite(e.type):
                if e.kind == "action_param":
                    return param_root(self.inlining[-1], e.name)
                return local_root(self.owners[-1], e.name)
            return None
        if isinstance(e, ir.Member):
            base = self._path(e.expr)
            return None if base is None else base + (e.field,)
        if isinstance(e, ir.StackIndex) and isinstance(e.index, ir.Const):
            base = self._path(e.expr)
            return None if base is None else base + (str(e.index.value),)
        return None

    def _need_path(self, e: ir.Expr) -> Path:
        path = self._path(e)
        if path is None:
            raise UnsupportedError.at("expected a header or field of the packet", e)
        return path

    def _element(self, e: ir.Expr, depth: int) -> tuple[Path, str] | None:
        """For `stack.last`, `stack.next` or a member of either (a header union's, a header's field):
        (its path in element 0, code of the slot offset of the element meant), with the parser's bounds
        check (`last` of an empty stack, `next` of a full one); None for anything else."""
        if isinstance(e, ir.Member):
            found = self._element(e.expr, depth)
            return None if found is None else (found[0] + (e.field,), found[1])
        if not (isinstance(e, ir.StackMember) and e.member in ("last", "next")):
            return None
        path = self._need_path(e.expr)
        s = self.layout.stacks[path]
        if e.member == "last":
            self._parser_error(depth, f"V[{s.next}] == 0", "StackOutOfBounds")
            return path + ("0",), f"(V[{s.next}] - 1) * {s.stride}"
        self._parser_error(depth, f"V[{s.next}] >= {s.size}", "StackOutOfBounds")
        return path + ("0",), f"V[{s.next}] * {s.stride}"

    def _slot(self, e: ir.Expr, depth: int) -> str | None:
        """Code of the vector index of a scalar field, or None for Python locals."""
        path = self._path(e)
        if path is not None:
            return str(self.layout.scalars[path][0]) if path in self.layout.scalars else None
        found = self._element(e, depth)
        if found is not None:
            return f"{self.layout.scalars[found[0]][0]} + {found[1]}"
        return None

    def _valid(self, header: ir.Expr, depth: int) -> str:
        """Code of the vector index of a header's validity bit."""
        found = self._element(header, depth)
        if found is not None:
            return f"{self.layout.headers[found[0]].valid} + {found[1]}"
        return str(self.layout.headers[self._need_path(header)].valid)

    def lvalue(self, e: ir.Expr, depth: int = 0) -> str:
        if isinstance(e, ir.Var) and self._path(e) is None:
            return self._local(e.name)
        slot = self._slot(e, depth)
        if slot is not None:
            return f"V[{slot}]"
        raise UnsupportedError.at(f"cannot assign to {type(e).__name__}", e)

    def _local(self, name: str) -> str:
        for scope in reversed(self.env):
            if name in scope:
                return scope[name]
        py = f"l_{name}"
        self.env[0][name] = py
        return py

    def _const(self, e: ir.Const) -> str:
        if isinstance(e.value, bool):
            return repr(e.value)
        if isinstance(e.type, ir.BitType):
            return str(e.value & _mask(e.type.width))
        return str(e.value)

    def _number(self, value: int) -> str:
        return str(value)

    def _read(self, e: ir.Var | ir.Member | ir.StackIndex, depth: int) -> str:
        if isinstance(e.type, ir.VarbitType) and not isinstance(e, ir.Var):  # a local holds the pair
            slot = self._varbit_slot(e, depth)
            return f"(V[{slot}], V[{slot} + 1])"
        return self.lvalue(e, depth)

    def _varbit_slot(self, e: ir.Expr, depth: int) -> str:
        """Code of the slot of a varbit field's bits (its length is the next slot)."""
        slot = self._slot(e, depth)
        if slot is None:
            raise UnsupportedError.at("a varbit value that is not a header field", e)
        return slot

    def _last_index(self, stack: ir.Expr, depth: int) -> str:
        return f"((V[{self.layout.stacks[self._need_path(stack)].next}] - 1) & 0xFFFFFFFF)"

    def _is_valid(self, header: ir.Expr, depth: int) -> str:
        return f"V[{self._valid(header, depth)}]"

    def _truth(self, flag: str) -> str:
        return flag

    def _negation(self, flag: str) -> str:
        return f"(not {flag})"

    def _bits(self, value: str, lo: int, width: int) -> str:
        return f"(({value} >> {lo}) & {_mask(width)})"

    def _mux(self, cond: str, then: str, other: str) -> str:
        return f"({then} if {cond} else {other})"

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
        if op in ("&&", "||") and ir.contains_apply(e.right):
            raise UnsupportedError.at(f"table apply on the right of {op}", e)
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
                raise UnsupportedError.at(f"{op} on signed values", e)
            return f"({a} {'//' if op == '/' else '%'} {b})"
        if op in ("|+|", "|-|"):
            pyop = "+" if op == "|+|" else "-"
            if t.signed:
                lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
                return f"(min(max(_sx({a}, {w}) {pyop} _sx({b}, {w}), {lo}), {hi}) & {m})"
            return f"min({a} + {b}, {m})" if pyop == "+" else f"max({a} - {b}, 0)"
        raise UnsupportedError.at(f"operator {op}", e)

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
        raise UnsupportedError.at(f"cast to {dst}", e)


_PY_OPS = {"/": "//"}


def _in_element(e: ir.Expr) -> bool:
    """Whether `e` is a stack's `.last` or `.next` or a member of one (its place is found when run)."""
    while isinstance(e, ir.Member):
        e = e.expr
    return isinstance(e, ir.StackMember) and e.member in ("last", "next")


def _mask(width: int) -> int:
    return (1 << width) - 1


def _from_bits(source: str, width: int, t: ir.Type) -> str:
    """A field's value from the low `width` bits of `source` (bool fields hold Python bools)."""
    if isinstance(t, ir.BoolType):
        return f"({source} & 1 != 0)"
    return f"{source} & {_mask(width)}"
