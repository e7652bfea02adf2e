"""The C backend's pipeline: a compiled program in process, its state in native memory.

`Pipeline(program, p4info)` generates the program's C (`codegen`), builds
or reuses its shared object (`build`), creates a context (`p4_create`) and
binds the P4Runtime-facing `RuntimeState` to it: registers and counters
are views of the context's arrays, each table entry is mirrored into the
native table (its direct counter cell is a view of the native one), the
default actions and multicast groups likewise. So the P4Runtime server,
unchanged, writes straight into what packets read, and reads back what
packets wrote.

The context is freed when nothing refers to it any more: the pipeline and
every view of its memory keep it alive.
"""

from __future__ import annotations

import array
import ctypes
from collections.abc import Callable, Iterable, Iterator
from typing import overload

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.c import build
from softswitch.backends.c.codegen import Manifest, TableInfo, generate
from softswitch.backends.common import initial_state
from softswitch.runtime import state as st

U64 = ctypes.c_uint64
U64P = ctypes.POINTER(U64)
_FORMATS = {8: "B", 16: "H", 32: "I", 64: "Q"}


class PipelineError(RuntimeError):
    """A packet failed inside the program (as the Python backend raises): it is dropped."""


class _Out(ctypes.Structure):
    _fields_ = [("port", U64), ("offset", ctypes.c_uint32), ("length", ctypes.c_uint32)]


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of the exported functions (once per library)."""
    if getattr(lib, "_p4_declared", False):
        return
    vp, i32, u32 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32
    signatures = {
        "p4_create": ([], vp),
        "p4_destroy": ([vp], None),
        "p4_table": ([vp, u32], vp),
        "p4_register": ([vp, u32], vp),
        "p4_counter": ([vp, u32], vp),
        "p4_set_group": ([vp, U64, u32, U64P, U64P], ctypes.c_int),
        "p4_set_clone_session": ([vp, U64, u32, U64P, U64P], ctypes.c_int),
        "p4_process": ([vp, U64, ctypes.c_char_p, u32], ctypes.c_int),
        "p4_process_batch": (
            [vp, u32, U64P, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(u32)],
            ctypes.c_long,
        ),
        "p4_outputs": ([vp], ctypes.POINTER(_Out)),
        "p4_arena": ([vp], vp),
        "p4_error": ([vp], ctypes.c_char_p),
        "p4_table_insert": ([vp, U64P, U64P, i32, u32, u32, U64P, U64, U64], i32),
        "p4_table_modify": ([vp, i32, u32, U64P], None),
        "p4_table_delete": ([vp, i32], None),
        "p4_table_set_default": ([vp, u32, U64P], None),
        "p4_table_lookup": ([vp, U64P], i32),
        "p4_table_counters": ([vp], vp),
        "p4_table_entry_action": ([vp, i32], u32),
        "p4_table_entry_args": ([vp, i32], U64P),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name, None)
        if fn is None:  # p4_set_clone_session: only in a program that clones
            continue
        fn.argtypes = args
        fn.restype = result
    lib._p4_declared = True  # type: ignore[attr-defined]


class Context:
    """One native context; freed with the last reference to it."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        _declare(lib)
        self.lib = lib
        self.ptr = lib.p4_create()
        if not self.ptr:
            raise MemoryError("the C backend could not allocate the program's state")

    def __del__(self) -> None:
        if getattr(self, "ptr", None):
            self.lib.p4_destroy(self.ptr)
            self.ptr = None

    def view(self, address: int, width: int, count: int) -> memoryview:
        """`count` cells of `width` bits at `address`, as a memoryview of Python ints."""
        nbytes = max(1, count) * (width // 8)
        raw = (ctypes.c_char * nbytes).from_address(address)
        return memoryview(raw).cast("B").cast(_FORMATS[width])


class NativeArray:
    """A mutable sequence of ints in native memory (keeps its context alive)."""

    def __init__(self, context: Context, view: memoryview, size: int) -> None:
        self._context = context
        self._view = view
        self._size = size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self._view[i] for i in range(*index.indices(self._size))]
        if not -self._size <= index < self._size:
            raise IndexError(index)
        return self._view[index % self._size]

    def __setitem__(self, index: int | slice, value: int | Iterable[int]) -> None:
        if isinstance(index, slice):
            positions = range(*index.indices(self._size))
            try:  # one copy in C, not a Python step per cell (every register, at a switch's start)
                values = array.array(self._view.format, value)  # type: ignore[arg-type]
            except OverflowError as error:
                raise ValueError(f"a value does not fit a {self._view.format!r} cell: {error}") from None
            if len(values) != len(positions):
                raise ValueError(f"cannot assign {len(values)} values to {len(positions)} cells")
            self._view[index] = memoryview(values)
            return
        if not -self._size <= index < self._size:  # type: ignore[operator]
            raise IndexError(index)
        self._view[index % self._size] = value  # type: ignore[index,operator]

    def __iter__(self) -> Iterator[int]:
        return (self._view[i] for i in range(self._size))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NativeArray | list | tuple) and list(self) == list(other)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NativeArray({list(self)!r})"


def _words(values: Iterable[int], count: int) -> ctypes.Array[ctypes.c_uint64]:
    array = (U64 * max(1, count))()
    for i, v in enumerate(values):
        array[i] = v
    return array


