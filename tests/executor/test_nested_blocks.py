"""Parsers and controls instantiated inside others: inlined by the front end, named as p4c names them.

Program in, packets out, on each backend. `nested.p4` instantiates a
sub-parser and controls (twice, and two levels deep); the small programs
here edit the skeleton (tests/frontend/skeleton.p4.in: header h {a: bit<8>,
b: bit<16>}): TOP goes before the parser, LOCAL into the ingress control's
declarations, BODY is its apply block.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy.proto import p4i

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from softswitch.runtime.pipeline import Pipeline
from tests.frontend.skeleton import program, run

HERE = Path(__file__).resolve().parent
NESTED = HERE / "nested.p4"


def nested(backend: str) -> tuple[Pipeline, p4i.P4Info]:
    program_ir, info = compile_program(NESTED)
    return new_pipeline(program_ir, info, backend), info


def ids(info: p4i.P4Info, kind: str) -> dict[str, int]:
    """Names -> ids of the P4Info's `kind` (tables, actions, counters, registers)."""
    return {x.preamble.name: x.preamble.id for x in getattr(info, kind)}


def send(pipe: Pipeline, port: int, frame: str) -> str | None:
    out = pipe.process(port, bytes.fromhex(frame))
    return out[0][1].hex() if out else None


def add_entry(pipe: Pipeline, info: p4i.P4Info, table: str, key: int, action: str, arg: int) -> None:
    call = st.ActionCall(ids(info, "actions")[action], (arg,))
    pipe.state.tables[ids(info, "tables")[table]].insert(st.Entry((key,), 0, call))


def test_each_instance_has_its_own_tables_counters_and_registers_named_under_it() -> None:
    _, info = compile_program(NESTED)
    names = [t.preamble.name for t in info.tables]
    assert names == ["I.b1.amounts", "I.twice.inner.amounts", "I.b2.amounts"]
    assert [a.preamble.name for a in info.actions] == ["I.b1.add", "I.twice.inner.add", "I.b2.add"]
    assert [a.preamble.alias for a in info.actions] == ["b1.add", "inner.add", "b2.add"]
    assert [c.preamble.name for c in info.counters] == ["I.b1.seen", "I.twice.inner.seen", "I.b2.seen"]
    assert [r.preamble.name for r in info.registers] == ["I.twice.last"]
    assert [m.name for m in info.tables[0].match_fields] == ["x"]  # the key as written in the control


def test_a_sub_parser_runs_where_it_is_applied_and_the_calling_state_goes_on_after_it(backend: str) -> None:
    pipe, _ = nested(backend)
    # kind 2: the sub-parser extracts two options and `last`; from port 3 the state then adds 2 to meta.n
    assert send(pipe, 3, "02fffffd0102ff") == "05fd0014010214"
    # kind 1: one option, `last` (an out argument) invalid; from port 0 meta.n was set before the call
    assert send(pipe, 0, "01050010aa") == "04160013aa13"
    assert send(pipe, 0, "00050010") == "0016001313"  # kind 0: no option


def test_controls_applied_with_different_arguments_copy_them_in_and_out(backend: str) -> None:
    pipe, info = nested(backend)
    add_entry(pipe, info, "I.twice.inner.amounts", 2, "I.twice.inner.add", 0x10)
    add_entry(pipe, info, "I.b1.amounts", 5, "I.b1.add", 0x20)
    # b1: 5 + 0x20 + 0x10; twice: kind 2 + 0x10 + 2 through inner's shared table; b2: n 1 -> 9 -> 19
    assert send(pipe, 0, "02050010010203") == "14350013010213"
    assert list(pipe.state.registers[ids(info, "registers")["I.twice.last"]].values) == [0, 0x14]
    # twice applied inner to meta.m (0: returned before counting) and to kind 2 (counted at 2)
    assert pipe.state.counters[ids(info, "counters")["I.twice.inner.seen"]].packets[2] == 1


