"""Types given where p4c would infer them, and a tuple typedef that is declared but never used.

`V1Switch<H, M>(...)`, `pkt.extract<T>(h)` and `pkt.emit<T>(h)` are accepted when the
types given are the ones p4c infers, and refused (as p4c refuses them) when not; a
`typedef tuple<...>` is checked where it is declared and refused only where it is used.
Each case edits the skeleton program (tests/frontend/skeleton.p4.in).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program

SKELETON = (Path(__file__).parent / "skeleton.p4.in").read_text().replace("BODY", "sm.egress_spec = 1;")


def compile_edited(tmp_path: Path, *edits: tuple[str, str]) -> tuple:
    text = SKELETON
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "prog.p4"
    path.write_text(text)
    return compile_program(path)


GIVEN = [
    ("V1Switch(P()", "V1Switch<headers_t, meta_t>(P()"),
    ("pkt.extract(hdr.h);", "pkt.extract<h_t>(hdr.h);"),
    ("pkt.emit(hdr.h);", "pkt.emit<h_t>(hdr.h);"),
]


@pytest.mark.parametrize(("old", "new"), GIVEN, ids=["package", "extract", "emit"])
def test_types_given_as_p4c_infers_them_compile_to_the_same_program(
    tmp_path: Path, backend: str, old: str, new: str
) -> None:
    program, info = compile_edited(tmp_path, (old, new))
    assert info == compile_edited(tmp_path)[1]
    assert new_pipeline(program, info, backend).process(0, bytes([1, 2, 3, 4])) == [(1, bytes([1, 2, 3, 4]))]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("V1Switch(P()", "V1Switch<meta_t, headers_t>(P()", "the blocks take V1Switch<headers_t, meta_t>"),
        ("V1Switch(P()", "V1Switch<headers_t>(P()", "the blocks take V1Switch<headers_t, meta_t>"),
        ("pkt.extract(hdr.h);", "pkt.extract<meta_t>(hdr.h);", "extract<meta_t>: the argument has type h_t"),
        ("pkt.emit(hdr.h);", "pkt.emit<headers_t>(hdr.h);", "emit<headers_t>: the argument has type h_t"),
        ("struct meta_t", "typedef tuple<bit<8>, nothing_t> pair_t; struct meta_t", "nothing_t: undeclared"),
    ],
)
def test_wrong_types_are_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile_edited(tmp_path, (old, new))


def test_a_tuple_typedef_is_refused_only_where_it_is_used(tmp_path: Path) -> None:
    declared = ("struct meta_t", "typedef tuple<bit<8>, varbit<16>> pair_t; struct meta_t")
    compile_edited(tmp_path, declared)
    with pytest.raises(CompileError) as caught:
        compile_edited(tmp_path, declared, ("sm.egress_spec = 1;", "pair_t p;"))
    first = caught.value.diagnostics[0]
    assert first.message == "unsupported: tuple types"
    assert first.pos is not None and first.pos.line == 14  # the line that uses it
