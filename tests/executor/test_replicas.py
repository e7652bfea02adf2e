"""Copies of one packet share the headers egress never writes, and still leave exactly as the reference says.

The C backend reads such headers from the original packet instead of copying them into each
multicast replica or clone, and serializes them once per group of copies
(softswitch/backends/c/sharing.py). tests/executor/replicas.p4 writes every other header in egress
or compute checksum in one way the analysis must see (a table's action, setInvalid, setValid,
push_front, an action's inout argument, an extern's out argument, hash, a slice, update_checksum,
one field of a struct); these tests pin which headers are shared and send packets whose replicas
(rids 0..3), egress clones and recirculations take every one of those paths, on both backends.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from softswitch import ir
from softswitch.backends.c.sharing import shared_headers
from softswitch.frontend import compile_file
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from tests.conftest import NO_COMPILER
from tests.executor.differential import Twin

PROGRAM = Path(__file__).with_name("replicas.p4")
ETHERNET = bytes.fromhex("0000000000aa0000000000bb") + b"\x88\x88"
# Every header replicas.p4 parses after op, two bytes each (by_slice: bit<3> ++ bit<13>).
WORDS = 14
GROUP = 1  # four replicas: port 4 + rid, rid 0..3
CLONE_SESSION = 5  # two replicas: ports 8 and 9, rids 8 and 9


def frame(group: int, what: int, kept: int = 0x1234, read_only: int = 0x0F0F) -> bytes:
    words = [read_only, kept] + [0x100 + i for i in range(WORDS - 2)]
    return ETHERNET + bytes([group, what]) + b"".join(w.to_bytes(2, "big") for w in words) + b"tail"


def _program(path: Path) -> ir.Program:
    return compile_file(path)


def test_the_headers_no_egress_code_writes_are_shared() -> None:
    assert shared_headers(_program(PROGRAM)) == {"ethernet", "read_only", "kept", "nest2"}


@pytest.mark.parametrize(
    "egress",
    [
        "apply { headers_t copy = hdr; copy.kept.w = 1; }",  # the whole struct copied
        "action look(in headers_t h) { meta.seen = h.kept.w; } apply { look(hdr); }",  # an argument
        "apply { meta.seen = 1; }",  # metadata only: everything is shared
    ],
)
def test_a_struct_used_whole_in_egress_shares_nothing(tmp_path: Path, egress: str) -> None:
    text = PROGRAM.read_text()
    start = text.index("    register<bit<16>>(4) cells;")
    end = text.index("control ReplicaChecksum")
    path = tmp_path / "whole.p4"
    path.write_text(text[:start] + f"    {egress}\n}}\n\n" + text[end:].replace("update_", "verify_"))
    program = _program(path)
    if egress.startswith("apply { meta"):
        assert shared_headers(program) == {f.name for f in program.struct("headers_t").fields}
    else:
        assert shared_headers(program) == frozenset()


@pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc): the C backend cannot run")
def test_every_copy_leaves_as_the_reference_says() -> None:
    program, info = compile_program(PROGRAM)
    twin = Twin(program, info)
    for state in twin.states():
        state.pre.groups[GROUP] = tuple(st.Replica(4 + rid, rid) for rid in range(4))
        state.pre.groups[2] = (st.Replica(3, 2),)  # one replica: nothing to share with
        state.pre.clone_sessions[CLONE_SESSION] = (st.Replica(8, 8), st.Replica(9, 9))
        cells = next(iter(state.registers.values()))
        cells.values[:] = [0xA0, 0xA1, 0xA2, 0xA3]
        table = next(iter(state.tables.values()))
        stamp = next(a.preamble.id for a in info.actions if a.preamble.name.endswith("stamp"))
        table.insert(st.Entry((2,), 0, st.ActionCall(stamp, (0xBEEF,))))
    for group, what, length in itertools.product((0, GROUP, 2, 3), (0, 1, 2), (None, 20, 31)):
        sent = frame(group, what)[:length]
        out = twin.send(1, sent).frames
        if group == GROUP and length is None:
            # what 1: each replica is cloned at egress to both ports of the session; what 2: replica 0
            # recirculates (what = 0), and its new pass makes four replicas that do not.
            replicas = [f for port, f in out if port in (4, 5, 6, 7)]
            clones = [f for port, f in out if port in (8, 9)]
            assert (len(replicas), len(clones)) == {0: (4, 0), 1: (4, 8), 2: (7, 0)}[what]
            for copy in replicas + clones:  # kept: ingress added one per pass, every copy has it
                assert copy.startswith(ETHERNET) and copy[18:20] in (b"\x12\x35", b"\x12\x36")
                if what != 2:  # emitted twice alike (a recirculated frame has another layout)
                    assert copy[-6:-4] == copy[18:20]
    twin.check_state()