def test_return_leaves_only_the_inlined_apply_body(tmp_path: Path, backend: str) -> None:
    top = "control C(inout bit<8> x) { apply { if (x > 10) { return; } x = x + 1; } }"
    path = program(tmp_path, "c.apply(hdr.h.a); hdr.h.b = 7;", top, "C() c;")
    assert run(path, backend, 3, 0) == (4, 7)
    assert run(path, backend, 11, 0) == (11, 7)


def test_exit_in_an_inlined_control_ends_the_block_with_what_it_wrote(tmp_path: Path, backend: str) -> None:
    top = "control C(inout bit<8> x) { apply { x = x + 1; if (x == 5) { exit; } x = x + 1; } }"
    path = program(tmp_path, "hdr.h.b = 7; c.apply(hdr.h.a); hdr.h.b = 8;", top, "C() c;")
    assert run(path, backend, 1, 0) == (3, 8)
    # p4c substitutes the argument (one call, no aliasing), so bmv2 keeps the write made before exit
    assert run(path, backend, 4, 0) == (5, 7)


def test_arguments_that_alias_are_copied_so_each_parameter_sees_the_value_at_the_call(
    tmp_path: Path, backend: str
) -> None:
    top = "control C(inout bit<8> x, in bit<8> y) { apply { x = x + 1; x = x + y; } }"
    path = program(tmp_path, "c.apply(hdr.h.a, hdr.h.a);", top, "C() c;")
    assert run(path, backend, 3, 0) == (7, 0)  # 3 + 1 + 3, not 3 + 1 + 4


def test_out_headers_start_invalid_at_every_call(tmp_path: Path, backend: str) -> None:
    top = "control C(out h_t o) { apply { o.b = o.isValid() ? 16w1 : 16w2; } }"
    path = program(tmp_path, "C.apply(hdr.h); hdr.h.setValid();", top)
    assert run(path, backend, 9, 0) == (9, 2)


def test_a_direct_invocation_is_an_instance_named_after_its_type(tmp_path: Path, backend: str) -> None:
    top = (
        "control C(inout bit<8> x) { action set(bit<8> v) { x = v; }"
        " table u { key = { x: exact; } actions = { set; } } apply { u.apply(); } }"
    )
    path = program(tmp_path, "C.apply(hdr.h.a);", top)
    program_ir, info = compile_program(path)
    assert [t.preamble.name for t in info.tables] == ["I.C.u"]
    pipe = new_pipeline(program_ir, info, backend)
    add_entry(pipe, info, "I.C.u", 3, "I.C.set", 9)
    assert send(pipe, 0, "030000") == "090000"


