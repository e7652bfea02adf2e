"""Valid P4 that p4c parses and this grammar once did not: compound assignments, structure
expressions `{f = v}`, `return {...}`, annotated blocks, free-form and structured annotations.

Program in, packets out (or the P4Info), on each backend; each case edits the
skeleton (tests/frontend/skeleton.p4.in: header h {a: bit<8>, b: bit<16>}):
BODY is the ingress apply block, TOP goes before the parser, LOCAL into the
ingress control's declarations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from tests.frontend.skeleton import program, run


def test_compound_assignments_are_the_operation_then_the_assignment(tmp_path: Path, backend: str) -> None:
    body = "hdr.h.a += 3; hdr.h.a <<= 1; hdr.h.b |+|= 16w0xfff0; hdr.h.b ^= 0x000f; hdr.h.a |-|= 100;"
    assert run(program(tmp_path, body), backend, 5, 0x0020) == (0, 0xFFF0)  # (5+3)<<1 = 16, 16 |-| 100 = 0
    assert run(program(tmp_path, body), backend, 60, 0) == (26, 0xFFFF)  # 126 |-| 100


def test_a_structure_expression_names_each_field_in_any_order(tmp_path: Path, backend: str) -> None:
    top = "struct pair_t { bit<8> x; bit<16> y; }"
    body = "pair_t p = { y = 7, x = hdr.h.a + 1 }; hdr.h = { b = p.y + (bit<16>) p.x, a = p.x };"
    assert run(program(tmp_path, body, top), backend, 4, 0) == (5, 12)


def test_a_function_may_return_a_list_for_its_header_or_struct_result(tmp_path: Path, backend: str) -> None:
    top = "h_t make(bit<8> v) { return { v, 16w9 }; }"
    body = "hdr.h = make(hdr.h.a + 2);"
    assert run(program(tmp_path, body, top), backend, 1, 0) == (3, 9)


def test_an_annotated_block_runs_as_a_block(tmp_path: Path, backend: str) -> None:
    assert run(program(tmp_path, "@atomic { hdr.h.a = hdr.h.a + 1; }"), backend, 1, 0) == (2, 0)


def test_free_form_annotations_are_kept_as_written(tmp_path: Path) -> None:
    top = "@doc(some text: not (an) expression, 42)"
    local = "@my_hint(not an expression; [really]) table u { key = { hdr.h.b: exact; } actions = {} }"
    _, info = compile_program(program(tmp_path, "u.apply();", top, local))
    (table,) = [t for t in info.tables if t.preamble.name == "I.u"]
    assert list(table.preamble.annotations) == ["@my_hint(not an expression; [really])"]


def test_structured_annotations_are_listed_as_p4c_lists_them(tmp_path: Path) -> None:
    top = "const bit<8> N = 4;"
    local = (
        '@list[1, "two", true, N + 1] @pairs[label = "x", on = 1 == 1] @none[]'
        " table u { key = { hdr.h.b: exact; } actions = { NoAction; } }"
    )
    _, info = compile_program(program(tmp_path, "u.apply();", top, local))
    (table,) = [t for t in info.tables if t.preamble.name == "I.u"]
    listed, pairs, none = table.preamble.structured_annotations
    assert [e.WhichOneof("value") for e in listed.expression_list.expressions] == [
        "int64_value", "string_value", "bool_value", "int64_value"
    ]  # fmt: skip
    assert [listed.expression_list.expressions[i].int64_value for i in (0, 3)] == [1, 5]
    assert [(p.key, p.value.WhichOneof("value")) for p in pairs.kv_pair_list.kv_pairs] == [
        ("label", "string_value"), ("on", "bool_value")
    ]  # fmt: skip
    assert none.name == "none" and none.HasField("expression_list") and not table.preamble.annotations


REFUSED = [
    ("two structured annotations of one name", {"top": "@n[1] @n[2] const bit<8> C = 1;"},
     "@n: duplicate name for a structured annotation"),
    ("a structured annotation beside a plain one of its name", {"top": "@n(1) @n[2] const bit<8> C = 1;"},
     "@n: duplicate name for a structured annotation"),
    ("a value of another type", {"top": "@n[k = {1, 2}] typedef bit<8> T;"}, "@n:"),
    ("a value that is no constant", {"top": "@n[k = x] typedef bit<8> T;"}, "@n: x: undeclared name"),
    ("keys and values mixed", {"top": "@n[k = 1, 2] typedef bit<8> T;"},
     "@n: a structured annotation holds expressions or key = value pairs"),
    ("a repeated key", {"top": "@n[k = 1, k = 2] typedef bit<8> T;"}, "@n: duplicate key k"),
    ("a missing field", {"top": "struct p_t { bit<8> x; bit<8> y; }", "body": "p_t p = { x = 1 };"},
     "no value for y"),
    ("an unknown field", {"body": "hdr.h = { a = 1, b = 2, c = 3 };"}, "c: no field c in h_t"),
    ("a call on the left of +=", {"top": "bit<8> f() { return 0; }", "body": "hdr.h.a[f():0] += 1;"},
     "unsupported: a call on the left of +="),
    ("+= on a constant", {"body": "hdr.h.a + 1 += 1;"}, "not an l-value"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "parts", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_p4c_refuses_is_refused_where_it_is(
    tmp_path: Path, what: str, parts: dict[str, str], message: str
) -> None:
    with pytest.raises(CompileError) as caught:
        compile_program(program(tmp_path, parts.get("body", ""), parts.get("top", ""), ""))
    first = caught.value.diagnostics[0]
    assert first.pos is not None and first.pos.line > 0 and message in first.message, caught.value.render()


def test_pkginfo_and_platform_properties_on_the_package_reach_the_p4info(tmp_path: Path) -> None:
    path = program(tmp_path, "")
    annotated = '@pkginfo(name = "prog", version = "1.2") @platform_property(multicast_group_table_size = 8) '
    path.write_text(path.read_text().replace("V1Switch(", annotated + "V1Switch("))
    _, info = compile_program(path)
    assert (info.pkg_info.name, info.pkg_info.version, info.pkg_info.arch) == ("prog", "1.2", "v1model")
    assert info.pkg_info.platform_properties.multicast_group_table_size == 8
    path.write_text(path.read_text().replace("= 8", '= "eight"'))
    with pytest.raises(CompileError, match="@platform_property: expects key = value pairs of int values"):
        compile_program(path)
