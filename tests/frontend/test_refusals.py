"""Honest refusals: valid P4 outside the subset is `unsupported: <construct>` at the construct,
invalid P4 is an error, and nothing the compiler accepts is refused by the switch afterwards.

Each case edits the skeleton program (tests/frontend/skeleton.p4.in): BODY is
the ingress apply block, TOP goes before the parser, LOCAL into the ingress
control's declarations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program

SKELETON = (Path(__file__).parent / "skeleton.p4.in").read_text()


def program(tmp_path: Path, body: str = "", top: str = "", local: str = "") -> Path:
    text = SKELETON.replace("BODY", body)
    text = text.replace("parser P(", top + "\nparser P(", 1)
    text = text.replace("    action a(", local + "\n    action a(", 1)
    path = tmp_path / "prog.p4"
    path.write_text(text)
    return path


UNSUPPORTED = [
    ("for loops", {"body": "for (bit<8> i = 0; i < 4; i = i + 1) { hdr.h.a = i; }"}, "for loops"),
    ("named arguments", {"body": "a(x = 1);"}, "named arguments"),
    ("type declarations", {"top": "type bit<32> T;"}, "type declarations"),
    ("extern instance", {"local": "Checksum16() c;"}, "extern Checksum16"),
    ("user extern", {"top": "extern E { E(); void f(); }", "local": "E() e;"}, "extern E"),
    (
        "constructor parameters of a control never instantiated",
        {"top": "control N()(bit<8> v) { apply { } }"},
        "constructor parameters of N, never instantiated",
    ),
    ("struct header field", {"top": "struct s_t { bit<8> x; } header x_t { s_t s; }"}, "header field x_t.s"),
    ("odd header width", {"top": "header o_t { bit<3> x; }"}, "not a whole number of bytes"),
    ("clone3", {"body": "clone3(CloneType.I2E, 1, sm);"}, "clone3 (use clone_preserving_field_list)"),
    ("huge width", {"body": "bit<12301923123132> v = 0;"}, "wider than"),
    ("varbit in a struct", {"top": "struct v_t { varbit<32> x; }"}, "v_t.x outside a header"),
    (
        "field list by name",
        {"top": "const bit<8> FL = 1; struct f_t { @field_list(FL) bit<8> x; }"},
        "@field_list with an index that is not an integer literal",
    ),
    (
        "run-time field list index",
        {"body": "resubmit_preserving_field_list(hdr.h.a);"},
        "resubmit_preserving_field_list with a non-constant field list index",
    ),
    (
        "run-time clone field list index",
        {"body": "clone_preserving_field_list(CloneType.I2E, 1, hdr.h.a);"},
        "clone_preserving_field_list with a non-constant field list index",
    ),
    (
        "apply after ||",
        {"local": "table u { actions = { NoAction; } }", "body": "if (hdr.h.isValid() || u.apply().hit) { }"},
        "table apply on the right of ||",
    ),
    (
        "register of a struct",
        {"top": "struct c_t { bit<8> x; }", "local": "register<c_t>(4) r;"},
        "register of c_t (cells of bit<W>, int<W>, bool or a serializable enum)",
    ),
    (
        "constant too wide to compute",
        {"body": "hdr.h.a = 1 << 903012108;"},
        "a constant wider than 4096 bits",
    ),
    (
        "literal of 5000 digits",
        {"body": "hdr.h.a = " + "9" * 5000 + ";"},
        "integer literal wider than 4096 bits",
    ),
    (
        "switch in an action",
        {"local": "action s() { switch (hdr.h.a) { 1: { } } }"},
        "switch statements in actions",
    ),
    (
        "two lpm keys",
        {
            "local": "table l { key = { hdr.h.a: lpm; hdr.h.b: lpm; } actions = { NoAction; } }",
            "body": "l.apply();",
        },
        "a second lpm key in table l",
    ),
    (
        "unknown hash",
        {"body": "hash(hdr.h.a, HashAlgorithm.crc32_custom, 8w0, {hdr.h.b}, 8w4);"},
        "crc32_custom",
    ),
    (
        "a mask on an exact key in an entry",
        {
            "local": "table x { key = { hdr.h.b: exact; } actions = { NoAction; } "
            "const entries = { 16w1 &&& 16w3 : NoAction(); } }",
            "body": "x.apply();",
        },
        "a mask on the exact key hdr.h.b (bmv2 refuses it too)",
    ),
    (
        "`_` on an exact key in an entry",
        {
            "local": "table x { key = { hdr.h.b: exact; hdr.h.a: ternary; } actions = { NoAction; } "
            "const entries = { (_, 1) : NoAction(); } }",
            "body": "x.apply();",
        },
        "`_` on the exact key hdr.h.b (bmv2 refuses it too)",
    ),
    (
        "a mask on an optional key in an entry",
        {
            "local": "table x { key = { hdr.h.b: optional; } actions = { NoAction; } "
            "const entries = { 16w1 &&& 16w3 : NoAction(); } }",
            "body": "x.apply();",
        },
        "a mask on the optional key hdr.h.b (bmv2 refuses it too)",
    ),
]


@pytest.mark.parametrize(("what", "parts", "message"), UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
def test_valid_constructs_outside_the_subset_are_refused_by_name(
    tmp_path: Path, what: str, parts: dict[str, str], message: str
) -> None:
    path = program(tmp_path, **parts)
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    first = caught.value.diagnostics[0]
    assert first.pos is not None and first.pos.file == str(path) and first.pos.line > 0
    assert first.message.startswith("unsupported: "), first.render()
    assert message in first.message


@pytest.mark.parametrize(
    "call",
    ["clone(CloneType.I2E, 1);", "digest<meta_t>(1, meta);", "resubmit_preserving_field_list(0);"],
)
def test_calls_for_the_end_of_ingress_or_egress_are_refused_in_a_parser(tmp_path: Path, call: str) -> None:
    path = program(tmp_path)
    path.write_text(path.read_text().replace("pkt.extract(hdr.h);", "pkt.extract(hdr.h); " + call))
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    assert caught.value.diagnostics[0].message.startswith(
        f"unsupported: {call.split('(')[0].split('<')[0]} in a parser"
    )


INVALID = [
    ("an action named default", {"local": "action default() { }"}, "reserved keyword"),
    ("int shifted by a variable", {"body": "hdr.h.a = 1 << hdr.h.a;"}, "needs a width"),
    ("negative slice", {"body": "hdr.h.a = hdr.h.b[3:5];"}, "hi >= lo"),
    ("failed static_assert", {"body": "static_assert(false, \"no\");"}, "static_assert failed: no"),
    ("complex key without @name", {"local": "table k { key = { hdr.h.a + 1: exact; } actions = { } }",
                                    "body": "k.apply();"}, "needs a @name"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "parts", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_programs_are_errors(tmp_path: Path, what: str, parts: dict[str, str], message: str) -> None:
    with pytest.raises(CompileError) as caught:
        compile_program(program(tmp_path, **parts))
    assert message in caught.value.render()


METER = "direct_meter<bit<8>>(MeterType.packets) dm; action m() { dm.read(meta.m); }"
METERED = "table d { key = { hdr.h.a: exact; } actions = { NoAction; } meters = dm; }"
REFUSED_AS_BY_P4C = [
    ("two actions with one @name",
     {"local": '@name(".x") action p1() { } @name(".x") action p2() { }', "body": "p1(); p2();"},
     '@name(".x") action p2', "x: conflicting control plane name"),
    ("two tables with one @name",
     {"local": '@name("u") table u1 { actions = { NoAction; } } '
               '@name("u") table u2 { actions = { NoAction; } }', "body": "u1.apply(); u2.apply();"},
     '@name("u") table u2', "I.u: conflicting control plane name"),
    ("a direct meter nobody reads",
     {"local": "direct_meter<bit<8>>(MeterType.packets) dm; " + METERED, "body": "d.apply();"},
     "table d", "must have an action that reads it"),
    ("a direct meter read but attached to no table", {"local": METER, "body": "m();"},
     "direct_meter<bit<8>>", "is read but not attached to a table"),
    ("a direct meter read into two places",
     {"local": METER + " action m2() { dm.read(hdr.h.a); } " + METERED.replace("NoAction;", "m; m2;"),
      "body": "d.apply();"},
     "dm.read(hdr.h.a)", "every read must write to the same"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "parts", "at", "message"), REFUSED_AS_BY_P4C, ids=[c[0] for c in REFUSED_AS_BY_P4C]
)
def test_programs_p4c_refuses_are_errors_at_the_construct(
    tmp_path: Path, what: str, parts: dict[str, str], at: str, message: str
) -> None:
    with pytest.raises(CompileError) as caught:
        compile_program(program(tmp_path, **parts))
    first = caught.value.diagnostics[0]
    assert message in first.message, caught.value.render()
    assert first.pos is not None
    line = (tmp_path / "prog.p4").read_text().splitlines()[first.pos.line - 1]
    assert line[first.pos.col - 1 :].startswith(at), caught.value.render()


def test_the_headers_must_be_a_struct_of_headers_as_bmv2_requires(tmp_path: Path) -> None:
    path = program(tmp_path)
    path.write_text(
        path.read_text().replace("struct headers_t { h_t h; }", "struct headers_t { h_t h; bit<8> x; }")
    )
    expected = (
        r"prog.p4:7:25: error: headers_t: the type of the headers \(P's parameter hdr\) should be a struct"
    )
    with pytest.raises(CompileError, match=expected):
        compile_program(path)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("-6419018", "expected v1model version to be a non-negative number"),
        (
            "20000101",
            "20000101: unknown v1model version; initial supported version is 20180101, latest is 20200408",
        ),
        ("20250101", "unknown v1model version"),
    ],
)
def test_a_v1model_version_p4c_does_not_know_is_an_error(tmp_path: Path, version: str, message: str) -> None:
    path = program(tmp_path)
    path.write_text(f"#define V1MODEL_VERSION {version}\n" + path.read_text())
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    first = caught.value.diagnostics[0]
    assert message in first.message and first.pos is not None and first.pos.file.endswith("v1model.p4")


def test_a_parser_that_never_accepts_is_an_error(tmp_path: Path) -> None:
    path = program(tmp_path)
    path.write_text(path.read_text().replace("transition accept;", "transition reject;"))
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    assert "no path from start reaches accept" in caught.value.render()


def test_v1model_version_guards_follow_p4c(tmp_path: Path) -> None:
    # At the default version register has one type parameter; with 20200408 it needs the index type.
    path = program(tmp_path, local="register<bit<8>>(4) r;", body="r.write(0, 1);")
    compile_program(path)
    path.write_text("#define V1MODEL_VERSION 20200408\n" + path.read_text())
    with pytest.raises(CompileError, match="expects 2 type arguments"):
        compile_program(path)
    path.write_text(path.read_text().replace("register<bit<8>>", "register<bit<8>, bit<32>>"))
    compile_program(path)


ACCEPTED_NOW = [
    ("table without NoAction or default", {"local": "action b() { } "
                                            "table u { key = { hdr.h.a: exact; } actions = { b; } }",
                                            "body": "u.apply();"}),
    ("empty action list", {"local": "table e { actions = { } }", "body": "e.apply();"}),
    ("annotation after the match kind", {"local": "table n { key = { hdr.h.a: exact @name(\"k\"); } "
                                         "actions = { NoAction; } }", "body": "n.apply();"}),
    ("assignment to a slice", {"body": "hdr.h.b[11:4] = hdr.h.a;"}),
    ("header-typed local", {"body": "h_t x = hdr.h; x.a = 1; hdr.h = x;"}),
    ("struct initializer", {"body": "meta_t m2 = { 5 }; meta.m = m2.m;"}),
    ("static_assert", {"body": "static_assert(true);"}),
    ("random", {"body": "random(hdr.h.a, 8w1, 8w3);"}),
    ("list expression in an assignment", {"body": "meta = { hdr.h.a };"}),
    ("a table and an action with one name (as p4c)", {"local": '@name("same") action s() { } '
                                                     '@name("same") table u { actions = { s; } }',
                                                     "body": "u.apply(); s();"}),
]  # fmt: skip


@pytest.mark.parametrize(("what", "parts"), ACCEPTED_NOW, ids=[c[0] for c in ACCEPTED_NOW])
def test_valid_programs_that_used_to_be_refused_compile_and_run(
    tmp_path: Path, what: str, parts: dict[str, str], backend: str
) -> None:
    program_ir, info = compile_program(program(tmp_path, **parts))
    assert new_pipeline(program_ir, info, backend).process(1, bytes([7, 0x12, 0x34]) + b"payload")


EXIT_COPY_OUT = """
    action bump(inout bit<8> x) { x = x + 1; exit; }
"""


def test_exit_inside_an_action_still_copies_out_its_arguments(tmp_path: Path, backend: str) -> None:
    # P4_16 6.8.1: exit ends the control, but the action's inout arguments are copied back first.
    path = program(tmp_path, local=EXIT_COPY_OUT, body="bump(hdr.h.a); hdr.h.a = 99;")
    program_ir, info = compile_program(path)
    ((port, frame),) = new_pipeline(program_ir, info, backend).process(1, bytes([7, 0, 0]))
    assert frame[0] == 8  # bumped, and the assignment after exit never ran


def test_exit_from_a_nested_action_copies_out_at_every_level(tmp_path: Path, backend: str) -> None:
    local = EXIT_COPY_OUT + "    action outer(inout bit<8> y) { y = y + 10; bump(y); y = 0; }\n"
    path = program(tmp_path, local=local, body="outer(hdr.h.a); hdr.h.a = 99;")
    program_ir, info = compile_program(path)
    ((port, frame),) = new_pipeline(program_ir, info, backend).process(1, bytes([7, 0, 0]))
    assert frame[0] == 18
