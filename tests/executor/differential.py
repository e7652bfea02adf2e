"""Run one program on both backends side by side and demand the same answer, bit for bit.

`Twin` holds a Python (reference) and a C pipeline of the same program.
Every control-plane change goes to both through the same `RuntimeState`
API the P4Runtime server uses; every packet goes to both, and the frames
out (ports, bytes, order), a failure of the packet, and afterwards every
register cell, counter and direct counter must be equal.

`RandomControl` fills tables, default actions, groups, clone sessions and registers with
random but valid contents drawn from the P4Info (values biased towards
those random packets also carry, so that lookups hit); `random_frame`
makes such packets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.loader import new_pipeline
from softswitch.runtime import state as st
from softswitch.runtime.pipeline import Pipeline

BYTES = (0x00, 0x01, 0xFF, 0x02)
# A program that parses header `in_t` ({inputs}) and writes one expression per field of `out_t` ({outputs}).
EXPRESSIONS = """
#include <core.p4>
#include <v1model.p4>
header in_t {{ {inputs} }}
header out_t {{ {outputs} }}
struct headers_t {{ in_t i; out_t o; }}
struct meta_t {{ }}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.i); transition accept; }}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    apply {{
        {locals}
        hdr.o.setValid();
{assignments}
        sm.egress_spec = 1;
    }}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.i); pkt.emit(hdr.o); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@dataclass
class Outcome:
    """What one packet did: its frames, or the failure (as a flag: the two backends word it differently)."""

    frames: list[tuple[int, bytes]]
    failed: bool


def _run(pipeline: Pipeline, port: int, frame: bytes) -> Outcome:
    try:
        return Outcome(pipeline.process(port, frame), False)
    except Exception:  # noqa: BLE001 - the Python backend raises whatever Python raises
        return Outcome([], True)


class Twin:
    """The same program on both backends."""

    def __init__(self, program: ir.Program, info: p4i.P4Info) -> None:
        self.info = info
        self.python = new_pipeline(program, info, "python")
        self.c = new_pipeline(program, info, "c")
        self.sent = 0

    def states(self) -> tuple[st.RuntimeState, st.RuntimeState]:
        return self.python.state, self.c.state

    def send(self, port: int, frame: bytes) -> Outcome:
        expected = _run(self.python, port, frame)
        got = _run(self.c, port, frame)
        self.sent += 1
        assert got == expected, (
            f"packet {self.sent} (port {port}, {frame.hex()}): C {got} != Python {expected}"
        )
        return expected

    def check_state(self) -> None:
        """Every register cell, counter and direct counter equal on both backends."""
        py, c = self.states()
        for rid, reg in py.registers.items():
            assert list(c.registers[rid].values) == list(reg.values), f"register {reg.name} differs"
        for cid, ctr in py.counters.items():
            assert list(c.counters[cid].packets) == list(ctr.packets), f"counter {ctr.name} packets differ"
            assert list(c.counters[cid].bytes) == list(ctr.bytes), f"counter {ctr.name} bytes differ"
        for tid, table in py.tables.items():
            mine = {(e.match, e.priority): (e.packets, e.bytes) for e in table.entries()}
            theirs = {(e.match, e.priority): (e.packets, e.bytes) for e in c.tables[tid].entries()}
            assert theirs == mine, f"direct counters of {table.name} differ"
            mirror = c.tables[tid].mirror
            for entry in c.tables[tid].entries():  # what packets get is what P4Runtime reads back
                assert mirror.native_action(entry) == entry.action, f"{table.name}: native entry differs"


