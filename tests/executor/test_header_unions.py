"""Header unions (P4_16 8.20) on each backend: packets in, packets out (tests/executor/unions.p4).

The frame is a tag byte, `op << 4 | how`, then what the parser extracts for `how`
(1: member a of hdr.u, one byte; 2: member b, two bytes; 3: a stack of two unions,
element 0 an a, element 1 an a or, with bit 2 set, a b); the ingress block does
operation `op` to the union. The deparser emits tag, union, stack and `spare`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from softswitch.runtime import state as st

PROGRAM = Path(__file__).with_name("unions.p4")


@pytest.fixture(scope="module")
def compiled() -> tuple:
    return compile_program(PROGRAM)


def run(compiled: tuple, backend: str, frame: bytes) -> bytes:
    out = new_pipeline(*compiled, backend).process(0, frame)
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1]


@pytest.mark.parametrize(
    ("frame", "out"),
    [
        pytest.param([0x01, 0x11], [0x01, 0x11], id="extract-a"),
        pytest.param([0x02, 0x22, 0x33], [0x02, 0x22, 0x33], id="extract-b"),
        pytest.param([0x00, 0x44], [0x00, 0x44], id="no-member"),
        pytest.param([0x11, 0x11], [0x11, 0xBE, 0xEF], id="setValid-invalidates-the-other"),
        pytest.param([0x21, 0x11], [0x21], id="setInvalid-on-the-other-member-invalidates-all"),
        pytest.param([0x31, 0x11], [0x39, 0x11], id="isValid-with-a-member"),
        pytest.param([0x32, 0x22, 0x33], [0x3A, 0x22, 0x33], id="isValid-with-b-member"),
        pytest.param([0x30], [0x30], id="isValid-without"),
        pytest.param([0x42, 0x22, 0x33], [0x42, 7, 7], id="assign-valid-header"),
        pytest.param([0x52, 0x22, 0x33], [0x52], id="assign-invalid-header"),
        pytest.param([0x61, 0x11], [0x61, 1, 2], id="local-union-copied"),
        pytest.param([0x72, 0x22, 0x33], [0x72, 5], id="inout-action-argument"),
        pytest.param([0x03, 1, 2], [0x03, 1, 2], id="stack-next-member"),
        pytest.param([0x07, 1, 2, 3], [0x07, 1, 2, 3], id="stack-next-other-member"),
        pytest.param([0x83, 1, 2], [0x83, 4, 5, 2], id="stack-element-setValid"),
        pytest.param([0x97, 1, 2, 3], [0x97, 9, 1], id="stack-push-front"),
        pytest.param([0xA1, 0x11], [0xA1, 0x0A, 0x0B], id="list-assigned-to-a-member"),
    ],
)
def test_union_semantics(compiled: tuple, backend: str, frame: list[int], out: list[int]) -> None:
    assert run(compiled, backend, bytes(frame)) == bytes(out)


def test_a_union_stack_past_its_end_is_stack_out_of_bounds_in_the_parser(
    tmp_path: Path, backend: str
) -> None:
    # three elements asked of a stack of two: the third extract stops the parser, the two stay
    text = PROGRAM.read_text().replace(
        "state second_a { pkt.extract(hdr.s.next.a); transition accept; }",
        "state second_a { pkt.extract(hdr.s.next.a); pkt.extract(hdr.s.next.b); transition accept; }",
    )
    path = tmp_path / "prog.p4"
    text = text.replace(
        "by_validity.apply();", "if (sm.parser_error == error.StackOutOfBounds) { hdr.tag.t = 0xEE; }"
    )
    path.write_text(text)
    out = new_pipeline(*compile_program(path), backend).process(0, bytes([0x03, 1, 2, 3, 4]))
    assert out[0][1] == bytes([0xEE, 1, 2, 3, 4])


def test_a_union_is_valid_key_has_p4c_name_and_matches(compiled: tuple, backend: str) -> None:
    program, info = compiled
    table = next(t for t in info.tables if t.preamble.name == "I.by_validity")
    assert [(m.name, m.bitwidth) for m in table.match_fields] == [
        ("hdr.u.$valid$", 1),
        ("hdr.s[1].b.$valid$", 1),
    ]
    pipeline = new_pipeline(program, info, backend)
    mark = next(a.preamble.id for a in info.actions if a.preamble.name == "I.mark")
    pipeline.state.tables[table.preamble.id].insert(st.Entry((0, 1), 0, st.ActionCall(mark, (0xEE,))))
    assert pipeline.process(0, bytes([0x07, 1, 2, 3]))[0][1] == bytes([0xEE, 1, 2, 3])  # hit
    assert pipeline.process(0, bytes([0x03, 1, 2]))[0][1] == bytes([0x03, 1, 2])  # s[1] is an a: miss


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "header_union u_t { a_t a; b_t b; }",
            "header_union u_t { a_t a; b_t b; bit<8> x; }",
            "u_t.x: the members of a header union must be headers",
        ),
        ("hdr.u = local;", "local = { hdr.u.a, hdr.u.b };", "cannot be initialized with a list"),
        ("hdr.u.b.setInvalid();", "hdr.u.setInvalid();", "has no method setInvalid"),
        (
            "hdr.s[0].b.setValid();",
            "hdr.s[meta.op].b.setValid();",
            "unsupported: an index into a header union stack .* that is not a constant",
        ),
        ("pkt.extract(hdr.u.a);", "pkt.extract(hdr.u);", "extract needs a header, not u_t"),
        (
            "action mark(bit<8> v) { hdr.tag.t = v; }",
            "action mark(bit<8> v) { hdr.tag.t = v; } action take(out a_t x) { x.setValid(); x.a = 1; }",
            None,
        ),
    ],
)
def test_invalid_union_programs_are_refused(tmp_path: Path, old: str, new: str, message: str | None) -> None:
    text = PROGRAM.read_text()
    assert old in text
    text = text.replace(old, new)
    if message is None:  # the out argument: its copy-out would have to invalidate the other member
        text = text.replace("fill(hdr.u, 5);", "take(hdr.u.a);")
        message = "unsupported: a header union member as an out argument"
    path = tmp_path / "prog.p4"
    path.write_text(text)
    with pytest.raises(CompileError, match=message):
        compile_program(path)
