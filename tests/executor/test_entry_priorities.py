"""Which of a program's entries wins a lookup: as p4c and bmv2's simple_switch decide, on both backends.

Each table below matches `hdr.h.b` (bit<16>) ternary and its entries write their
argument into `hdr.h.a`, the frame's first byte. In bmv2's JSON p4c gives each
entry its position (1, 2, ...) as priority, or the value of its `@priority(N)`
annotation, and the smallest wins; P4_16 `entries` with `priority =` are put in
order first (the largest first, unless `largest_priority_wins = false`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program

SKELETON = (Path(__file__).resolve().parents[1] / "frontend/skeleton.p4.in").read_text()


def table(tmp_path: Path, entries: str, properties: str = "") -> Path:
    local = (
        "action set(bit<8> x) { hdr.h.a = x; }\n"
        "    table tt { key = { hdr.h.b: ternary; } actions = { set; NoAction; } "
        f"default_action = NoAction(); {properties} {entries} }}\n"
    )
    path = tmp_path / "prog.p4"
    path.write_text(
        SKELETON.replace("BODY", "tt.apply(); sm.egress_spec = 1;").replace(
            "    action a(", local + "    action a(", 1
        )
    )
    return path


def winner(path: Path, backend: str, b: int) -> int:
    ((port, frame),) = new_pipeline(*compile_program(path), backend).process(
        0, bytes([0]) + b.to_bytes(2, "big")
    )
    return frame[0]


def test_the_first_matching_const_entry_wins(tmp_path: Path, backend: str) -> None:
    path = table(
        tmp_path,
        "const entries = { 0x1100 &&& 0xFF00 : set(1); 0x1181 : set(2); 0x0081 &&& 0x00FF : set(3); }",
    )
    assert winner(path, backend, 0x1181) == 1  # matches all three
    assert winner(path, backend, 0x2281) == 3
    assert winner(path, backend, 0x3333) == 0  # none: the default, NoAction


def test_the_smallest_priority_annotation_wins_as_in_bmv2(tmp_path: Path, backend: str) -> None:
    # bmv2 priorities: 3 (annotated), 2 (its position), 1 (annotated)
    path = table(
        tmp_path,
        "const entries = { 0x1100 &&& 0xFF00 : set(1) @priority(3); 0x1182 : set(2);"
        " 0x0081 &&& 0x00FF : set(3) @priority(1); }",
    )
    assert winner(path, backend, 0x1181) == 3
    assert winner(path, backend, 0x1182) == 2
    assert winner(path, backend, 0x1100) == 1


def test_an_annotation_equal_to_an_earlier_position_loses_to_that_entry(tmp_path: Path, backend: str) -> None:
    path = table(tmp_path, "const entries = { 0x0001 &&& 0xF : set(1); 0x0001 : set(2) @priority(1); }")
    assert winner(path, backend, 0x0001) == 1  # both bmv2 priority 1: the first in the list wins


def test_entries_with_priorities_largest_wins_and_unstated_ones_count_down(
    tmp_path: Path, backend: str
) -> None:
    # priorities 10, 9 (10 - 1), 20: the last entry wins wherever it matches
    path = table(
        tmp_path,
        "entries = { priority = 10: 0x0001 &&& 0xF : set(1); 0x0001 &&& 0xFF : set(2);"
        " priority = 20: 0x0001 &&& 0xFFF : set(3); }",
    )
    assert winner(path, backend, 0x0001) == 3
    assert winner(path, backend, 0x1101) == 1  # 10 beats 9
    assert winner(path, backend, 0x1011) == 1


def test_smallest_priority_wins_when_the_table_says_so_with_its_delta(tmp_path: Path, backend: str) -> None:
    # priorities 30, 40 (30 + delta 10), 35: the first wins, then the last, then the second
    path = table(
        tmp_path,
        "entries = { priority = 30: 0x0001 &&& 0xF : set(1); 0x0002 &&& 0xF : set(2);"
        " priority = 35: 0x0002 &&& 0xFF : set(3); }",
        "largest_priority_wins = false; priority_delta = 10;",
    )
    assert winner(path, backend, 0x0001) == 1
    assert winner(path, backend, 0x0002) == 3
    assert winner(path, backend, 0x0F12) == 2


REFUSED = [
    ("const entries take no priority", "const entries = { priority = 3: 0x0001 : set(1); }", "",
     "a table with const entries cannot have priorities"),
    ("the first entry needs a priority when another has one",
     "entries = { 0x0001 : set(1); priority = 3: 0x0002 : set(2); }", "", "entry must have a priority"),
    ("a duplicate entry", "const entries = { 0x0001 &&& 0xFF : set(1); 0x0001 &&& 0xFF : set(2); }", "",
     "duplicate entry keys"),
    ("more entries than the table's size", "const entries = { 0x0001 : set(1); 0x0002 : set(2); }",
     "size = 1;", "2 entries do not fit its size 1"),
    ("a non-constant priority annotation", "const entries = { 0x0001 : set(1) @priority(x); }", "",
     "invalid priority value"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "entries", "properties", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_entries_p4c_refuses_are_errors_where_they_are(
    tmp_path: Path, what: str, entries: str, properties: str, message: str
) -> None:
    path = table(tmp_path, entries, properties)
    with pytest.raises(CompileError) as caught:
        compile_program(path)
    first = caught.value.diagnostics[0]
    assert first.pos is not None and first.pos.line == 12 and message in first.message, caught.value.render()


def test_priorities_on_a_table_of_exact_keys_are_an_error(tmp_path: Path) -> None:
    path = table(tmp_path, "entries = { priority = 3: 0x0001 : set(1); }")
    path.write_text(path.read_text().replace("hdr.h.b: ternary", "hdr.h.b: exact"))
    with pytest.raises(CompileError, match="need no priorities, but some are specified"):
        compile_program(path)