class NativeTable:
    """Mirror of one `state.Table` in the context (see `state.TableMirror`)."""

    def __init__(self, context: Context, info: TableInfo, keys: list[st.KeyField]) -> None:
        self.context = context
        self.lib = context.lib
        self.ptr = self.lib.p4_table(context.ptr, info.index)
        self.nargs = info.nargs
        self.keys = keys

    def _cell(self, handle: int) -> NativeArray:
        base = self.lib.p4_table_counters(self.ptr) + 16 * handle
        return NativeArray(self.context, self.context.view(base, 64, 2), 2)

    def add(self, entry: st.Entry) -> None:
        values, masks = [], []
        prefix = 0
        for key, m in zip(self.keys, entry.match):
            full = (1 << key.width) - 1
            if m is None:
                values.append(0)
                masks.append(full if key.kind == st.RANGE else 0)
            elif key.kind in (st.EXACT, st.OPTIONAL):
                values.append(m)  # type: ignore[arg-type]
                masks.append(full)
            elif key.kind == st.LPM:
                value, prefix = m  # type: ignore[misc]
                values.append(value)
                masks.append(full ^ ((1 << (key.width - prefix)) - 1))
            else:  # ternary (value, mask) or range (low, high)
                a, b = m  # type: ignore[misc]
                values.append(a)
                masks.append(b)
        args = entry.action.args
        handle = self.lib.p4_table_insert(
            self.ptr,
            _words(values, len(values)),
            _words(masks, len(masks)),
            entry.priority,
            prefix,
            entry.action.action_id,
            _words(args, self.nargs),
            entry.packets,
            entry.bytes,
        )
        if handle < 0:
            raise st.StateError("RESOURCE_EXHAUSTED", "the native table is full")
        entry.handle = handle
        entry.cell = self._cell(handle)

    def update(self, entry: st.Entry) -> None:
        self.lib.p4_table_modify(
            self.ptr, entry.handle, entry.action.action_id, _words(entry.action.args, self.nargs)
        )

    def remove(self, entry: st.Entry) -> None:
        entry.cell = [entry.packets, entry.bytes]
        self.lib.p4_table_delete(self.ptr, entry.handle)
        entry.handle = -1

    def set_default(self, action: st.ActionCall) -> None:
        self.lib.p4_table_set_default(self.ptr, action.action_id, _words(action.args, self.nargs))

    def native_action(self, entry: st.Entry) -> st.ActionCall:
        """The action and arguments the packets of `entry` get, read back from the native table."""
        action = self.lib.p4_table_entry_action(self.ptr, entry.handle)
        args = self.lib.p4_table_entry_args(self.ptr, entry.handle)
        return st.ActionCall(action, tuple(args[i] for i in range(len(entry.action.args))))


class NativeGroups:
    """Mirror of the multicast groups in the context (see `state.GroupMirror`)."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def set_group(self, group: int, replicas: st.Replicas) -> None:
        self._set(self.context.lib.p4_set_group, "multicast group", group, replicas)

    def set_clone_session(self, session: int, replicas: st.Replicas) -> None:
        """Only a program that clones has clone sessions in its context (none other reads them)."""
        if hasattr(self.context.lib, "p4_set_clone_session"):
            self._set(self.context.lib.p4_set_clone_session, "clone session", session, replicas)

    def _set(self, setter: Callable[..., int], kind: str, group: int, replicas: st.Replicas) -> None:
        n = len(replicas)
        ports = _words((r.port for r in replicas), n)
        rids = _words((r.rid for r in replicas), n)
        if setter(self.context.ptr, group, n, ports, rids) != 0:
            raise st.StateError("RESOURCE_EXHAUSTED", f"{kind} {group} cannot be stored")


class Pipeline:
    """A program compiled to C, loaded in process; `state` is what the P4Runtime server reads and writes."""

    def __init__(self, program: ir.Program, p4info: p4i.P4Info) -> None:
        source, manifest = generate(program, p4info)
        self.source = source
        self.library = build.build(source, name=_file_name(program))
        self.context = Context(build.load(self.library))
        self.state = initial_state(program, p4info)
        _bind(self.context, manifest, self.state)
        lib = self.context.lib
        self._ptr = self.context.ptr
        self._process = lib.p4_process
        self._outputs = lib.p4_outputs
        self._arena = lib.p4_arena

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames out as (egress port, bytes), in emission order; [] when dropped or consumed."""
        count = self._process(self._ptr, ingress_port, frame, len(frame))
        if count < 0:
            raise PipelineError(self.context.lib.p4_error(self._ptr).decode(errors="replace"))
        if count == 0:
            return []
        outs = self._outputs(self._ptr)
        arena = self._arena(self._ptr)
        return [
            (outs[i].port, ctypes.string_at(arena + outs[i].offset, outs[i].length)) for i in range(count)
        ]


def _file_name(program: ir.Program) -> str:
    stem = program.source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in stem) or "program"


def _bind(context: Context, manifest: Manifest, state: st.RuntimeState) -> None:
    """Point the P4Runtime-facing state at the context's memory; copy what it already holds."""
    lib = context.lib
    for info in manifest.tables.values():
        table = state.tables[info.table_id]
        table.bind(NativeTable(context, info, table.keys))
    for info in manifest.registers.values():
        register = state.registers[info.object_id]
        cells = max(0, info.size - 1) * info.stride + 1  # the register's cells, every stride-th of its bank
        view = context.view(lib.p4_register(context.ptr, info.index), _cell_bits(info.width), cells)
        values = NativeArray(context, view[:: info.stride], info.size)
        values[:] = list(register.values)
        register.values = values
    for info in manifest.counters.values():
        counter = state.counters[info.object_id]
        both = context.view(lib.p4_counter(context.ptr, info.index), 64, 2 * info.size)
        packets, octets = (
            NativeArray(context, both[0::2], info.size),
            NativeArray(context, both[1::2], info.size),
        )
        packets[:] = list(counter.packets)
        octets[:] = list(counter.bytes)
        counter.packets, counter.bytes = packets, octets
    state.pre.bind(NativeGroups(context))


def _cell_bits(width: int) -> int:
    return next(bits for bits in (8, 16, 32, 64) if width <= bits)