def pattern(rng: random.Random, width: int) -> int:
    """A value of `width` bits that random frames often carry: 0, all ones, 0x0101.., 1, or random."""
    full = (1 << width) - 1
    choice = rng.randrange(6)
    if choice == 0:
        return 0
    if choice == 1:
        return full
    if choice == 2:
        return int.from_bytes(bytes([rng.choice(BYTES)]) * ((width + 7) // 8), "big") & full
    if choice == 3:
        return 1 & full
    return rng.getrandbits(width) if width else 0


def random_frame(rng: random.Random, prefix: bytes = b"", longest: int = 96) -> bytes:
    """A frame of random length whose bytes are mostly 0, 1, 2 or 0xff, after an optional prefix."""
    n = rng.randrange(longest + 1)
    body = bytes(rng.choice(BYTES) if rng.random() < 0.8 else rng.randrange(256) for _ in range(n))
    return prefix + body


class RandomControl:
    """Random, valid control-plane contents for any P4Info, applied to both backends alike."""

    def __init__(self, twin: Twin, rng: random.Random) -> None:
        self.twin = twin
        self.rng = rng
        self.actions = {a.preamble.id: a for a in twin.info.actions}

    def _match(self, table: st.Table) -> tuple[st.FieldMatch, ...]:
        rng, fields = self.rng, []
        for key in table.keys:
            w, full = key.width, (1 << key.width) - 1
            if key.kind == st.EXACT:
                fields.append(pattern(rng, w))
            elif key.kind == st.OPTIONAL:
                fields.append(None if rng.random() < 0.3 else pattern(rng, w))
            elif key.kind == st.LPM:
                plen = rng.randint(0, w)
                prefix = full ^ ((1 << (w - plen)) - 1)
                fields.append(None if plen == 0 else (pattern(rng, w) & prefix, plen))
            elif key.kind == st.TERNARY:
                mask = pattern(rng, w) or 1
                fields.append(None if rng.random() < 0.2 else (pattern(rng, w) & mask, mask))
            else:
                lo, hi = sorted((pattern(rng, w), pattern(rng, w)))
                fields.append(None if rng.random() < 0.2 else (lo, hi))
        return tuple(fields)

    def _action(self, table_id: int, default: bool) -> st.ActionCall | None:
        table = next(t for t in self.twin.info.tables if t.preamble.id == table_id)
        refs = [
            r
            for r in table.action_refs
            if r.scope != (p4i.ActionRef.DEFAULT_ONLY if not default else p4i.ActionRef.TABLE_ONLY)
        ]
        if not refs:
            return None
        action = self.actions[self.rng.choice(refs).id]
        args = tuple(pattern(self.rng, p.bitwidth) for p in action.params)
        return st.ActionCall(action.preamble.id, args)

    def fill(self, entries: int = 12) -> None:
        """Random entries in every table, random default actions, groups and register cells."""
        rng = self.rng
        py, c = self.twin.states()
        for table_id, table in py.tables.items():
            info = next(t for t in self.twin.info.tables if t.preamble.id == table_id)
            for _ in range(entries):
                action = self._action(table_id, default=False)
                if action is None or info.is_const_table:
                    break
                match = self._match(table)
                priority = rng.randint(1, 4) if table.needs_priority else 0
                outcomes = []
                for state in (py, c):
                    try:
                        state.tables[table_id].insert(st.Entry(match, priority, action))
                        outcomes.append("ok")
                    except st.StateError as error:
                        outcomes.append(error.code)
                assert outcomes[0] == outcomes[1], f"{table.name}: insert {outcomes}"
            default = self._action(table_id, default=True)
            if default is not None and not table.default_is_const and rng.random() < 0.5:
                py.tables[table_id].default_action = default
                c.tables[table_id].default_action = default
        for group in range(1, 5):
            replicas = tuple(st.Replica(rng.randrange(8), rng.randrange(4)) for _ in range(rng.randrange(4)))
            py.pre.groups[group] = c.pre.groups[group] = tuple(dict.fromkeys(replicas))
        for session in range(1, 8):  # clone sessions (tests/executor/clones.p4 uses 5 and 6)
            replicas = tuple(st.Replica(rng.randrange(8), rng.randrange(4)) for _ in range(rng.randrange(3)))
            py.pre.clone_sessions[session] = c.pre.clone_sessions[session] = tuple(dict.fromkeys(replicas))
        for rid, reg in py.registers.items():
            for _ in range(min(8, reg.size)):
                index, value = rng.randrange(reg.size), pattern(rng, reg.width)
                reg.values[index] = value
                c.registers[rid].values[index] = value

    def churn(self) -> None:
        """Delete or modify a few entries on both backends (what P4Runtime does between packets)."""
        py, c = self.twin.states()
        for table_id, table in py.tables.items():
            entries = [e for e in table.entries() if not e.is_const]
            for entry in self.rng.sample(entries, min(2, len(entries))):
                if self.rng.random() < 0.5:
                    for state in (py, c):
                        state.tables[table_id].delete(entry.match, entry.priority)
                else:
                    action = self._action(table_id, default=False)
                    if action is not None:
                        for state in (py, c):
                            state.tables[table_id].modify(entry.match, entry.priority, action, b"")
