"""varbit fields on each backend: packets in, packets out (tests/executor/varbit.p4).

The frame is `op`, `bits` (the size of the varbit field, in bits), then header
opt_t { ver; options (bits / 8 bytes); tail } (two of them, of bits and bits + 8,
for op 8; followed by sum_t for op 9). Ingress writes the parser's error into
`op` (E1: ParserInvalidArgument, E2: PacketTooShort, E3: HeaderTooShort).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.common import UnsupportedError
from softswitch.backends.loader import new_pipeline
from softswitch.backends.python.codegen import _crc16 as crc16  # the algorithm is tested elsewhere
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program
from tests.conftest import NO_COMPILER

PROGRAM = Path(__file__).with_name("varbit.p4")


@pytest.fixture(scope="module")
def compiled() -> tuple:
    return compile_program(PROGRAM)


def run(compiled: tuple, backend: str, frame: list[int]) -> list[int]:
    out = new_pipeline(*compiled, backend).process(0, bytes(frame))
    assert len(out) == 1 and out[0][0] == 1
    return list(out[0][1])


def csum16(data: bytes) -> int:
    """The Internet checksum, written out here to check the switch's."""
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@pytest.mark.parametrize(
    ("frame", "out"),
    [
        pytest.param([0, 16, 1, 0xA, 0xB, 9, 0x77], [0, 16, 1, 0xA, 0xB, 9, 0x77], id="extract-and-emit"),
        pytest.param([0, 0, 1, 9], [0, 0, 1, 9], id="zero-bits"),
        pytest.param([0, 64, 1, *range(8), 9], [0, 64, 1, *range(8), 9], id="the-maximum"),
        pytest.param([0, 12, 1, 2, 3, 4], [0xE1, 12, 1, 2, 3, 4], id="not-whole-bytes"),
        pytest.param([0, 12, 1], [0xE1, 12, 1], id="not-whole-bytes-comes-first"),
        pytest.param([0, 16, 1, 2, 3], [0xE2, 16, 1, 2, 3], id="packet-too-short"),
        pytest.param([0, 72, 1, 2], [0xE2, 72, 1, 2], id="packet-too-short-comes-before-too-long"),
        pytest.param([0, 72, *range(11)], [0xE3, 72, *range(11)], id="header-too-short"),
        pytest.param([1, 16, 1, 0xA, 0xB, 9], [1, 16, 1, 0xA, 0xB, 9, 1, 0xA, 0xB, 9], id="header-copy"),
        pytest.param([2, 24, 1, 4, 5, 6, 9], [2, 24, 1, 4, 5, 6, 9, 7, 4, 5, 6, 0xAA], id="field-copy-equal"),
        pytest.param([3, 8, 1, 5, 9], [0x33, 8, 1, 5, 9], id="different-lengths-differ"),
        pytest.param([3, 0, 1, 9], [3, 0, 1, 9], id="empty-equals-empty"),
        pytest.param(
            [8, 8, 1, 2, 3, 4, 5, 6, 7], [8, 8, 1, 5, 6, 3, 4, 5, 6, 7], id="stack-of-varbit-headers"
        ),
        pytest.param([5, 16, 1, 0xA, 0xB, 9], [5, 16, 1, 9, 2, 0xA, 0xB, 3], id="local-swap"),
    ],
)
def test_varbit_semantics(compiled: tuple, backend: str, frame: list[int], out: list[int]) -> None:
    assert run(compiled, backend, frame) == out


@pytest.mark.parametrize("options", [b"", b"\x01", b"\x01\x02\x03", bytes(range(1, 9))])
def test_checksums_and_hashes_read_the_bits_a_varbit_field_holds(
    compiled: tuple, backend: str, options: bytes
) -> None:
    data = bytes([0x45]) + options + bytes([0x9C])
    out = run(compiled, backend, [4, 8 * len(options), *data])
    expected = csum16(data).to_bytes(2, "big") + crc16(options + data[-1:]).to_bytes(2, "big")
    assert out == [4, 8 * len(options), *data, *expected]
    good = [9, 8 * len(options), *data, *expected]
    assert run(compiled, backend, good) == good  # verify_checksum agrees with update_checksum
    bad = [9, 8 * len(options), *data, expected[0] ^ 1, *expected[1:]]
    assert run(compiled, backend, bad) == [0xCE, *bad[1:]]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("varbit<64> options;", "varbit<64> options; varbit<8> more;", "multiple varbit fields in a header"),
        ("varbit<64> options;", "varbit<0> options;", r"varbit<0>: invalid type size"),
        ("bit<8> ver; varbit<64>", "bit<4> ver; bit<4> x; bit<1> y; varbit<64>", "does not start on a byte"),
        (
            "pkt.extract(hdr.opt, (bit<32>) hdr.eth.bits); transition accept; }",
            "pkt.extract(hdr.opt); transition accept; }",
            "has a varbit field: extract it with its size",
        ),
        ("pkt.extract(hdr.eth);", "pkt.extract(hdr.eth, 8);", "needs a header with a varbit field"),
        ("select(hdr.eth.op)", "select(hdr.opt.options)", "varbit"),
        ("hdr.copy = hdr.opt;", "hdr.copy.options = hdr.opt.options + hdr.opt.options;", "not defined on"),
        ("hdr.copy = hdr.opt;", "hdr.eth.bits = (bit<8>) hdr.opt.options;", "cannot cast varbit<64>"),
        ("struct meta_t { bit<8> unused; }", "struct meta_t { varbit<8> v; }", "meta_t.v outside a header"),
        ("hdr.copy = hdr.opt;", "hdr.copy = { 1, hdr.opt.options, 3 };", "a list assigned to opt_t"),
        (
            "pkt.extract(hdr.eth);",
            "pkt.extract(hdr.eth); opt_t peek = pkt.lookahead<opt_t>();",
            "unsupported: lookahead of opt_t",
        ),
    ],
)
def test_invalid_varbit_programs_are_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = PROGRAM.read_text()
    assert old in text
    path = tmp_path / "prog.p4"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(CompileError, match=message):
        compile_program(path)


@pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc): the C backend cannot run")
def test_the_c_backend_refuses_an_identity_hash_of_varbit_data_by_name(tmp_path: Path) -> None:
    text = PROGRAM.read_text().replace(
        "hash(hdr.sum.crc, HashAlgorithm.crc16,", "hash(hdr.sum.crc, HashAlgorithm.identity,"
    )
    path = tmp_path / "prog.p4"
    path.write_text(text)
    program, info = compile_program(path)
    assert new_pipeline(program, info, "python").process(0, bytes([4, 8, 1, 2, 3]))  # Python runs it
    with pytest.raises(UnsupportedError, match="identity hash of varbit data at .*prog.p4:"):
        new_pipeline(program, info, "c")
