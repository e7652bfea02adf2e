"""Compile a checked v1model program (softswitch.ir) into one C translation unit.

The unit follows the Python backend (`softswitch.backends.python.codegen`,
the reference) construct by construct, so that both agree bit for bit; where
Python inlines an action, C calls a named function with the same copy-in,
body, copy-out order. What the C looks like:

* **Types.** Every header is a flat struct (`hdr_ipv4_t`: a `valid` byte and
  one unsigned field per P4 field, uint8/16/32/64 by width), structs nest,
  a header stack is `{elements[N], next}`; `standard_metadata_t` fields are
  64-bit, since a port number comes from outside the program. The packet is
  `packet_t {meta, sm, ..., hdr}`; a multicast replica copies everything but
  the headers no egress-side code writes (`sharing.py`), which it reads from the
  original packet (`P->orig`); the deparser serializes those once per group of
  copies and copies their bytes into the others.
* **Values.** bit<W>/int<W> up to 64 bits are uint64_t bit patterns masked to
  W, int<W> sign-extended only where the operation needs it (comparison,
  right shift, saturation, widening cast), as in Python. Anything wider is
  refused at load time, naming the construct (`UnsupportedError`).
* **Blocks.** One function per parser (states are labels), control,
  deparser, table (`table_<name>`: lookup, direct counter, action dispatch)
  and action (`action_<name>`; it returns 1 when it executed `exit`, and
  the caller copies its out/inout arguments back before leaving too, P4_16
  6.8.1). Locals of a control, its actions included, are one struct `L`.
* **State.** Tables, registers, counters and multicast groups live in the
  context (`ctx_t`) that P4Runtime writes through the exported functions,
  so every write is seen by the next packet. Every packet read is
  bounds-checked: a frame shorter than a header is `PacketTooShort`.

Each function carries a comment with the P4 source position it came from.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.c.sharing import PER_COPY_BLOCKS, shared_headers
from softswitch.backends.common import (
    CLONE_SESSION_MASK,
    DROP_PORT,
    INSTANCE_TYPE_EGRESS_CLONE,
    INSTANCE_TYPE_INGRESS_CLONE,
    INSTANCE_TYPE_RECIRC,
    INSTANCE_TYPE_REPLICATION,
    INSTANCE_TYPE_RESUBMIT,
    MAX_PASSES,
    STD_ROOT,
    V1MODEL_BLOCKS,
    Checksum,
    Hash,
    UnsupportedError,
    Walker,
    all_actions,
    all_instances,
    block_roots,
    cast_constant,
    check_v1model,
    digest_widths,
    is_composite,
    mask,
    may_exit,
    packet_types,
    preserved_fields,
    where,
)
from softswitch.runtime.pipeline import DIGEST_PORT_BASE

GENERATOR_VERSION = 8  # bump whenever the generated code changes meaning: it is part of the cache key
MAX_WIDTH = 64
HINT = "(the C backend runs bit<W>/int<W> up to 64 bits; run this program with --backend python)"

_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while".split()
)
# The kind of an ir.Var that names a C variable of the function being written (an argument built from a
# list before an action call), not a P4 name.
TEMP = "c_temporary"
_KIND_CODES = {"exact": 0, "lpm": 1, "ternary": 2, "range": 3, "optional": 4}


def cname(name: str) -> str:
    """A P4 name as a C identifier (P4 names are C-like; C keywords and our own names get a `_`)."""
    clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    if not clean or clean[0].isdigit() or clean in _C_KEYWORDS or clean.startswith("p4_"):
        clean += "_"
    return clean


def _lit(value: int) -> str:
    """A constant as a uint64_t literal, whatever its size.

    Every value the generated code computes is a uint64_t: a bare `1` would be
    a 32-bit int, and `1 << 40` on it loses the bit (a constant stored into
    `f[40:40]` came out 0).
    """
    return f"UINT64_C({value:#x})" if value > 9 else f"UINT64_C({value})"


def _storage(width: int) -> str:
    for bits, ctype in ((8, "uint8_t"), (16, "uint16_t"), (32, "uint32_t")):
        if width <= bits:
            return ctype
    return "uint64_t"


def _byte_span(bit: int, width: int) -> int:
    """How many bytes a field of `width` bits starting at bit `bit` touches."""
    return (bit + width - 1) // 8 - bit // 8 + 1 if width else 0


@dataclass
class TableInfo:
    """Where a table lives in the context, for the Python side (P4Runtime)."""

    index: int
    table_id: int
    nargs: int


@dataclass
class ArrayInfo:
    """A register or counter array of the context: its index and the width of one cell.

    Registers of the same size and cell type share a bank, interleaved: cell i of
    the register in column c is `bank[i * stride + c]`, so a packet that touches
    index i of many registers (ours: 64 value registers) touches a few cache lines.
    """

    index: int
    object_id: int
    width: int
    size: int
    bank: int = 0
    column: int = 0
    stride: int = 1


@dataclass
class Manifest:
    """What the generated unit holds, so the loader can bind P4Runtime's state to it."""

    tables: dict[str, TableInfo] = field(default_factory=dict)
    registers: dict[str, ArrayInfo] = field(default_factory=dict)
    counters: dict[str, ArrayInfo] = field(default_factory=dict)


@dataclass
class Func:
    """One C function being written."""

    name: str
    signature: str
    comment: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Scope:
    """How names resolve inside the function being written."""

    owner: str  # the parser/control whose locals struct `L` is, or a top-level action
    params: dict[str, str]  # block parameter name -> packet root
    action_params: dict[str, str] = field(default_factory=dict)  # P4 name -> C expression
    in_action: bool = False
    in_parser: bool = False
    shared: frozenset[str] = frozenset()  # headers members read from the original packet (`P->orig`)


