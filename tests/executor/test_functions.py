"""P4 functions: results, directional parameters, early returns, and P4's order of evaluation.

Program in, packets out, on each backend. The frame is header h ({a: bit<8>,
b: bit<16>}); the ingress block is each test's BODY, the functions its TOP.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program

SKELETON = (Path(__file__).resolve().parents[1] / "frontend/skeleton.p4.in").read_text()
FUNCTIONS = """
bit<8> incr(in bit<8> x) { return x + 1; }
bit<8> clamp(bit<8> v, bit<8> hi) { if (v > hi) { return hi; } return v; }
void add_to(inout bit<16> b, bit<8> by) { b = b + (bit<16>) by; }
bit<8> bump_and_tell(inout bit<8> a) { a = a + 10; return a + 1; }
h_t swapped(in h_t h) { h_t o = h; o.a = h.b[7:0]; o.b = (bit<16>) h.a; return o; }
bool is_small(bit<8> x) { return x < 16; }
"""


def program(tmp_path: Path, body: str, top: str = FUNCTIONS) -> Path:
    path = tmp_path / "prog.p4"
    text = SKELETON.replace("BODY", body + " sm.egress_spec = 1;").replace(
        "parser P(", top + "\nparser P(", 1
    )
    path.write_text(text)
    return path


def run(path: Path, backend: str, a: int, b: int) -> tuple[int, int]:
    ((port, frame),) = new_pipeline(*compile_program(path), backend).process(
        0, bytes([a]) + b.to_bytes(2, "big")
    )
    return frame[0], int.from_bytes(frame[1:3], "big")


def test_results_nest_and_return_early(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.h.a = clamp(incr(hdr.h.a), 8w100); add_to(hdr.h.b, incr(2));")
    assert run(path, backend, 1, 0x0200) == (2, 0x0203)
    assert run(path, backend, 200, 0) == (100, 3)


def test_inout_arguments_are_copied_back_before_the_result_is_assigned(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.h.a = bump_and_tell(hdr.h.a); hdr.h.b = (bit<16>) bump_and_tell(hdr.h.a);")
    assert run(path, backend, 1, 0) == (22, 23)  # a: 1 -> 11, then the result 12; then 22, result 23


def test_the_left_operand_is_read_before_a_call_on_its_right_changes_it(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.h.a = hdr.h.a + bump_and_tell(hdr.h.a);")
    assert run(path, backend, 1, 0)[0] == 13  # 1 + (the result 12), whatever the call did to hdr.h.a


def test_headers_are_passed_and_returned_by_value(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.h = swapped(hdr.h);")
    assert run(path, backend, 7, 0x0105) == (5, 7)


def test_a_call_without_effects_may_stand_on_the_right_of_and_and_in_conditions(
    tmp_path: Path, backend: str
) -> None:
    path = program(tmp_path, "if (hdr.h.a != 0 && is_small(incr(hdr.h.a))) { hdr.h.b = 1; }")
    assert run(path, backend, 3, 0)[1] == 1
    assert run(path, backend, 15, 0)[1] == 0
    assert run(path, backend, 0, 9)[1] == 9


def test_functions_are_not_in_the_p4info(tmp_path: Path) -> None:
    _, info = compile_program(program(tmp_path, "hdr.h.a = incr(hdr.h.a); t.apply();"))
    assert {a.preamble.name for a in info.actions} == {"I.a", "NoAction"}


REFUSED = [
    ("a call with effects on the right of ||", "if (hdr.h.a == 0 || bump_and_tell(hdr.h.a) == 1) { }",
     FUNCTIONS, "a call of a function with effects on the right of ||"),
    ("a call with effects in a branch of ?:",
     "hdr.h.b = (bit<16>) (hdr.h.a == 0 ? bump_and_tell(meta.m) : 8w1);",
     FUNCTIONS, "a call of a function with effects in a branch of ?:"),
    ("an argument a call in a later argument changes", "hdr.h.a = clamp(hdr.h.a, bump_and_tell(hdr.h.a));",
     FUNCTIONS, "hdr.h.a is passed to clamp and changed by a call in its arguments"),
    ("a generic function", "", "T id<T>(T x) { return x; }", "generic functions"),
    ("recursion", "", "bit<8> r(bit<8> x) { return r(x); }", "r: undeclared name"),
    ("a value from a void function", "", "void v() { return 1; }", "return with a value"),
    ("no value from a function with a result", "", "bit<8> f() { return; }",
     "return needs a value of type bit<8>"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "top", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_cannot_run_as_p4_says_is_refused_where_it_is(
    tmp_path: Path, what: str, body: str, top: str, message: str
) -> None:
    with pytest.raises(CompileError) as caught:
        compile_program(program(tmp_path, body, top))
    first = caught.value.diagnostics[0]
    assert first.pos is not None and first.pos.line > 0 and message in first.message, caught.value.render()


def test_a_call_in_a_parser_is_refused_by_name(tmp_path: Path) -> None:
    path = program(tmp_path, "")
    path.write_text(
        path.read_text().replace("pkt.extract(hdr.h);", "pkt.extract(hdr.h); hdr.h.a = incr(hdr.h.a);")
    )
    with pytest.raises(CompileError, match="unsupported: calling function incr here"):
        compile_program(path)
