"""Header stack indices known only at run time: reads, writes, methods, parser selects, out of range.

Program in, packets out, on each backend. The frame is an index byte `i`
then a stack of four one-byte headers `s[0..3]`, all parsed; the ingress
block is each test's BODY, the parser's extra state each test's PARSER.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from softswitch.runtime import state as st

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header idx_t { bit<8> i; }
header e_t { bit<8> v; }
struct headers_t { idx_t idx; e_t[4] s; }
struct meta_t { bit<8> m; int<8> si; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.idx); PARSER }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action put(bit<8> at, bit<8> v) { hdr.s[at].v = v; }
    table t { key = { hdr.idx.i: exact; } actions = { put; NoAction; } default_action = NoAction(); }
    apply {
        BODY
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.idx); pkt.emit(hdr.s); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
ALL_FOUR = "pkt.extract(hdr.s.next); " * 4 + "transition accept;"


def program(tmp_path: Path, body: str, parser: str = ALL_FOUR) -> Path:
    path = tmp_path / "prog.p4"
    path.write_text(PROGRAM.replace("BODY", body).replace("PARSER", parser))
    return path


def run(path: Path, backend: str, frame: bytes) -> bytes | None:
    """The frame out, or None when the packet was dropped."""
    out = new_pipeline(*compile_program(path), backend).process(0, frame)
    return out[0][1] if out else None


def test_an_index_read_from_the_packet_selects_the_element_read_and_written(
    tmp_path: Path, backend: str
) -> None:
    path = program(tmp_path, "hdr.s[hdr.idx.i].v = hdr.s[hdr.idx.i].v + hdr.s[hdr.idx.i + 1].v;")
    assert run(path, backend, bytes([0, 10, 20, 30, 40])) == bytes([0, 30, 20, 30, 40])
    assert run(path, backend, bytes([2, 10, 20, 30, 40])) == bytes([2, 10, 20, 70, 40])


def test_an_index_inside_an_index_is_read_first(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "hdr.s[hdr.s[hdr.idx.i].v].v = 99;")
    assert run(path, backend, bytes([1, 0, 3, 0, 0])) == bytes([1, 0, 3, 0, 99])


def test_conditions_methods_and_local_indices(tmp_path: Path, backend: str) -> None:
    body = """
        bit<2> j = (bit<2>) hdr.idx.i;
        if (hdr.s[j].isValid() && hdr.s[j].v == 5) { hdr.s[j].setInvalid(); }
        bit<8> copy = hdr.s[j + 1].v;
        hdr.idx.i = copy;
    """
    path = program(tmp_path, body)
    assert run(path, backend, bytes([1, 1, 5, 7, 8])) == bytes([7, 1, 7, 8])  # s[1] left the frame
    assert run(path, backend, bytes([3, 1, 2, 3, 8])) == bytes([1, 1, 2, 3, 8])  # j + 1 wraps to 0


def test_an_action_parameter_from_a_table_entry_indexes_the_stack(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "t.apply();")
    program_, info = compile_program(path)
    pipeline = new_pipeline(program_, info, backend)
    put = next(a.preamble.id for a in info.actions if a.preamble.name == "I.put")
    next(iter(pipeline.state.tables.values())).insert(st.Entry((7,), 0, st.ActionCall(put, (2, 55))))
    assert pipeline.process(0, bytes([7, 1, 2, 3, 4]))[0][1] == bytes([7, 1, 2, 55, 4])


def test_out_of_range_reads_give_an_invalid_header_and_writes_change_nothing(
    tmp_path: Path, backend: str
) -> None:
    body = """
        hdr.s[hdr.idx.i].v = 1;
        if (!hdr.s[hdr.idx.i].isValid()) { hdr.s[0].v = hdr.s[hdr.idx.i].v + 100; }
    """
    path = program(tmp_path, body)
    assert run(path, backend, bytes([9, 10, 20, 30, 40])) == bytes([9, 100, 20, 30, 40])
    assert run(path, backend, bytes([3, 10, 20, 30, 40])) == bytes([3, 10, 20, 30, 1])


def test_a_negative_signed_index_is_out_of_range(tmp_path: Path, backend: str) -> None:
    path = program(tmp_path, "meta.si = (int<8>) hdr.idx.i; hdr.s[meta.si].v = 1;")
    assert run(path, backend, bytes([0xFF, 10, 20, 30, 40])) == bytes([0xFF, 10, 20, 30, 40])
    assert run(path, backend, bytes([1, 10, 20, 30, 40])) == bytes([1, 10, 1, 30, 40])


def test_a_parser_extracts_and_selects_on_an_indexed_element(tmp_path: Path, backend: str) -> None:
    parser = """
        meta.m = 0; transition more; }
    state more {
        pkt.extract(hdr.s[meta.m]);
        meta.m = meta.m + 1;
        transition select(hdr.s[meta.m - 1].v, meta.m) { (0, _): accept; (_, 4): accept; default: more; }
    """
    path = program(tmp_path, "hdr.idx.i = meta.m;", parser)
    assert run(path, backend, bytes([9, 1, 0, 7, 7])) == bytes([2, 1, 0, 7, 7])
    assert run(path, backend, bytes([9, 1, 2, 3, 4, 5])) == bytes([4, 1, 2, 3, 4, 5])


def test_a_parser_index_out_of_range_is_stack_out_of_bounds(tmp_path: Path, backend: str) -> None:
    parser = "pkt.extract(hdr.s[hdr.idx.i]); transition accept;"
    path = program(tmp_path, "if (sm.parser_error == error.StackOutOfBounds) { hdr.idx.i = 0xEE; }", parser)
    assert run(path, backend, bytes([3, 7])) == bytes([3, 7])
    assert run(path, backend, bytes([4, 7])) == bytes([0xEE, 7])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("hdr.s[true].v = 1;", "a header stack index must be bit<W>, int<W> or an integer, not bool"),
        ("hdr.s[9].v = 1;", "index 9 out of range"),
    ],
)
def test_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compile_program(program(tmp_path, body))


def test_a_table_key_must_index_with_a_constant(tmp_path: Path) -> None:
    text = PROGRAM.replace("key = { hdr.idx.i: exact; }", "key = { hdr.s[hdr.idx.i].v: exact; }")
    path = tmp_path / "prog.p4"
    path.write_text(text.replace("BODY", "").replace("PARSER", ALL_FOUR))
    with pytest.raises(
        CompileError, match="unsupported: a header stack index that is not a constant outside"
    ):
        compile_program(path)