REFUSED = [
    ("a control in a parser", "control C() { apply { } }", "", "", "a control cannot be instantiated"),
    ("a parser in a control", "parser Q(packet_in p) { state start { transition accept; } }", "Q() q;", "",
     "a parser cannot be instantiated inside a control"),
    ("apply in an action", "control C() { apply { } }", "C() c; action b() { c.apply(); }", "",
     "unsupported: applying control c here"),
    ("apply in an expression", "control C() { apply { } }", "C() c;", "if (c.apply()) { }",
     "c is not a value"),
    ("wrong arguments", "control C(inout bit<8> x) { apply { } }", "C() c;", "c.apply(1);",
     "argument x is 'inout' and needs an l-value"),
    ("an error inside the control", "control C(in bit<8> x) { apply { x = 1; } }", "C() c;",
     "c.apply(hdr.h.a);", "cannot assign to x: it is an 'in' parameter"),
    ("too few constructor arguments", "control C()(bit<8> v) { apply { } }", "C() c;", "c.apply();",
     "C: expects 1 constructor arguments, got 0"),
    ("a constructor argument not constant", "control C()(bit<8> v) { apply { } }", "C(meta.m) c;", "",
     "constructor argument v must be a compile-time constant"),
    ("a constructor argument of another control type",
     "control T(inout bit<8> x); control U(in bit<8> x) { apply { } } control C()(T t) { apply { } }",
     "U() u; C(u) c;", "", "C: u is no T"),
    ("recursion", "control C(inout bit<8> x) { apply { C.apply(x); } }", "C() c;", "c.apply(hdr.h.a);",
     "C cannot be instantiated or applied inside itself"),
    ("recursion through constructor arguments", "control C()(bit<8> k) { C(k) c; apply { c.apply(); } }",
     "C(1) c;", "c.apply();", "C cannot be instantiated or applied inside itself"),
    ("a direct invocation of a control with constructor parameters", "control C()(bit<8> v) { apply { } }",
     "", "C.apply();", "C has constructor parameters: instantiate it to apply it"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "top", "local", "body", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_p4_or_the_subset_forbids_is_refused_where_it_is(
    tmp_path: Path, what: str, top: str, local: str, body: str, message: str
) -> None:
    path = program(tmp_path, body, top, local)
    if what == "a control in a parser":
        path.write_text(path.read_text().replace("state start", "C() c; state start", 1))
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    diagnostics = caught.value.diagnostics
    assert len(diagnostics) == 1, caught.value.render()  # an error inside a control: reported once
    first = diagnostics[0]
    assert first.pos is not None and first.pos.line > 0 and message in first.message, caught.value.render()


def test_a_sub_parser_applied_inside_a_statement_is_refused(tmp_path: Path) -> None:
    top = "parser Q(packet_in p, inout headers_t h) { state start { transition accept; } }"
    path = program(tmp_path, "", top)
    text = path.read_text().replace(
        "state start { pkt.extract(hdr.h);",
        "Q() q; state start { pkt.extract(hdr.h); if (hdr.h.a == 1) { q.apply(pkt, hdr); }",
    )
    path.write_text(text)
    with pytest.raises(CompileError, match="unsupported: applying parser q here"):
        compile_program(path)


def test_a_sub_parser_applied_with_other_arguments_copies_them(tmp_path: Path, backend: str) -> None:
    top = "parser Q(packet_in p, out h_t x) { state start { p.extract(x); transition accept; } }"
    path = program(tmp_path, "", top)
    parser = (
        "Q() q; h_t tmp; state start { transition select(sm.ingress_port) { 0: direct; default: copied; } }"
        " state direct { q.apply(pkt, hdr.h); transition accept; }"
        " state copied { q.apply(pkt, tmp); hdr.h = tmp; hdr.h.a = 0xee; transition accept; }"
    )
    original = "state start { pkt.extract(hdr.h); transition accept; }"
    path.write_text(path.read_text().replace(original, parser))
    program_ir, info = compile_program(path)
    pipe = new_pipeline(program_ir, info, backend)
    assert send(pipe, 0, "010203") == "010203"
    assert send(pipe, 1, "010203") == "ee0203"


def test_constructor_arguments_are_values_or_instances_where_it_is_instantiated(
    tmp_path: Path, backend: str
) -> None:
    top = (
        "control T(inout bit<8> x);"
        " control Add(inout bit<8> x)(bit<8> by) { apply { x = x + by; } }"
        " control Twice(inout bit<8> x)(T t) { apply { t.apply(x); t.apply(x); } }"
    )
    path = program(tmp_path, "one.apply(hdr.h.a); ten.apply(hdr.h.a); twice.apply(hdr.h.a);", top,
                   "Add(1) one; Add(10) ten; Twice(one) twice;")  # fmt: skip
    assert run(path, backend, 3, 0) == (16, 0)  # 3 + 1 + 10, then one twice more


def test_the_package_may_pass_constructor_arguments(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.h.a = hdr.h.a + k;")
    header = "control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm)"
    text = path.read_text().replace(header + " {", header + "(bit<8> k) {")
    path.write_text(text.replace(" I(), ", " I(8w7), "))
    assert run(path, backend, 3, 0) == (10, 0)


def test_instances_never_applied_compile_and_their_tables_are_not_in_the_p4info(tmp_path: Path) -> None:
    top = (
        "parser Q(packet_in p, inout headers_t h) { state start { transition accept; } }"
        " control C(inout bit<8> x) { table u { key = { x: exact; } actions = { NoAction; } }"
        " apply { u.apply(); } }"
    )
    path = program(tmp_path, "", top, "C() c;")
    path.write_text(path.read_text().replace("state start { pkt", "Q() q; state start { pkt", 1))
    _, info = compile_program(path)
    assert [t.preamble.name for t in info.tables] == []
