"""Whole headers and structs as values: passed on from action to action, copied from and to `stack.last`.

Program in, packets out, on each backend. The programs put the result in
header `h` ({a: bit<8>, b: bit<16>}) and emit it first.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<16> b; }}
struct headers_t {{ h_t h; h_t[3] st; h_t tmp; }}
struct meta_t {{ }}
{top}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    state start {{ {parser} transition accept; }}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    apply {{ {ingress} sm.egress_spec = 1; }}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def run(
    tmp_path: Path, backend: str, frame: bytes, top: str = "", parser: str = "", ingress: str = ""
) -> bytes:
    path = tmp_path / "prog.p4"
    path.write_text(PROGRAM.format(top=top, parser=parser, ingress=ingress))
    ((port, out),) = new_pipeline(*compile_program(path), backend).process(0, frame)
    return out


NESTED = """
action inner(inout headers_t v) { v.h.a = 2; v.h.b = 4; }
action outer(inout headers_t v1) { inner(v1); v1.h.a = v1.h.a + 3; }
action halves(in h_t x, out bit<8> lo, out bit<16> hi) { lo = x.a; hi = x.b; }
action swap(inout headers_t v) { halves(v.h, v.h.a, v.h.b); v.h.a = v.h.a + 1; }
"""


def test_an_action_passes_its_composite_parameter_on_to_another(tmp_path: Path, backend: str) -> None:
    frame = bytes([9, 0, 0])
    assert run(tmp_path, backend, frame, NESTED, "pkt.extract(hdr.h);", "outer(hdr);") == bytes([5, 0, 4])
    assert run(tmp_path, backend, bytes([9, 1, 2]), NESTED, "pkt.extract(hdr.h);", "swap(hdr);") == bytes(
        [10, 1, 2]
    )


def test_a_header_is_copied_from_and_to_the_last_element_of_a_stack(tmp_path: Path, backend: str) -> None:
    parser = (
        "pkt.extract(hdr.st.next); hdr.tmp = hdr.st.last; pkt.extract(hdr.st.next);"
        " hdr.st.last = hdr.tmp; hdr.h = hdr.st.last;"
    )
    assert run(tmp_path, backend, bytes([1, 2, 3, 4, 5, 6]), parser=parser) == bytes([1, 2, 3])


def test_a_header_without_fields_is_extracted_valid_and_takes_no_bytes(tmp_path: Path, backend: str) -> None:
    top = "header empty_t { }\nstruct more_t { empty_t e; }"
    parser = "more_t m; pkt.extract(m.e); pkt.extract(hdr.h); hdr.h.a = (bit<8>) (bit<1>) m.e.isValid();"
    assert run(tmp_path, backend, bytes([7, 8, 9]), top=top, parser=parser) == bytes([1, 8, 9])
