"""Arguments in a table's action list (`actions = { set(hdr.h.a); }`): the action's directional
parameters stand for them, its directionless ones come from the entry, as in p4c.

Program in, packets out, on each backend (tests/frontend/skeleton.py: header
h {a: bit<8>, b: bit<16>}; TOP before the parser, LOCAL in the ingress
control, BODY its apply block).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from tests.frontend.skeleton import program

TOP = "action put(inout bit<8> x, bit<8> v) { h_t t; t.a = v; x = x + t.a; }"  # a header local too
LOCAL = """
    action put16(out bit<16> y, in bit<8> from, bit<16> v) { y = v + (bit<16>) from; }
    table u {
        key = { hdr.h.a: exact; }
        actions = { put(hdr.h.a); put16(hdr.h.b, hdr.h.a); }
        default_action = put(hdr.h.a, 100);
    }
"""


def test_bound_arguments_and_entry_data_both_reach_the_action(tmp_path: Path, backend: str) -> None:
    program_ir, info = compile_program(program(tmp_path, "u.apply();", TOP, LOCAL))
    actions = {a.preamble.name: a for a in info.actions}
    assert [p.name for p in actions["put"].params] == ["v"]  # the P4Info lists the entry's data only
    assert [p.name for p in actions["I.put16"].params] == ["v"]
    pipe = new_pipeline(program_ir, info, backend)
    (table,) = [pipe.state.tables[t.preamble.id] for t in info.tables if t.preamble.name == "I.u"]
    table.insert(st.Entry((1,), 0, st.ActionCall(actions["put"].preamble.id, (5,))))
    table.insert(st.Entry((2,), 0, st.ActionCall(actions["I.put16"].preamble.id, (0x300,))))
    out = {a: pipe.process(0, bytes([a, 0, 9]))[0][1].hex() for a in (1, 2, 3)}
    assert out == {1: "060009", 2: "020302", 3: "670009"}  # 1 + 5; b = 0x300 + 2; default: 3 + 100


REFUSED = [
    ("a directional parameter left unbound", "actions = { put; }",
     "put: the action list binds 1 arguments, got 0"),
    ("an l-value missing", "actions = { put(1); }", "argument x is 'inout' and needs an l-value"),
    ("another binding in another table", "actions = { put(hdr.h.a); } } table w { key = { hdr.h.b: exact; } "
     "actions = { put(meta.m); }", "unsupported: action put bound to other arguments in another table"),
    ("a default action binding otherwise", "actions = { put(hdr.h.a); } default_action = put(meta.m, 1);",
     "default_action: put is bound to other arguments in the action list"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "actions", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_p4c_refuses_is_refused_where_it_is(
    tmp_path: Path, what: str, actions: str, message: str
) -> None:
    local = "table u { key = { hdr.h.a: exact; } " + actions + " }"
    with pytest.raises(CompileError) as caught:
        compile_program(program(tmp_path, "u.apply();", TOP, local))
    first = caught.value.diagnostics[0]
    assert first.pos is not None and message in first.message, caught.value.render()


def test_an_action_both_bound_and_called_directly_is_refused(tmp_path: Path) -> None:
    local = "table u { key = { hdr.h.a: exact; } actions = { put(hdr.h.a); } }"
    with pytest.raises(CompileError, match="unsupported: calling action put, bound in an action list"):
        compile_program(program(tmp_path, "u.apply(); put(hdr.h.a, 1);", TOP, local))