class CCompiler(Walker):
    """Writes the C source of one program; `compile()` returns (source, manifest)."""

    def __init__(self, program: ir.Program, info: p4i.P4Info) -> None:
        check_v1model(program)
        self.program = program
        self.info = info
        self.action_ids = {p.preamble.name: p.preamble.id for p in info.actions}  # a table may share a name
        self.actions = all_actions(program)
        # top-level actions run without a control's locals; one a control declares too is that control's
        # (the front end's copy of an action bound in the control's action list, softswitch/frontend)
        self.top_actions = {a.fq_name for a in program.actions} - {
            a.fq_name for c in program.controls for a in c.actions
        }
        self.tables = {t.fq_name: t for c in program.controls for t in c.tables}
        self.instances = all_instances(program)
        self.errors = {name: code for code, name in enumerate(program.errors)}
        self.enums = {e.name: e for e in program.enums}
        self.headers = {h.name: h for h in program.headers}
        self.structs = {s.name: s for s in program.structs}
        self.hdr_type, self.meta_type = packet_types(program)
        self.manifest = Manifest()
        self.typedefs: list[str] = []
        self.typedefs_done: set[str] = set()  # varbit types written
        self.type_names: dict[ir.Type, str] = {}
        self.funcs: dict[str, Func] = {}
        self.func: Func | None = None
        self.scope: Scope | None = None
        self.counter = itertools.count()
        self.direct_counted = {dc.direct_table_id for dc in info.direct_counters}
        self.p4info_tables = {t.preamble.name: t for t in info.tables}
        self.p4info_registers = {r.preamble.name: r for r in info.registers}
        self.p4info_counters = {c.preamble.name: c for c in info.counters}
        self.locals: dict[str, dict[str, ir.Type]] = {}
        self.deparse_bound = 0
        self.may_fail = False  # whether any code calls p4_fail (then p4_process sets up the failure exit)
        self.passes = False  # whether the program resubmits or recirculates (else p4_pass never checks)
        self.clones = False  # whether the program clones (then the context holds the clone sessions)
        self.digests = digest_widths(info)
        self.digest_bytes = max((sum((w + 7) // 8 for w in ws) for _, ws in self.digests.values()), default=0)
        self.shared = shared_headers(program)
        self.shared_emits: dict[str, int] = {}  # a shared header the deparser emits -> its index in shared_at

    # ================================================================ types
    def scalar_type(self, t: ir.Type, where: str) -> str:
        """The C storage type of a scalar field (checks the width)."""
        if isinstance(t, ir.BoolType):
            return "uint8_t"
        if isinstance(t, ir.BitType | ir.EnumType) and ir.is_scalar(t):
            width = ir.width_of(t)
            if width > MAX_WIDTH:
                raise UnsupportedError(f"{where} has type bit<{width}> {HINT}")
            return _storage(width)
        if isinstance(t, ir.ErrorType | ir.EnumType):
            return "uint64_t"
        raise UnsupportedError(f"{where} has type {type(t).__name__}, which the C backend cannot store")

    def ctype(self, t: ir.Type, where: str) -> str:
        """The C type of any storable type; struct typedefs are written on first use."""
        if isinstance(t, ir.HeaderType | ir.StructType | ir.StackType):
            return self.composite_type(t)
        return self.scalar_type(t, where)

    def varbit_type(self, t: ir.VarbitType) -> str:
        """A varbit<N> field: its length in bits and its bytes, first on the wire first (one C type per
        byte size, so that two fields of one varbit type can be assigned)."""
        nbytes = (t.max_width + 7) // 8
        name = f"p4_varbit{nbytes}_t"
        if name not in self.typedefs_done:
            self.typedefs_done.add(name)
            self.typedefs.append(
                f"/* varbit of up to {nbytes} bytes */\n"
                f"typedef struct {{\n    uint32_t len;\n    uint8_t bytes[{nbytes}];\n}} {name};\n"
            )
        return name

    def composite_type(self, t: ir.HeaderType | ir.StructType | ir.StackType) -> str:
        if t in self.type_names:
            return self.type_names[t]
        if isinstance(t, ir.HeaderType):
            decl = self.headers[t.name]
            name = f"hdr_{cname(t.name)}_t"
            members = ["uint8_t valid;"]
            for f in decl.fields:
                if isinstance(f.type, ir.VarbitType):
                    members.append(f"{self.varbit_type(f.type)} {cname(f.name)};")
                    continue
                members.append(f"{self.scalar_type(f.type, f'field {t.name}.{f.name}')} {cname(f.name)};")
            comment = f"header {t.name} ({where(decl)})"
        elif isinstance(t, ir.StructType):
            decl_s = self.structs[t.name]
            name = f"struct_{cname(t.name)}_t"
            std = t.name == "standard_metadata_t"
            members = []
            for f in decl_s.fields:
                ftype = "uint64_t" if std else self.ctype(f.type, f"field {t.name}.{f.name}")
                members.append(f"{ftype} {cname(f.name)};")
            members = members or ["uint8_t unused_;"]
            comment = f"struct {t.name} ({where(decl_s)})" + (
                ": 64-bit fields, port numbers come from outside" if std else ""
            )
        else:
            element = self.composite_type(t.element)
            name = f"stack_{cname(t.element.name)}_{t.size}_t"
            members = [f"{element} e[{t.size}];", "uint32_t next; /* the hidden nextIndex */"]
            comment = f"header stack {t.element.name}[{t.size}]"
        self.type_names[t] = name
        body = "\n".join(f"    {m}" for m in members)
        self.typedefs.append(f"/* {comment} */\ntypedef struct {{\n{body}\n}} {name};\n")
        return name

    # ================================================================ output
    def emit(self, depth: int, line: str) -> None:
        assert self.func is not None
        self.func.lines.append("    " * depth + line)

    def tmp(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self.counter)}"

    def compile(self) -> tuple[str, Manifest]:
        self.composite_type(self.hdr_type)  # type: ignore[arg-type]
        self.composite_type(self.meta_type)  # type: ignore[arg-type]
        std = self.composite_type(ir.StructType("standard_metadata_t"))
        packet = (
            "/*\n * The state of one packet: the blocks' header, metadata and standard_metadata parameters.\n"
            " * The headers come last, so that a replica copies everything before them in one piece\n"
            " * (p4_replica). `orig` is where the headers no egress code writes are read from (sharing.py):\n"
            " * the packet itself, or for a replica the packet it was copied from.\n */\n"
            f"typedef struct packet_s {{\n"
            f"    {self.type_names[self.meta_type]} meta;\n    {std} sm;\n"
            "    uint32_t resubmit, recirculate; /* requested: 0, or the field list index + 1 */\n"
            "    uint32_t clone, clone_list; /* requested: session + 1, list index + 1 */\n"
            + self._digest_members()
            + "    const struct packet_s *orig;\n"
            f"    {self.type_names[self.hdr_type]} hdr;\n" + "} packet_t;\n" + self._digest_put()
        )
        self._declare_objects()
        blocks: dict[str, str] = {}
        for binding in self.program.main.blocks:
            fn, first = V1MODEL_BLOCKS[binding.param]
            decl = self.program.block(binding.param)
            params = block_roots(decl, first)
            self.locals.setdefault(decl.name, {})
            shared = self.shared if binding.param in PER_COPY_BLOCKS else frozenset()
            if isinstance(decl, ir.ParserDecl):
                blocks[fn] = self._parser(decl, params)
            elif binding.param == "dep":
                blocks[fn] = self._deparser(decl, params, shared)
            else:
                blocks[fn] = self._control(decl, params, shared)
        return self._assemble(packet, blocks), self.manifest

    def _assemble(self, packet: str, blocks: dict[str, str]) -> str:
        out = [
            f"/* Generated by p4reduce's C backend (generator {GENERATOR_VERSION}) from "
            f"{self.program.source}. Do not edit. */",
            '#include "p4rt.h"',
            "",
            *self.typedefs,
            packet,
        ]
        for owner, names in self.locals.items():
            members = [f"    {self._local_ctype(t, owner, n)} {cname(n)};" for n, t in names.items()]
            body = "\n".join(members) or "    uint8_t unused_;"
            out.append(f"/* locals of {owner} */\ntypedef struct {{\n{body}\n}} locals_{cname(owner)}_t;\n")
        out.append(self._context())
        for func in self.funcs.values():
            out.append(f"static {func.signature};")
        out.append("")
        for func in self.funcs.values():
            out.append(f"/* {func.comment} */")
            out.append(f"static {func.signature} {{")
            out.extend(func.lines)
            out.append("}\n")
        out.append(self._process(blocks))
        return "\n".join(out) + "\n"

    def _local_ctype(self, t: ir.Type, owner: str, name: str) -> str:
        if isinstance(t, ir.HeaderType | ir.StructType | ir.StackType):
            return self.composite_type(t)
        if isinstance(t, ir.VarbitType):
            return self.varbit_type(t)
        self.scalar_type(t, f"local {name} of {owner}")
        return "uint64_t"

    # ================================================================ context
    def _declare_objects(self) -> None:
        for name, table in self.p4info_tables.items():
            decl = self.tables.get(name)
            if decl is None:
                continue
            nargs = 0
            for ref in decl.actions:
                params = [p for p in self.actions[ref.action].params if not p.direction]
                for p in params:
                    self.scalar_type(p.type, f"parameter {p.name} of action {ref.action}")
                nargs = max(nargs, len(params))
            for key in decl.keys:
                self.scalar_type(key.expr.type, f"key {key.name} of table {name}")
            self.manifest.tables[name] = TableInfo(len(self.manifest.tables), table.preamble.id, nargs)
        banks: dict[tuple[int, str], list[str]] = {}
        for name, reg in self.p4info_registers.items():
            width = reg.type_spec.bitstring.bit.bitwidth or reg.type_spec.bitstring.int.bitwidth
            if width > MAX_WIDTH:
                raise UnsupportedError(f"register {name} holds bit<{width}> {HINT}")
            banks.setdefault((reg.size, _storage(width)), []).append(name)
            info = ArrayInfo(len(self.manifest.registers), reg.preamble.id, width, reg.size)
            self.manifest.registers[name] = info
        self.banks = list(banks.items())
        for bank, (_, names) in enumerate(self.banks):
            for column, name in enumerate(names):
                info = self.manifest.registers[name]
                info.bank, info.column, info.stride = bank, column, len(names)
        for name, ctr in self.p4info_counters.items():
            info = ArrayInfo(len(self.manifest.counters), ctr.preamble.id, 64, ctr.size)
            self.manifest.counters[name] = info

    def _context(self) -> str:
        m = self.manifest
        lines = [
            "/* Everything P4Runtime reads and writes, and what a packet needs beside its own state. */",
            "typedef struct {",
            "    p4_base_t base;",
            f"    p4_table_t tables[{max(1, len(m.tables))}];",
        ]
        for bank, ((size, ctype), names) in enumerate(self.banks):
            lines.append(f"    {ctype} *bank_{bank}; /* [{size}][{len(names)}]: {', '.join(names)} */")
        for name, c in m.counters.items():
            lines.append(f"    uint64_t *ctr_{cname(name)}; /* counter {name}[{c.size}]: packets, bytes */")
        lines += self._clone_sessions("member")
        lines.append("} ctx_t;\n")
        for name, t in m.tables.items():
            decl = self.tables[name]
            keys = ", ".join(
                f"{{{_KIND_CODES[k.match_kind]}, {ir.width_of(k.expr.type)}}}" for k in decl.keys
            )
            lines.append(f"static const p4_key_t keys_{t.index}[] = {{{keys or '{0, 0}'}}}; /* {name} */")
        lines.append("")
        lines.append("P4_EXPORT void p4_destroy(ctx_t *ctx);")
        lines.append("P4_EXPORT ctx_t *p4_create(void) {")
        lines.append("    ctx_t *ctx = calloc(1, sizeof *ctx);")
        lines.append("    if (!ctx) return NULL;")
        lines.append("    int bad = !(ctx->base.groups = calloc(P4_GROUPS, sizeof *ctx->base.groups));")
        for name, t in m.tables.items():
            size = self.p4info_tables[name].size or 1024
            lines.append(
                f'    bad |= p4_table_init(&ctx->tables[{t.index}], "{name}", keys_{t.index}, '
                f"{len(self.tables[name].keys)}, {t.nargs}, {size}, {int(_packed(self.tables[name]))});"
            )
        for bank, ((size, _), names) in enumerate(self.banks):
            cells = max(1, size) * len(names)
            lines.append(f"    bad |= !(ctx->bank_{bank} = calloc({cells}, sizeof *ctx->bank_{bank}));")
        for name, c in m.counters.items():
            lines.append(f"    bad |= !(ctx->ctr_{cname(name)} = calloc({2 * max(1, c.size)}, 8));")
        lines += self._clone_sessions("create")
        lines.append("    if (bad) { p4_destroy(ctx); return NULL; }")
        lines.append("    return ctx;")
        lines.append("}\n")
        lines.append("P4_EXPORT void p4_destroy(ctx_t *ctx) {")
        lines.append("    if (!ctx) return;")
        for t in m.tables.values():
            lines.append(f"    p4_table_free(&ctx->tables[{t.index}]);")
        for bank in range(len(self.banks)):
            lines.append(f"    free(ctx->bank_{bank});")
        for name in m.counters:
            lines.append(f"    free(ctx->ctr_{cname(name)});")
        lines.append("    if (ctx->base.groups)")
        lines.append(
            "        for (uint32_t g = 0; g < P4_GROUPS; g++)\n"
            "            if (ctx->base.groups[g].n) p4_groups_set(ctx->base.groups, g, 0, NULL, NULL);"
        )
        lines += self._clone_sessions("destroy")
        lines.append("    free(ctx->base.groups); free(ctx->base.outs); free(ctx->base.arena); free(ctx);")
        lines.append("}\n")
        lines.append("P4_EXPORT p4_table_t *p4_table(ctx_t *ctx, uint32_t i) {")
        lines.append(f"    return i < {len(m.tables)} ? &ctx->tables[i] : NULL;")
        lines.append("}\n")
        lines.append("P4_EXPORT void *p4_register(ctx_t *ctx, uint32_t i) {")
        lines.append("    switch (i) {")
        for name, r in m.registers.items():
            lines.append(f"    case {r.index}: return ctx->bank_{r.bank} + {r.column}; /* {name} */")
        lines.append("    default: return NULL;\n    }\n}\n")
        lines.append("P4_EXPORT uint64_t *p4_counter(ctx_t *ctx, uint32_t i) {")
        lines.append("    switch (i) {")
        for name, c in m.counters.items():
            lines.append(f"    case {c.index}: return ctx->ctr_{cname(name)};")
        lines.append("    default: return NULL;\n    }\n}\n")
        lines.append(
            "P4_EXPORT int p4_set_group(ctx_t *ctx, uint64_t id, uint32_t n, const uint64_t *port, "
            "const uint64_t *rid) {\n    return p4_groups_set(ctx->base.groups, id, n, port, rid);\n}\n"
        )
        lines += self._clone_sessions("export")
        return "\n".join(lines)

    def _clone_sessions(self, part: str) -> list[str]:
        """The clone sessions' part of the context (only for a program that clones): a group per id."""
        if not self.clones:
            return []
        return {
            "member": ["    p4_group_t *sessions; /* clone sessions, by id: the replicas of each */"],
            "create": ["    bad |= !(ctx->sessions = calloc(P4_GROUPS, sizeof *ctx->sessions));"],
            "destroy": [
                "    if (ctx->sessions)\n"
                "        for (uint32_t g = 0; g < P4_GROUPS; g++)\n"
                "            if (ctx->sessions[g].n) p4_groups_set(ctx->sessions, g, 0, NULL, NULL);",
                "    free(ctx->sessions);",
            ],
            "export": [
                "P4_EXPORT int p4_set_clone_session(ctx_t *ctx, uint64_t id, uint32_t n, "
                "const uint64_t *port, const uint64_t *rid) {\n"
                "    return p4_groups_set(ctx->sessions, id, n, port, rid);\n}\n"
            ],
        }[part]

    # ================================================================ blocks
    def _begin(
        self, name: str, signature: str, comment: str, scope: Scope
    ) -> tuple[Func | None, Scope | None]:
        saved = self.func, self.scope
        self.func = Func(name, signature, comment)
        self.funcs[name] = self.func
        self.scope = scope
        return saved

    def _end(self, saved: tuple[Func | None, Scope | None]) -> None:
        self.func, self.scope = saved

    def _locals_ptr(self, owner: str) -> str:
        return f"locals_{cname(owner)}_t *L"

    def _locals_init(self, owner: str) -> None:
        # No blanket zeroing: every local is assigned where it is declared (its initializer, or zero).
        self.emit(1, f"locals_{cname(owner)}_t locals, *L = &locals;")

    def _control(self, decl: ir.ControlDecl, params: dict[str, str], shared: frozenset[str]) -> str:
        name = f"control_{cname(decl.name)}"
        saved = self._begin(
            name,
            f"void {name}(ctx_t *ctx, packet_t *P, uint64_t plen)",
            f"control {decl.name} ({where(decl)})",
            Scope(decl.name, params, shared=shared),
        )
        self._locals_init(decl.name)
        self.emit(1, "(void)L; (void)plen; (void)ctx;")
        for local in decl.locals:
            self._stmt(1, local)
        self._block(1, decl.apply)
        self._end(saved)
        return name

    def _parser(self, decl: ir.ParserDecl, params: dict[str, str]) -> str:
        name = f"parser_{cname(decl.name)}"
        saved = self._begin(
            name,
            f"uint32_t {name}(ctx_t *ctx, packet_t *P, const uint8_t *buf, uint32_t n)",
            f"parser {decl.name} ({where(decl)}): returns where the payload starts",
            Scope(decl.name, params, in_parser=True),
        )
        self.emit(1, "uint32_t off = 0;")
        self._locals_init(decl.name)
        self.emit(1, "(void)L; (void)ctx; (void)buf; (void)n;")
        for local in decl.locals:
            self._stmt(1, local)
        self.emit(1, "goto state_start;")
        for state in decl.states:
            self.emit(0, f"state_{cname(state.name)}: /* {where(state)} */")
            self.emit(1, ";")
            for stmt in state.stmts:
                self._stmt(1, stmt)
            self._transition(1, state.transition)
        self._end(saved)
        return name

    def _goto(self, depth: int, target: str) -> None:
        if target in ("accept", "reject"):  # reject: ingress still runs, parser_error says why (bmv2)
            self.emit(depth, "return off;")
        else:
            self.emit(depth, f"goto state_{cname(target)};")

    def _keyset(self, key: str, keyset: ir.KeysetValue | ir.KeysetMask | ir.KeysetRange) -> str:
        """(A keyset that no 64-bit key can match is the test 0.)"""
        if isinstance(keyset, ir.KeysetValue):
            return f"{key} == {_lit(keyset.value)}" if 0 <= keyset.value < 1 << 64 else "0"
        if isinstance(keyset, ir.KeysetMask):
            bits, value = keyset.mask & mask(64), keyset.value & keyset.mask
            return f"({key} & {_lit(bits)}) == {_lit(value)}" if 0 <= value < 1 << 64 else "0"
        lo, hi = max(keyset.lo, 0), min(keyset.hi, mask(64))
        return f"({_lit(lo)} <= {key} && {key} <= {_lit(hi)})" if lo <= hi else "0"

    def _when(self, depth: int, tests: list[str], case: ir.SelectCase) -> None:
        self.emit(depth, f"if ({' && '.join(tests) or '1'}) {{ /* {where(case)} */")

    def _no_match(self, depth: int) -> None:
        self._parser_error_set(depth, "NoMatch")
        self.emit(depth, "return off;")

    def _deparser(self, decl: ir.ControlDecl, params: dict[str, str], shared: frozenset[str]) -> str:
        name = f"deparser_{cname(decl.name)}"
        saved = self._begin(
            name,
            f"size_t {name}(ctx_t *ctx, packet_t *P, uint8_t *out, uint32_t *shared_at)",
            f"deparser {decl.name} ({where(decl)}): returns how many bytes it wrote; shared_at: see p4_pass",
            Scope(decl.name, params, shared=shared),
        )
        self.emit(1, "size_t at = 0;")
        self._locals_init(decl.name)
        self.emit(1, "(void)L; (void)ctx; (void)shared_at;")
        self._block(1, decl.apply)
        self.emit(1, "return at;")
        self._end(saved)
        return name

    # ================================================================ statements
    def _exit(self, depth: int) -> None:
        assert self.scope is not None
        self.emit(depth, "return 1;" if self.scope.in_action else "return;")

    def _return(self, depth: int) -> None:
        assert self.scope is not None
        self.emit(depth, "return 0;" if self.scope.in_action else "return;")

    def _nested_block(self, depth: int, block: ir.Block) -> None:
        self.emit(depth, "{")
        self._block(depth + 1, block)
        self.emit(depth, "}")

    def _if(self, depth: int, cond: str, then: ir.Block, other: ir.Block | None, s: ir.If) -> None:
        self.emit(depth, f"if ({cond}) {{ /* {where(s)} */")
        self._block(depth + 1, then)
        if other is not None:
            self.emit(depth, "} else {")
            self._block(depth + 1, other)
        self.emit(depth, "}")

    def _verify(self, depth: int, cond: str, error: int, s: ir.Verify) -> None:
        self.emit(depth, f"if (!({cond})) {{ /* verify at {where(s)} */")
        self.emit(depth + 1, f"P->sm.parser_error = {error};")
        self.emit(depth + 1, "return off;")
        self.emit(depth, "}")

    def _owner(self) -> str:
        assert self.scope is not None
        return self.scope.owner

    def _vardecl(self, depth: int, s: ir.VarDecl) -> None:
        owner = self._owner()
        names = self.locals.setdefault(owner, {})
        if s.name in names and names[s.name] != s.type:
            raise UnsupportedError(f"local {s.name} declared twice with different types at {s.pos}")
        names[s.name] = s.type
        var = ir.Var(s.name, s.type, "local", "", s.pos)
        if is_composite(s.type) or isinstance(s.type, ir.VarbitType):  # zeroed: a varbit holds no bits
            self._local_ctype(s.type, owner, s.name)
            self.emit(depth, f"memset(&L->{cname(s.name)}, 0, sizeof L->{cname(s.name)});")
            if s.init is not None:
                self._assign(depth, var, s.init)
            return
        self.scalar_type(s.type, f"local {s.name} at {s.pos}")
        value = self.expr(s.init, depth) if s.init is not None else "0"
        self.emit(depth, f"L->{cname(s.name)} = {value};")

    def _assign_lookahead(self, depth: int, lhs: ir.Expr, rhs: ir.Lookahead) -> None:
        assert isinstance(lhs.type, ir.HeaderType)
        self._read_header(depth, lhs.type.name, self.place(lhs, depth), "off", advance=False)

    def _copy(self, depth: int, lhs: ir.Expr, rhs: ir.Expr) -> None:
        target = self.place(lhs, depth)
        self.emit(depth, f"{target} = {self.place(rhs, depth)};")

    def _store(self, depth: int, lhs: ir.Expr, value: str) -> None:
        self.emit(depth, f"{self.lvalue(lhs, depth)} = {value};")

    def _either(self, kept: str, put: str) -> str:
        return f"({kept} | {put})"

    def _let(self, depth: int, name: str, value: str, note: str = "") -> None:
        self.emit(depth, f"uint64_t {name} = {value};" + (f" /* {note} */" if note else ""))

    def _arm(self, depth: int, index: int, subject: str, labels: list[str] | None) -> None:
        if labels is None:
            self.emit(depth, "else {" if index else "{")
        else:
            test = " || ".join(f"{subject} == {label}" for label in labels) or "0"
            self.emit(depth, f"{'else if' if index else 'if'} ({test}) {{")

    def _close(self, depth: int) -> None:
        self.emit(depth, "}")

    # ================================================================ calls
    def _set_valid(self, depth: int, header: ir.Expr, valid: bool) -> None:
        self.emit(depth, f"{self._valid(header, depth)} = {int(valid)};")

    def _action_call(self, depth: int, call: ir.ActionCall) -> None:
        self._call_action(depth, call.action, call.args, None)

    def _apply(self, depth: int, table_name: str) -> tuple[str, str]:
        """Call the table's function; returns the C names of (hit, action id)."""
        fn = self._table_function(table_name)
        result = self.tmp("r")
        self.emit(depth, f"p4_applied_t {result} = {fn}(ctx, P, L);")
        self.emit(depth, f"if ({result}.exited) {self._exit_code()}")
        return f"{result}.hit", f"(uint64_t){result}.action"

    def _exit_code(self) -> str:
        assert self.scope is not None
        return "return 1;" if self.scope.in_action else "return;"

    def _table_function(self, table_name: str) -> str:
        fn = f"table_{cname(table_name)}"
        if fn in self.funcs:
            return fn
        table = self.tables[table_name]
        info = self.manifest.tables.get(table_name)
        if info is None:
            raise UnsupportedError(f"table {table_name} is applied but absent from the P4Info")
        scope = self.scope
        assert scope is not None
        saved = self._begin(
            fn,
            f"p4_applied_t {fn}(ctx_t *ctx, packet_t *P, {self._locals_ptr(scope.owner)})",
            f"table {table_name} ({where(table)})",
            Scope(scope.owner, scope.params, shared=scope.shared),
        )
        self.emit(1, f"p4_table_t *T = &ctx->tables[{info.index}];")
        self.emit(1, "p4_applied_t r;")
        self.emit(1, "r.hit = 0; r.action = 0; r.exited = 0;")
        keys = [self.expr(k.expr, 1) for k in table.keys]
        if _packed(table):
            parts, left = [], sum(ir.width_of(k.expr.type) for k in table.keys)
            for k, value in zip(table.keys, keys):
                width = ir.width_of(k.expr.type)
                left -= width
                part = f"({value} & {_lit(mask(width))})"
                parts.append(f"({part} << {left})" if left else part)
            self.emit(1, f"uint64_t word = {' | '.join(parts)}; /* the key fields in one word (p4_pack) */")
            self.emit(1, "int32_t h = p4_exact_find_word(T, word); /* all exact: a hash probe */")
        elif table.keys and all(k.match_kind == "exact" for k in table.keys):
            self.emit(1, f"uint64_t key[{len(keys)}] = {{{', '.join(keys)}}};")
            self.emit(1, f"int32_t h = p4_exact_find_n(T, key, {len(keys)}); /* all exact: a hash probe */")
        else:
            self.emit(1, f"uint64_t key[{max(1, len(keys))}] = {{{', '.join(keys) or '0'}}};")
            self.emit(1, "int32_t h = p4_table_find(T, key);")
        self.emit(1, "const uint64_t *args;")
        self.emit(1, "if (h < 0) {")
        self.emit(2, "r.action = T->default_action;")
        self.emit(2, "args = T->default_args;")
        self.emit(1, "} else {")
        self.emit(2, "r.hit = 1;")
        self.emit(2, "r.action = T->action[h];")
        self.emit(2, "args = T->args + (size_t)h * T->nargs;")
        if info.table_id in self.direct_counted:
            self.emit(2, "T->ctr[2 * h] += 1; /* direct counter */")
            self.emit(2, "T->ctr[2 * h + 1] += ctx->base.plen;")
        self.emit(1, "}")
        self.emit(1, "(void)args; (void)L;")
        first = True
        for ref in table.actions:
            self.emit(
                1,
                f"{'if' if first else 'else if'} (r.action == {_lit(self.action_ids[ref.action])}) {{"
                f" /* {ref.action} */",
            )
            exited = self._call_action(2, ref.action, (), "args")
            if exited:
                self.emit(2, f"r.exited = {exited};")
            self.emit(1, "}")
            first = False
        self.emit(1, "return r;")
        self._end(saved)
        return fn

    def _call_action(self, depth: int, action: str, args: tuple[ir.Expr, ...], entry_args: str | None) -> str:
        """Call an action with copy-in and copy-out; returns the C name of its exit flag ('' if it cannot)."""
        decl = self.actions[action]
        fn = self._action_function(decl)
        call_args = ["ctx", "P"] + ([] if action in self.top_actions else ["L"])
        copy_back: list[tuple[ir.Expr, str, bool]] = []
        directional = [p for p in decl.params if p.direction]
        for prm, arg in zip(directional, args):
            tmp = self.tmp("a")
            composite = is_composite(prm.type)
            ctype = self.ctype(prm.type, f"parameter {prm.name} of {action}") if composite else "uint64_t"
            if isinstance(arg, ir.ListExpr):  # `{...}` for a header or struct: built field by field
                self.emit(depth, f"{ctype} {tmp};")
                self.emit(depth, f"memset(&{tmp}, 0, sizeof {tmp});")
                self._assign_list(depth, ir.Var(tmp, prm.type, TEMP), arg)
            elif prm.direction in ("in", "inout"):
                value = self.place(arg, depth) if composite else self.expr(arg, depth)
                self.emit(depth, f"{ctype} {tmp} = {value};")
            else:
                self.emit(depth, f"{ctype} {tmp};")
                self.emit(depth, f"memset(&{tmp}, 0, sizeof {tmp});")
            call_args.append(f"&{tmp}")
            if prm.direction in ("out", "inout"):
                copy_back.append((arg, tmp, composite))
        directionless = [p for p in decl.params if not p.direction]
        for i, _prm in enumerate(directionless):
            if entry_args is not None:
                call_args.append(f"{entry_args}[{i}]")
            else:
                tmp = self.tmp("a")
                self.emit(depth, f"uint64_t {tmp} = {self.expr(args[len(directional) + i], depth)};")
                call_args.append(tmp)
        exits = may_exit(self.actions, action)
        flag = self.tmp("x") if exits else ""
        call = f"{fn}({', '.join(call_args)})"
        self.emit(depth, f"int {flag} = {call};" if exits else f"(void){call};")
        for arg, tmp, composite in copy_back:
            if composite:
                self.emit(depth, f"{self.place(arg, depth)} = {tmp};")
            else:
                self.store(depth, arg, tmp)
        if exits and entry_args is None:
            self.emit(depth, f"if ({flag}) {self._exit_code()}")
        return flag

    def _action_function(self, decl: ir.ActionDecl) -> str:
        fn = f"action_{cname(decl.fq_name)}"
        if fn in self.funcs:
            return fn
        scope = self.scope
        assert scope is not None
        top = decl.fq_name in self.top_actions
        owner = decl.fq_name if top else scope.owner
        params = ["ctx_t *ctx", "packet_t *P"] + ([] if top else [self._locals_ptr(owner)])
        names: dict[str, str] = {}
        for prm in decl.params:
            c = f"p_{cname(prm.name)}"
            if prm.direction:
                ctype = self.ctype(prm.type, f"parameter {prm.name} of action {decl.fq_name}")
                if not is_composite(prm.type):
                    ctype = "uint64_t"
                params.append(f"{ctype} *{c}")
                names[prm.name] = f"(*{c})"
            else:
                if is_composite(prm.type):
                    raise UnsupportedError(
                        f"directionless parameter {prm.name} of a composite type at {prm.pos}"
                    )
                self.scalar_type(prm.type, f"parameter {prm.name} of action {decl.fq_name}")
                params.append(f"uint64_t {c}")
                names[prm.name] = c
        saved = self._begin(
            fn,
            f"int {fn}({', '.join(params)})",
            f"action {decl.fq_name} ({where(decl)}): returns 1 when it executed exit",
            Scope(owner, scope.params if not top else {}, names, in_action=True, shared=scope.shared),
        )
        self.locals.setdefault(owner, {})
        if top:
            self._locals_init(owner)
        self.emit(1, "(void)ctx; (void)P; (void)L;")
        self._block(1, decl.body)
        self.emit(1, "return 0;")
        self._end(saved)
        return fn

    def _register(self, call: ir.ExternMethodCall) -> tuple[ArrayInfo, str]:
        """A register of the context and the C code of its cell at `{}` (cells are interleaved by bank)."""
        reg = self.manifest.registers.get(call.instance)
        if reg is None:
            raise UnsupportedError(f"register {call.instance} is absent from the P4Info at {call.pos}")
        return reg, f"ctx->bank_{reg.bank}[{{}} * {reg.stride} + {reg.column}]"

    def _register_read(self, depth: int, call: ir.ExternMethodCall, result: ir.Expr, index: ir.Expr) -> None:
        reg, cell = self._register(call)
        idx = self._index(depth, index)
        self.store(depth, result, f"({idx} < {reg.size} ? (uint64_t){cell.format(idx)} : 0)")

    def _register_write(self, depth: int, call: ir.ExternMethodCall, index: ir.Expr, value: ir.Expr) -> None:
        reg, cell = self._register(call)
        idx = self._index(depth, index)
        code = self.expr(value, depth)
        self.emit(depth, f"if ({idx} < {reg.size}) {cell.format(idx)} = ({_storage(reg.width)})({code});")

    def _counter_count(self, depth: int, call: ir.ExternMethodCall, index: ir.Expr) -> None:
        ctr = self.manifest.counters.get(call.instance)
        if ctr is None:
            raise UnsupportedError(f"counter {call.instance} is absent from the P4Info at {call.pos}")
        idx = self._index(depth, index)
        array = f"ctx->ctr_{cname(call.instance)}"
        self.emit(
            depth,
            f"if ({idx} < {ctr.size}) {{ {array}[2 * {idx}] += 1; "
            f"{array}[2 * {idx} + 1] += ctx->base.plen; }}",
        )

    def _nothing(self, depth: int, why: str) -> None:
        self.emit(depth, f"/* {why} */")

    def _index(self, depth: int, expr: ir.Expr) -> str:
        name = self.tmp("i")
        self._let(depth, name, self.expr(expr, depth))
        return name

    def _mark_to_drop(self, depth: int) -> None:
        self.emit(depth, f"P->sm.egress_spec = {DROP_PORT}; P->sm.mcast_grp = 0; /* mark_to_drop */")

    def _checksum(self, depth: int, call: ir.ExternFunctionCall, spec: Checksum) -> None:
        verify, cond, data, target = spec
        self.emit(depth, f"if ({self.expr(cond, depth)}) {{ /* {call.name} at {where(call)} */")
        checksum = self._csum16(depth + 1, data)
        if verify:
            self.emit(
                depth + 1, f"if ({checksum} != {self.expr(target, depth + 1)}) P->sm.checksum_error = 1;"
            )
        else:
            self.store(depth + 1, target, checksum)
        self.emit(depth, "}")

    def _hash(self, depth: int, call: ir.ExternFunctionCall, spec: Hash) -> None:
        result, algorithm, base, data, maximum = spec
        functions = {"crc32": "p4_crc32", "crc16": "p4_crc16"}
        if algorithm == "csum16":
            h = self._csum16(depth, data)
        elif algorithm in functions:
            bits, _ = self._concat(depth, data)
            h = f"{functions[algorithm]}(&{bits})"
        elif algorithm == "identity":
            bits, width = self._concat(depth, data)
            if width is None:  # its width is only known when run
                raise UnsupportedError(f"identity hash of varbit data at {call.pos} {HINT}")
            if width > MAX_WIDTH:
                raise UnsupportedError(f"identity hash of more than 64 bits at {call.pos} {HINT}")
            h = f"p4_get_bits({bits}.bytes, 0, (unsigned){bits}.bits)"
        else:
            raise UnsupportedError(f"hash algorithm {algorithm} at {call.pos}")
        hv, b, m = self.tmp("h"), self.tmp("b"), self.tmp("m")
        self.emit(
            depth,
            f"uint64_t {hv} = {h}, {b} = {self.expr(base, depth)}, {m} = {self.expr(maximum, depth)};",
        )
        modulo = self._mux(m, f"{hv} % {m}", hv)
        self.store(depth, result, f"(({b} + {modulo}) & {_lit(mask(ir.width_of(result.type)))})")

    def _random(self, depth: int, result: ir.Expr, lo: ir.Expr, hi: ir.Expr) -> None:
        self.store(depth, result, f"p4_random(&ctx->base, {self.expr(lo, depth)}, {self.expr(hi, depth)})")

    def _again(self, depth: int, name: str, request: int) -> None:
        self.may_fail = True  # a pass too many fails the packet
        self.passes = True
        member = "resubmit" if name.startswith("resubmit") else "recirculate"
        self.emit(depth, f"P->{member} = {request}; /* {name} */")

    def _clone(self, depth: int, name: str, session: str, request: int) -> None:
        self.may_fail = True  # a clone operation counts as a pass
        self.clones = True
        self.emit(
            depth,
            f"P->clone = (uint32_t)({session} & {CLONE_SESSION_MASK}) + 1; "
            f"P->clone_list = {request}; /* {name} */",
        )

    def _digest(self, depth: int, struct: str, data: ir.Expr) -> None:
        index, widths = self.digests[struct]
        self.emit(depth, f"P->digest = {index + 1}; /* digest<{struct}> */")
        at = 0
        for (value, _), width in zip(self._leaves(depth, data), widths, strict=True):
            self.emit(depth, f"p4_digest_put(P->digest_data + {at}, {value}, {(width + 7) // 8});")
            at += (width + 7) // 8

    def _composite_leaves(self, place: str, t: ir.Type) -> list[tuple[str, int]]:
        """Scalars of a composite in declaration order (validity bits excluded), as the Python layout."""
        if isinstance(t, ir.HeaderType):
            return [(f"{place}.{cname(f.name)}", _leaf_width(f.type)) for f in self.headers[t.name].fields]
        if isinstance(t, ir.StackType):
            out = []
            for i in range(t.size):
                out += self._composite_leaves(f"{place}.e[{i}]", t.element)
            return out  # the hidden nextIndex is not data
        assert isinstance(t, ir.StructType)
        out = []
        for f in self.structs[t.name].fields:
            if is_composite(f.type):
                out += self._composite_leaves(f"{place}.{cname(f.name)}", f.type)
            else:
                out.append((f"{place}.{cname(f.name)}", ir.width_of(f.type)))
        return out

    def _leaves(self, depth: int, data: ir.Expr) -> list[tuple[str, int]]:
        """The scalars of a list, header or struct, first element first: (C expression, width)."""
        leaves = []
        for item in data.elements if isinstance(data, ir.ListExpr) else (data,):
            if is_composite(item.type):
                leaves += self._composite_leaves(self.place(item, depth), item.type)
            else:
                leaves.append((self.expr(item, depth), _leaf_width(item.type)))
        return leaves

    def _csum16(self, depth: int, data: ir.Expr) -> str:
        """The Internet checksum of a field list, as p4_csum16 of its bits computes it, without the bits.

        Every field's position is known now, so each 16-bit word of the list is
        the sum of the pieces of fields that fall in it, shifted into place:
        the words' sum is a sum of shifted field pieces, folded once. The last
        word is padded with zero bits at its end, as p4_csum16 pads. No buffer,
        so no bound on the list's length either.
        """
        leaves = self._leaves(depth, data)
        if any(width is None for _, width in leaves):  # a varbit field: positions known when run
            bits, _ = self._concat(depth, data, leaves)
            name = self.tmp("csum")
            self.emit(depth, f"uint64_t {name} = p4_csum16(&{bits});")
            return name
        total, bit = self.tmp("sum"), 0
        self.emit(depth, f"uint64_t {total} = 0;")
        for value, width in leaves:
            terms, left = [], width
            while left:
                within = bit % 16
                take = min(16 - within, left)
                left -= take
                piece = f"({value} >> {left})" if left else value
                piece = f"({piece} & {_lit(mask(take))})"
                shift = 16 - within - take
                terms.append(f"({piece} << {shift})" if shift else piece)
                bit += take
            if terms:
                self.emit(depth, f"{total} += {' + '.join(terms)};")
        name = self.tmp("csum")
        self.emit(depth, f"uint64_t {name} = p4_csum_fold({total});")
        return name

    def _concat(
        self, depth: int, data: ir.Expr, leaves: list[tuple[str, int | None]] | None = None
    ) -> tuple[str, int | None]:
        """A p4_bits_t holding the bits of a list, header or struct (first element most significant), and
        their number (None with a varbit field: the bits it holds, known when run)."""
        leaves = self._leaves(depth, data) if leaves is None else leaves
        items = data.elements if isinstance(data, ir.ListExpr) else (data,)
        if sum(self._max_bits(item.type) for item in items) > 8 * 1024:
            raise UnsupportedError(f"a checksum or hash over more than 8192 bits at {where(data)}")
        name = self.tmp("bits")
        self.emit(depth, f"p4_bits_t {name}; {name}.bits = 0;")
        for value, width in leaves:
            if width is None:
                self.emit(depth, f"p4_bits_add_bytes(&{name}, {value}.bytes, {value}.len / 8);")
            else:
                self.emit(depth, f"p4_bits_add(&{name}, {value}, {width});")
        if any(w is None for _, w in leaves):
            return name, None
        return name, sum(w for _, w in leaves if w is not None)

    def _max_bits(self, t: ir.Type) -> int:
        """The most bits a value of type `t` adds to hash or checksum data (a varbit field: its maximum)."""
        if isinstance(t, ir.VarbitType):
            return t.max_width
        if isinstance(t, ir.HeaderType):
            return sum(self._max_bits(f.type) for f in self.headers[t.name].fields)
        if isinstance(t, ir.StructType):
            return sum(self._max_bits(f.type) for f in self.structs[t.name].fields)
        if isinstance(t, ir.StackType):
            return t.size * self._max_bits(t.element)
        return ir.width_of(t)

    # ================================================================ parse / deparse
    def _parser_error_set(self, depth: int, error: str) -> None:
        self.emit(depth, f"P->sm.parser_error = {self.errors.get(error, 2)}; /* error.{error} */")

    def _parser_error(self, depth: int, condition: str, error: str) -> None:
        assert self.scope is not None
        self.emit(depth, f"if ({condition}) {{")
        self.emit(depth + 1, f"P->sm.parser_error = {self.errors[error]}; /* error.{error} */")
        if self.scope.in_parser:
            self.emit(depth + 1, "return off;")
        else:  # the Python backend fails here (its `off` exists only in the parser): so do we
            self.may_fail = True
            self.emit(depth + 1, f'p4_fail(&ctx->base, "error.{error} outside the parser", "{where(None)}");')
        self.emit(depth, "}")

    def _header_bits(self, name: str) -> int:
        return self._bits_of(ir.HeaderType(name))

    def _read_varbit_header(self, depth: int, header: str, target: str, size_expr: ir.Expr) -> None:
        """extract(h, size): the checks in bmv2's order (ir.Extract), then the fields where they lie, those
        after the varbit field `size` bits further."""
        decl = self.headers[header]
        found = ir.varbit_field(decl)
        assert found is not None
        before, field = found
        assert isinstance(field.type, ir.VarbitType)
        nbytes = self._header_bits(header) // 8
        size = self.tmp("sz")
        self.emit(depth, f"uint64_t {size} = {self.expr(size_expr, depth)};")
        self._parser_error(depth, f"{size} % 8", "ParserInvalidArgument")
        self._parser_error(depth, f"(size_t)off + {nbytes} + {size} / 8 > n", "PacketTooShort")
        self._parser_error(depth, f"{size} > {field.type.max_width}", "HeaderTooShort")
        bit, offset = 0, "off"
        for f in decl.fields:
            if f is field:
                place = f"{target}.{cname(f.name)}"
                self.emit(depth, f"{place}.len = (uint32_t){size};")
                self.emit(depth, f"memcpy({place}.bytes, buf + off + {before // 8}, {size} / 8);")
                offset = f"off + {size} / 8"
                continue
            width = ir.width_of(f.type)
            self.emit(depth, f"{target}.{cname(f.name)} = {self._get_field(offset, bit, width, f.type)};")
            bit += width
        self.emit(depth, f"{target}.valid = 1;")
        self.emit(depth, f"off += {nbytes} + {size} / 8;")

    def _read_header(
        self, depth: int, header: str, target: str, offset: str, advance: bool, size: ir.Expr | None = None
    ) -> None:
        """Fill `target` from the packet at byte `offset` (bounds checked); valid; advance `off` if asked."""
        if size is not None:
            self._read_varbit_header(depth, header, target, size)
            return
        decl = self.headers[header]
        nbytes = self._header_bits(header) // 8
        self._parser_error(depth, f"(size_t){offset} + {nbytes} > n", "PacketTooShort")
        bit, i = 0, 0
        while i < len(decl.fields):
            run = _word_run(decl.fields, i, bit)
            if run:  # consecutive bit<32> fields: byte-swapped together, four at a time
                first, last = decl.fields[i], decl.fields[i + run - 1]
                self.emit(
                    depth,
                    f"p4_swap32_words({self._field_bytes(target, header, first.name)}, "
                    f"buf + {offset} + {bit // 8}, {run}); /* {first.name} .. {last.name} */",
                )
                bit, i = bit + 32 * run, i + run
                continue
            f = decl.fields[i]
            width = ir.width_of(f.type)
            self.emit(depth, f"{target}.{cname(f.name)} = {self._get_field(offset, bit, width, f.type)};")
            bit, i = bit + width, i + 1
        self.emit(depth, f"{target}.valid = 1;")
        if advance:
            self.emit(depth, f"off += {nbytes};")

    def _field_bytes(self, target: str, header: str, field: str) -> str:
        """The address of a field of header `target` as bytes (runs of fields are copied through it)."""
        ctype = self.composite_type(ir.HeaderType(header))
        const = "const " if target.startswith("P->orig->") else ""
        return f"(({const}uint8_t *)&{target} + offsetof({ctype}, {cname(field)}))"

    @staticmethod
    def _get_field(offset: str, bit: int, width: int, t: ir.Type) -> str:
        """A field read at a bit position known now: the bytes that hold it, one shift, one mask."""
        first, count = bit // 8, _byte_span(bit, width)
        if not width:
            value = "0"
        elif bit % 8 == 0 and width in (8, 16, 32, 48, 64):
            at = f"buf + {offset} + {first}"
            value = f"(uint64_t)buf[{offset} + {first}]" if width == 8 else f"p4_be{width}({at})"
        elif count <= 8:
            value = f"p4_load_be(buf + {offset} + {first}, {count})"
            shift = 8 * count - bit % 8 - width
            value = f"({value} >> {shift})" if shift else value
            value = f"({value} & {_lit(mask(width))})"
        else:  # 9 bytes: a field of 57 to 64 bits that starts inside a byte
            value = f"p4_get_bits(buf + {offset}, {bit}, {width})"
        return f"({value} & 1)" if isinstance(t, ir.BoolType) else value

    def _extract(self, depth: int, call: ir.Extract) -> None:
        header = call.header
        # extract(s.next) or (s.next.member), for a stack of unions: element nextIndex, then nextIndex += 1
        element = header.expr if isinstance(header, ir.Member) else header
        if isinstance(element, ir.StackMember):
            stack = self.place(element.expr, depth)
            assert isinstance(element.expr.type, ir.StackType) and isinstance(header.type, ir.HeaderType)
            size = element.expr.type.size
            self._parser_error(depth, f"{stack}.next >= {size}", "StackOutOfBounds")
            member = f".{cname(header.field)}" if isinstance(header, ir.Member) else ""
            self._read_header(
                depth, header.type.name, f"{stack}.e[{stack}.next]{member}", "off", True, call.size
            )
            self.emit(depth, f"{stack}.next += 1;")
            return
        assert isinstance(header.type, ir.HeaderType)
        self._read_header(depth, header.type.name, self.place(header, depth), "off", True, call.size)

    def _emit_header(self, depth: int, call: ir.Emit) -> None:
        assert self.scope is not None
        if isinstance(call.header, ir.StackMember):
            raise UnsupportedError(f"expected a header or field of the packet at {call.pos}")
        if self.scope.in_action:
            raise UnsupportedError(f"emit inside an action at {call.pos} (the C backend bounds the deparser)")
        for header_expr in self._headers_under(call.header):
            assert isinstance(header_expr.type, ir.HeaderType)
            header, target = header_expr.type.name, self.place(header_expr, depth)
            decl = self.headers[header]
            if not decl.fields:
                continue
            nbytes = self._header_bits(header) // 8
            self.deparse_bound += nbytes
            if ir.varbit_field(decl) is not None:
                self._emit_varbit_header(depth, target, decl)
                continue
            if target.startswith("P->orig->"):  # the same bytes in every copy: serialized once per group
                index = self.shared_emits.setdefault(target, len(self.shared_emits))
                self.emit(depth, f"if ({target}.valid) {{ /* emit {header}: every copy shares it */")
                self.emit(depth + 1, f"if (shared_at[{index}]) {{ /* serialized by an earlier copy */")
                self.emit(depth + 2, f"memcpy(out + at, ctx->base.arena + shared_at[{index}] - 1, {nbytes});")
                self.emit(depth + 1, "} else {")
                self.emit(depth + 2, f"shared_at[{index}] = (uint32_t)(out + at - ctx->base.arena) + 1;")
                self._put_fields(depth + 2, target, decl)
                self.emit(depth + 1, "}")
            else:
                self.emit(depth, f"if ({target}.valid) {{ /* emit {header} */")
                self._put_fields(depth + 1, target, decl)
            self.emit(depth + 1, f"at += {nbytes};")
            self.emit(depth, "}")

    def _emit_varbit_header(self, depth: int, target: str, decl: ir.HeaderDecl) -> None:
        """Emit a header with a varbit field: the fields before it, its bytes, the fields after it."""
        found = ir.varbit_field(decl)
        assert found is not None and isinstance(found[1].type, ir.VarbitType)
        before, field = found
        cut = decl.fields.index(field)
        after = decl.fields[cut + 1 :]
        self.deparse_bound += (found[1].type.max_width + 7) // 8
        place = f"{target}.{cname(field.name)}"
        self.emit(depth, f"if ({target}.valid) {{ /* emit {decl.name} */")
        self._put_fields(depth + 1, target, replace(decl, fields=decl.fields[:cut]))
        self.emit(depth + 1, f"memcpy(out + at + {before // 8}, {place}.bytes, {place}.len / 8);")
        self.emit(depth + 1, f"at += {before // 8} + {place}.len / 8;")
        self._put_fields(depth + 1, target, replace(decl, fields=after))
        self.emit(depth + 1, f"at += {sum(ir.width_of(f.type) for f in after) // 8};")
        self.emit(depth, "}")

    def _put_fields(self, depth: int, target: str, decl: ir.HeaderDecl) -> None:
        """Serialize the fields of header `target` at `out + at`."""
        bit, run, skip = 0, [], 0
        for i, f in enumerate(decl.fields):
            if skip:
                skip -= 1
                continue
            words = _word_run(decl.fields, i, bit) if not run else 0
            if words:  # consecutive bit<32> fields: byte-swapped together, four at a time
                last = decl.fields[i + words - 1]
                self.emit(
                    depth,
                    f"p4_swap32_words(out + at + {bit // 8}, {self._field_bytes(target, decl.name, f.name)}, "
                    f"{words}); /* {f.name} .. {last.name} */",
                )
                bit, skip = bit + 32 * words, words - 1
                continue
            width = ir.width_of(f.type)
            if width:
                run.append((f"(uint64_t){target}.{cname(f.name)}", width))
            bit += width
            if bit % 8 == 0 and run:  # the fields since the last byte boundary fill whole bytes
                self._put_run(depth, bit - sum(w for _, w in run), run)
                run = []

    def _put_run(self, depth: int, bit: int, run: list[tuple[str, int]]) -> None:
        """Write fields that fill whole bytes from byte `bit // 8`: one store when they fit in 64 bits."""
        total = sum(w for _, w in run)
        at = f"out + at + {bit // 8}"
        if len(run) == 1 and total in (8, 16, 32, 64):
            value = run[0][0]
            self.emit(
                depth,
                {
                    8: f"out[at + {bit // 8}] = (uint8_t){value};",
                    16: f"p4_put16({at}, {value});",
                    32: f"p4_put32({at}, {value});",
                    64: f"p4_put64({at}, {value});",
                }[total],
            )
        elif total <= 64:
            parts, left = [], total
            for value, width in run:
                left -= width
                part = value if width in (8, 16, 32, 64) else f"({value} & {_lit(mask(width))})"
                parts.append(f"({part} << {left})" if left else part)
            self.emit(depth, f"p4_store_be({at}, {' | '.join(parts)}, {total // 8});")
        else:
            for value, width in run:
                self.emit(depth, f"p4_put_bits(out + at, {bit}, {value}, {width});")
                bit += width

    def _headers_under(self, e: ir.Expr) -> Iterator[ir.Expr]:
        """Every header inside a header, struct or stack expression, in layout order."""
        t = e.type
        if isinstance(t, ir.HeaderType):
            yield e
        elif isinstance(t, ir.StackType):
            for i in range(t.size):
                element = ir.StackIndex(e, ir.Const(ir.BitType(32), i), t.element, e.pos)  # type: ignore[attr-defined]
                yield from self._headers_under(element)
        elif isinstance(t, ir.StructType):
            for f in self.structs[t.name].fields:
                yield from self._headers_under(ir.Member(e, f.name, f.type, e.pos))  # type: ignore[attr-defined]

    def _lookahead_bits(self, depth: int, e: ir.Lookahead) -> str:
        """The next width_of(T) bits of the packet as an integer, the packet long enough or an error."""
        width = self._bits_of(e.type)
        if width > MAX_WIDTH:
            raise UnsupportedError(f"lookahead of {width} bits at {e.pos} {HINT}")
        nbytes = (width + 7) // 8
        self._parser_error(depth, f"(size_t)off + {nbytes} > n", "PacketTooShort")
        value = self.tmp("la")
        self.emit(depth, f"uint64_t {value} = p4_get_bits(buf + off, 0, {width});")
        return value

    def _peek_field(self, depth: int, e: ir.Lookahead, bit: int, width: int, t: ir.Type) -> str:
        self._parser_error(depth, f"(size_t)off + {self._bits_of(e.type) // 8} > n", "PacketTooShort")
        return "(" + self._get_field("off", bit, width, t) + ")"

    def _stack_op(self, depth: int, op: ir.StackOp) -> None:
        stack = self.place(op.stack, depth)
        assert isinstance(op.stack.type, ir.StackType)
        size = op.stack.type.size
        n = min(op.count, size)
        if op.op == "push_front":
            if size - n:
                self.emit(
                    depth, f"memmove(&{stack}.e[{n}], &{stack}.e[0], {size - n} * sizeof {stack}.e[0]);"
                )
            if n:
                self.emit(depth, f"memset(&{stack}.e[0], 0, {n} * sizeof {stack}.e[0]);")
            self.emit(
                depth,
                f"{stack}.next = {stack}.next + {op.count} < {size} ? {stack}.next + {op.count} : {size};",
            )
        else:
            if size - n:
                self.emit(
                    depth, f"memmove(&{stack}.e[0], &{stack}.e[{n}], {size - n} * sizeof {stack}.e[0]);"
                )
            if n:
                self.emit(depth, f"memset(&{stack}.e[{size - n}], 0, {n} * sizeof {stack}.e[0]);")
            self.emit(depth, f"{stack}.next = {stack}.next > {op.count} ? {stack}.next - {op.count} : 0;")

    # ================================================================ places and values
    def place(self, e: ir.Expr, depth: int) -> str:
        """The C l-value of a header, struct, stack or field (not a scalar local)."""
        scope = self.scope
        assert scope is not None
        if isinstance(e, ir.Var):
            if e.kind == "param" and e.name in scope.params:
                return {"hdr": "P->hdr", "meta": "P->meta", STD_ROOT: "P->sm"}[scope.params[e.name]]
            if e.kind == TEMP:
                return e.name
            if e.kind == "action_param" and e.name in scope.action_params:
                return scope.action_params[e.name]
            if e.kind == "local" or (e.kind == "action_param" and not scope.action_params):
                names = self.locals.setdefault(scope.owner, {})
                names.setdefault(e.name, e.type)
                return f"L->{cname(e.name)}"
            raise UnsupportedError(f"{e.name} cannot be used here, at {e.pos}")
        if isinstance(e, ir.Member):
            if isinstance(e.expr, ir.StackMember) and e.expr.member == "last":
                return f"{self._last(e.expr, depth)}.{cname(e.field)}"
            base = e.expr
            if (
                isinstance(base, ir.Var)
                and base.kind == "param"
                and scope.params.get(base.name) == "hdr"
                and e.field in scope.shared
            ):  # no per-copy code writes it: read from the packet the copy was made from
                return f"P->orig->hdr.{cname(e.field)}"
            return f"{self.place(base, depth)}.{cname(e.field)}"
        if isinstance(e, ir.StackIndex) and isinstance(e.index, ir.Const):
            assert isinstance(e.expr.type, ir.StackType)
            if not 0 <= int(e.index.value) < e.expr.type.size:
                raise UnsupportedError(f"stack index {e.index.value} out of range at {e.pos}")
            return f"{self.place(e.expr, depth)}.e[{int(e.index.value)}]"
        if isinstance(e, ir.StackMember) and e.member == "last":
            return self._last(e, depth)
        raise UnsupportedError(f"expected a header or field of the packet at {where(e)}")

    def _last(self, e: ir.StackMember, depth: int) -> str:
        stack = self.place(e.expr, depth)
        self._parser_error(depth, f"{stack}.next == 0", "StackOutOfBounds")
        return f"{stack}.e[{stack}.next - 1]"

    def _valid(self, header: ir.Expr, depth: int) -> str:
        return f"{self.place(header, depth)}.valid"

    def _target(self, e: ir.Var | ir.Member | ir.StackIndex, depth: int) -> str | None:
        return self.place(e, depth)

    def _check_expr(self, e: ir.Expr) -> None:
        t = getattr(e, "type", None)
        if isinstance(t, ir.BitType) and t.width > MAX_WIDTH:
            raise UnsupportedError(f"an expression of type bit<{t.width}> at {where(e)} {HINT}")

    def _const(self, e: ir.Const) -> str:
        if isinstance(e.value, bool):
            return _lit(int(e.value))
        value = int(e.value)
        if isinstance(e.type, ir.BitType):
            value &= mask(e.type.width)
        if not 0 <= value < 1 << 64:
            raise UnsupportedError(f"constant {value} does not fit 64 bits at {where(e)}")
        return _lit(value)

    def _number(self, value: int) -> str:
        return _lit(value & mask(64))

    def _read(self, e: ir.Var | ir.Member | ir.StackIndex, depth: int) -> str:
        if isinstance(e.type, ir.VarbitType):  # a p4_varbitN_t: copied, compared, hashed whole
            return self.place(e, depth)
        return f"(uint64_t){self.place(e, depth)}"

    def _last_index(self, stack: ir.Expr, depth: int) -> str:
        return f"(((uint64_t){self.place(stack, depth)}.next - 1) & 0xFFFFFFFFu)"

    def _is_valid(self, header: ir.Expr, depth: int) -> str:
        return f"(uint64_t){self._valid(header, depth)}"

    def _truth(self, flag: str) -> str:
        return f"(uint64_t){flag}"

    def _negation(self, flag: str) -> str:
        return f"(uint64_t)!{flag}"

    def _mux(self, cond: str, then: str, other: str) -> str:
        return f"({cond} ? {then} : {other})"

    # Operators (common.Walker decides what each means): every value a uint64_t, so a shift by the width
    # or more is p4rt.h's (0, or the sign), never C's undefined behaviour; a signed value is an int64_t.
    def _spell(self, op: str) -> str:
        return op

    def _signed(self, value: str, width: int) -> str:
        return f"p4_sx({value}, {width})"

    def _unsigned(self, value: str) -> str:
        return f"(uint64_t){value}"

    def _neg(self, value: str) -> str:
        return f"(0 - {value})"

    def _shl(self, value: str, amount: str) -> str:
        return f"p4_shl({value}, {amount})"

    def _shr(self, value: str, amount: str) -> str:
        return f"p4_shr({value}, {amount})"

    def _sar(self, value: str, amount: str) -> str:
        return f"p4_sar({value}, {amount})"

    def _from_bool(self, value: str) -> str:
        return value

    def _divide(self, e: ir.Binary, a: str, b: str) -> str:
        self.may_fail = True  # by zero: the packet fails, as Python raises
        fn = "p4_div" if e.op == "/" else "p4_mod"
        return f'{fn}(&ctx->base, {a}, {b}, "{where(e)}")'

    def _saturating(self, e: ir.Binary, a: str, b: str) -> str:
        assert isinstance(e.type, ir.BitType)
        w, sign = e.type.width, "s" if e.type.signed else "u"
        if e.op == "|+|":
            return f"p4_sat_add_{sign}({a}, {b}, {w})"
        return f"p4_sat_sub_s({a}, {b}, {w})" if e.type.signed else f"p4_sat_sub_u({a}, {b})"

    def _varbit_equality(self, op: str, a: str, b: str) -> str:
        same = f"({a}.len == {b}.len && !memcmp({a}.bytes, {b}.bytes, {a}.len / 8))"
        return f"(uint64_t)({'' if op == '==' else '!'}{same})"

    def _unbounded(self, e: ir.Unary | ir.Binary, code: str) -> str:
        raise UnsupportedError.at(f"operator {e.op} on {type(e.type).__name__}", e)

    def _cast(self, e: ir.Cast, depth: int) -> str:
        if isinstance(e.expr, ir.Const) and isinstance(e.type, ir.BitType):
            # folded, as Python computes it: a C literal must be the bit pattern (an `int` may be negative)
            return _lit(cast_constant(e.expr, e.type))
        return super()._cast(e, depth)

    # ================================================================ the pipeline
    def _preserve_function(self) -> str:
        """p4_preserve: copy the metadata fields of a field list from one packet to the next pass."""
        cases = []
        for index, paths in sorted(preserved_fields(self.program).items()):
            copies = " ".join(
                f"D->meta.{'.'.join(map(cname, path))} = S->meta.{'.'.join(map(cname, path))};"
                for path in paths
            )
            cases.append(f"    case {index}: {copies} break;")
        body = "\n".join(cases)
        return f"""/* The user metadata fields @field_list(index) keeps across resubmit and recirculate. */
static P4_UNUSED void p4_preserve(packet_t *D, const packet_t *S, uint32_t list) {{
    switch (list) {{
{body}
    default: (void)D; (void)S; break;
    }}
}}
"""

    def _shared_count(self) -> int:
        return max(1, len(self.shared_emits))

    def _copy_functions(self) -> str:
        """p4_replica and p4_headers: copies of a packet that leave the shared headers where they are."""
        hdr = self.program.struct(self.hdr_type.name)  # type: ignore[union-attr]
        written = [cname(f.name) for f in hdr.fields if f.name not in self.shared]
        shared = [cname(f.name) for f in hdr.fields if f.name in self.shared]
        if shared:
            copies = "".join(f"\n    C->hdr.{m} = P->hdr.{m};" for m in written)
            whole = "".join(f"\n    D->hdr.{m} = S->hdr.{m};" for m in written)
            whole = f"D->hdr = S->orig->hdr;{whole}"
        else:
            copies, whole = "\n    C->hdr = P->hdr;", "D->hdr = S->hdr;"
        return f"""
/*
 * A copy of P for egress (a multicast replica, a clone's replica): everything before the headers,
 * and the headers egress may write ({", ".join(written) or "none"}). The headers no egress code writes
 * ({", ".join(shared) or "none"}) are not copied: the copy reads them from P->orig.
 */
static void p4_replica(packet_t *C, const packet_t *P) {{
    memcpy(C, P, offsetof(packet_t, hdr));{copies}
}}

/* All the headers of S, into D: those egress may write from S, the shared ones from S->orig. */
static P4_UNUSED void p4_headers(packet_t *D, const packet_t *S) {{
    {whole}
}}
"""

    def _digest_members(self) -> str:
        if not self.digests:
            return ""
        return (
            "    uint32_t digest; /* requested: 0, or the digest's P4Info index + 1 */\n"
            f"    uint8_t digest_data[{self.digest_bytes}]; /* its data, packed when digest was called */\n"
        )

    def _digest_put(self) -> str:
        if not self.digests:
            return ""
        return """
/* One member of a digest's data: big-endian, in `n` whole bytes. */
static inline void p4_digest_put(uint8_t *at, uint64_t value, unsigned n) {
    for (unsigned i = 0; i < n; i++) at[i] = (uint8_t)(value >> (8 * (n - 1 - i)));
}
"""

    def _digest_functions(self) -> str:
        """digest: the message of the pass leaves at the end of ingress as a frame to a digest port."""
        if not self.digests:
            return ""
        lengths = [0] * len(self.digests)
        for index, widths in self.digests.values():
            lengths[index] = sum((w + 7) // 8 for w in widths)
        return f"""
static const uint32_t p4_digest_length[] = {{{", ".join(map(str, lengths))}}};

/* The digest requested in ingress, as a frame to port {DIGEST_PORT_BASE} + its index. */
static void p4_digest_out(p4_base_t *B, const packet_t *P) {{
    uint32_t n = p4_digest_length[P->digest - 1];
    uint8_t *out = p4_out_begin(B, n);
    memcpy(out, P->digest_data, n);
    p4_out_end(B, {DIGEST_PORT_BASE}ull + P->digest - 1, n);
}}
"""

    def _clone_functions(self, blocks: dict[str, str]) -> str:
        """clone/clone_preserving_field_list at the end of ingress and of egress (as the Python backend)."""
        if not self.clones:
            return ""
        return f"""
/* The session a clone call asked for (the request is cleared, as bmv2 does); NULL without replicas. */
static const p4_group_t *p4_clone_session(ctx_t *ctx, packet_t *P, uint32_t *list, uint32_t *passes) {{
    const p4_group_t *s = &ctx->sessions[(P->clone - 1) & {CLONE_SESSION_MASK}];
    *list = P->clone_list;
    P->clone = P->clone_list = 0;
    if (!s->n) return NULL;
    p4_count_pass(&ctx->base, passes);
    return s;
}}

/* A clone: fresh state with the headers of `headers` and the field list's values of `kept`. */
static void p4_cloned(packet_t *D, const packet_t *headers, const packet_t *kept, uint32_t list,
                      uint64_t instance_type, uint32_t length) {{
    memset(D, 0, sizeof *D);
    p4_headers(D, headers);
    D->orig = D;
    if (list) p4_preserve(D, kept, list - 1);
    D->sm.instance_type = instance_type;
    D->sm.packet_length = length;
}}

/* Each replica of the session gets its copy of `clone`, which goes through egress at once. */
static void p4_clone_copies(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                            uint32_t payload_at, const packet_t *clone, const p4_group_t *s,
                            uint32_t *passes) {{
    uint32_t shared_at[{self._shared_count()}] = {{0}};
    for (uint32_t i = 0; i < s->n; i++) {{
        packet_t C;
        p4_replica(&C, clone);
        C.sm.egress_port = s->port[i];
        C.sm.egress_spec = s->port[i];
        C.sm.egress_rid = s->rid[i];
        p4_egress_copy(ctx, port, frame, at, length, payload_at, &C, shared_at, passes);
    }}
}}

/* I2E: the frame this pass began with, parsed again, with the field list's values at the end of ingress. */
static void p4_clone_at_ingress(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                                packet_t *P, uint32_t *passes) {{
    uint32_t list;
    const p4_group_t *s = p4_clone_session(ctx, P, &list, passes);
    if (!s) return;
    packet_t parsed, clone;
    memset(&parsed, 0, sizeof parsed);
    parsed.orig = &parsed;
    parsed.sm.ingress_port = port;
    parsed.sm.packet_length = length;
    uint32_t payload_at = {blocks["parse"]}(ctx, &parsed, frame ? frame : ctx->base.arena + at, length);
    {blocks["verify_checksum"]}(ctx, &parsed, length);
    p4_cloned(&clone, &parsed, P, list, {INSTANCE_TYPE_INGRESS_CLONE}, length);
    p4_clone_copies(ctx, port, frame, at, length, payload_at, &clone, s, passes);
}}

/* E2E: the headers as egress left them, with the field list's values at the end of egress. */
static void p4_clone_at_egress(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                               uint32_t payload_at, packet_t *C, uint32_t *passes) {{
    uint32_t list;
    const p4_group_t *s = p4_clone_session(ctx, C, &list, passes);
    if (!s) return;
    packet_t clone;
    p4_cloned(&clone, C, C, list, {INSTANCE_TYPE_EGRESS_CLONE}, length);
    p4_clone_copies(ctx, port, frame, at, length, payload_at, &clone, s, passes);
}}
"""

    def _process(self, blocks: dict[str, str]) -> str:
        bound = self.deparse_bound
        resubmit = recirculate = ""
        if self.passes:
            resubmit = f"""    if (P->resubmit) {{
        p4_again(ctx, port, frame, at, length, {INSTANCE_TYPE_RESUBMIT}, P, P->resubmit, passes);
        return 0;
    }}
"""
            recirculate = f"""    if (C->recirculate) {{ /* the deparsed frame goes round, not out */
        size_t again = B->arena_used;
        B->arena_used += n + payload_len;
        p4_again(ctx, port, NULL, again, (uint32_t)(n + payload_len), {INSTANCE_TYPE_RECIRC}, C,
                 C->recirculate, passes);
        return;
    }}
"""
        digest = "    if (P->digest) p4_digest_out(&ctx->base, P);\n" if self.digests else ""
        clone_at_ingress = clone_at_egress = ""
        if self.clones:
            clone_at_ingress = (
                "    if (P->clone) p4_clone_at_ingress(ctx, port, frame, at, length, P, passes);\n"
            )
            clone_at_egress = (
                "    if (C->clone) p4_clone_at_egress(ctx, port, frame, at, length, payload_at, C, passes);\n"
            )
        return f"""{self._preserve_function()}{self._copy_functions()}
static int p4_pass(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                   uint64_t instance_type, const packet_t *keep, uint32_t list, uint32_t *passes);
static void p4_egress_copy(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                           uint32_t payload_at, packet_t *C, uint32_t *shared_at, uint32_t *passes);

/* One more pass (resubmit, recirculation, clone operation) for this frame, or the packet fails. */
static void p4_count_pass(p4_base_t *B, uint32_t *passes) {{
    if (++*passes > {MAX_PASSES})
        p4_fail(B, "more than {MAX_PASSES} passes (resubmit/recirculate/clone loop)", "pipeline");
}}

/* Start the pass a resubmit or recirculate asked for, with the field list's values of `from`. */
static void p4_again(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                     uint64_t instance_type, const packet_t *from, uint32_t request, uint32_t *passes) {{
    p4_base_t *B = &ctx->base;
    p4_count_pass(B, passes);
    uint64_t plen = B->plen;
    p4_pass(ctx, port, frame, at, length, instance_type, from, request - 1, passes);
    B->plen = plen;
}}
{self._clone_functions(blocks)}{self._digest_functions()}
/*
 * One pass of a frame: parser, verify checksum, ingress, traffic manager
 * (multicast replicas or unicast), then per copy egress, compute checksum
 * and deparser, the unparsed payload appended. The frame is `frame`, or when
 * that is NULL the arena's bytes from `at` (a recirculated frame: the arena
 * may move while outputs are added, so it is found again each time).
 */
static int p4_pass(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                   uint64_t instance_type, const packet_t *keep, uint32_t list, uint32_t *passes) {{
    p4_base_t *B = &ctx->base;
    packet_t packet, copy;
    memset(&packet, 0, sizeof packet);
    packet_t *P = &packet;
    P->orig = P;
    B->plen = length;
    P->sm.ingress_port = port;
    P->sm.packet_length = length;
    P->sm.instance_type = instance_type;
    if (keep) p4_preserve(P, keep, list);
    uint32_t payload_at = {blocks["parse"]}(ctx, P, frame ? frame : B->arena + at, length);
    {blocks["verify_checksum"]}(ctx, P, length);
    {blocks["ingress"]}(ctx, P, length);
{clone_at_ingress}{digest}{resubmit}    uint64_t group = P->sm.mcast_grp;
    uint32_t copies = 1;
    const p4_group_t *g = NULL;
    if (group) {{
        g = group < P4_GROUPS ? &B->groups[group] : NULL;
        copies = g ? g->n : 0;
    }} else if (P->sm.egress_spec == {DROP_PORT}) {{
        return 0;
    }} else {{
        P->sm.egress_port = P->sm.egress_spec;
    }}
    /* Where in the arena each shared header was first serialized (+ 1; 0: not yet), for every copy. */
    uint32_t shared_at[{self._shared_count()}] = {{0}};
    for (uint32_t i = 0; i < copies; i++) {{
        packet_t *C = P; /* unicast: egress works on the packet itself */
        if (g) {{ /* a replica, with its port and rid */
            p4_replica(&copy, P);
            C = &copy;
            C->sm.egress_port = g->port[i];
            C->sm.egress_spec = g->port[i];
            C->sm.egress_rid = g->rid[i];
            C->sm.instance_type = {INSTANCE_TYPE_REPLICATION};
        }}
        p4_egress_copy(ctx, port, frame, at, length, payload_at, C, shared_at, passes);
    }}
    return 0;
}}

/* Egress, compute checksum and deparser for one copy: it leaves, recirculates or is dropped. */
static void p4_egress_copy(ctx_t *ctx, uint64_t port, const uint8_t *frame, size_t at, uint32_t length,
                           uint32_t payload_at, packet_t *C, uint32_t *shared_at, uint32_t *passes) {{
    p4_base_t *B = &ctx->base;
    size_t payload_len = length - payload_at;
    {blocks["egress"]}(ctx, C, length);
{clone_at_egress}    if (C->sm.egress_spec == {DROP_PORT}) return;
    {blocks["compute_checksum"]}(ctx, C, length);
    uint8_t *out = p4_out_begin(B, {bound} + payload_len);
    size_t n = {blocks["deparse"]}(ctx, C, out, shared_at);
    memcpy(out + n, (frame ? frame : B->arena + at) + payload_at, payload_len);
{recirculate}    p4_out_end(B, C->sm.egress_port, n + payload_len);
    (void)port;
    (void)passes;
}}

/*
 * One frame through the v1model pipeline (p4_pass, and the passes resubmit
 * and recirculate start, depth first). Returns how many frames came out
 * (p4_outputs / p4_arena say where), or -1 when the packet failed (p4_error
 * says why), as the Python backend raises.
 */
P4_EXPORT int p4_process(ctx_t *ctx, uint64_t port, const uint8_t *frame, uint32_t length) {{
    p4_base_t *B = &ctx->base;
    B->nouts = 0;
    B->arena_used = 0;
    B->error[0] = 0;
    uint32_t passes = 1;
    {"if (setjmp(B->fail)) return -1;" if self.may_fail else "/* nothing in this program can fail */"}
    p4_pass(ctx, port, frame, 0, length, 0, NULL, 0, &passes);
    return (int)B->nouts;
}}

P4_EXPORT const p4_out_t *p4_outputs(ctx_t *ctx) {{ return ctx->base.outs; }}
P4_EXPORT const uint8_t *p4_arena(ctx_t *ctx) {{ return ctx->base.arena; }}
P4_EXPORT const char *p4_error(ctx_t *ctx) {{ return ctx->base.error; }}

/* Process `count` frames back to back (benchmarks, the native packet loop); returns the frames out. */
P4_EXPORT long p4_process_batch(ctx_t *ctx, uint32_t count, const uint64_t *ports,
                                const uint8_t *const *frames, const uint32_t *lengths) {{
    long out = 0;
    for (uint32_t i = 0; i < count; i++) {{
        int n = p4_process(ctx, ports[i], frames[i], lengths[i]);
        if (n > 0) out += n;
    }}
    return out;
}}
"""


WORD_RUN = 4  # bit<32> fields in a row that the parser and deparser byte-swap as one block


def _word_run(fields: tuple[ir.Field, ...], i: int, bit: int) -> int:
    """How many bit<32> fields in a row start at fields[i] on a byte boundary (0: fewer than WORD_RUN)."""
    if bit % 8:
        return 0
    n = 0
    while (
        i + n < len(fields) and isinstance(fields[i + n].type, ir.BitType) and fields[i + n].type.width == 32
    ):
        n += 1
    return n if n >= WORD_RUN else 0


def _packed(table: ir.TableDecl) -> bool:
    """Whether a table's key is matched as one word: all fields exact and 64 bits together at most."""
    return (
        bool(table.keys)
        and all(k.match_kind == "exact" for k in table.keys)
        and sum(ir.width_of(k.expr.type) for k in table.keys) <= MAX_WIDTH
    )


def _leaf_width(t: ir.Type) -> int | None:
    """The width of a scalar of hash or checksum data; None for a varbit field (its length is run-time)."""
    return None if isinstance(t, ir.VarbitType) else ir.width_of(t)


def generate(program: ir.Program, info: p4i.P4Info) -> tuple[str, Manifest]:
    """The C source of `program` and the manifest that binds its state; UnsupportedError if it cannot."""
    return CCompiler(program, info).compile()
