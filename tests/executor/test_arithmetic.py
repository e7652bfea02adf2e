"""P4_16 arithmetic in the compiled executor: each expression against the value the spec gives.

All cases go into one program: the input header carries a=200, b=100
(bit<8>), c=-100, d=50 (int<8>) and w=0x1234 (bit<16>); ingress writes each
expression into its own output field, and the test reads the frame back.
Results are compared as bit patterns of the output field's type.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from tests.executor.differential import EXPRESSIONS

INPUT = bytes([200, 100, 0x9C, 50, 0x12, 0x34])

# (P4 expression, output type, expected bit pattern)
CASES = [
    ("a + b", "bit<8>", 44),  # 300 wraps
    ("b - a", "bit<8>", 156),  # -100 wraps
    ("a * 2", "bit<8>", 144),
    ("a |+| b", "bit<8>", 255),  # saturates
    ("b |-| a", "bit<8>", 0),
    ("a & b", "bit<8>", 200 & 100),
    ("a | b", "bit<8>", 200 | 100),
    ("a ^ b", "bit<8>", 200 ^ 100),
    ("~a", "bit<8>", 55),
    ("-a", "bit<8>", 56),
    ("a >> 3", "bit<8>", 25),
    ("a << 3", "bit<8>", 64),
    ("a << 9", "bit<8>", 0),  # shift by more than the width
    ("c + d", "int<8>", 0xCE),  # -50
    ("c |-| d", "int<8>", 0x80),  # -150 saturates to -128
    ("c |+| c", "int<8>", 0x80),
    ("d |+| d", "int<8>", 100),
    ("(int<8>) 127 |+| 1", "int<8>", 127),
    ("-c", "int<8>", 100),
    ("c >> 2", "int<8>", 0xE7),  # arithmetic shift: -25
    ("c < d ? 8w1 : 8w0", "bit<8>", 1),  # signed comparison
    ("(bit<8>) c < (bit<8>) d ? 8w1 : 8w0", "bit<8>", 0),  # 156 < 50 unsigned
    ("w[11:4]", "bit<8>", 0x23),
    ("a ++ b", "bit<16>", 0xC864),
    ("(bit<16>) a", "bit<16>", 200),  # zero extension
    ("(int<16>) c", "int<16>", 0xFF9C),  # sign extension
    ("(bit<8>) w", "bit<8>", 0x34),  # truncation
    ("(bit<8>) c", "bit<8>", 0x9C),  # same width: the bit pattern
    ("w / 16", "bit<16>", 0x123),
    ("w % 16", "bit<16>", 4),
    ("a == 200 && b != 100 ? 8w1 : 8w0", "bit<8>", 0),
    ("(bit<8>) (bit<1>) (a > b)", "bit<8>", 1),  # bool -> bit<1> -> bit<8>
]

INPUTS = "bit<8> a; bit<8> b; int<8> c; int<8> d; bit<16> w;"
LOCALS = (
    "bit<8> a = hdr.i.a; bit<8> b = hdr.i.b; int<8> c = hdr.i.c; int<8> d = hdr.i.d; bit<16> w = hdr.i.w;"
)


def _width(type_name: str) -> int:
    return int(type_name.split("<")[1].rstrip(">"))


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory):
    fields = " ".join(f"{t} r{i};" for i, (_, t, _) in enumerate(CASES))
    assignments = "\n".join(f"        hdr.o.r{i} = {expr};" for i, (expr, _, _) in enumerate(CASES))
    path: Path = tmp_path_factory.mktemp("arith") / "arith.p4"
    path.write_text(EXPRESSIONS.format(inputs=INPUTS, outputs=fields, locals=LOCALS, assignments=assignments))
    return compile_file(path)


@pytest.fixture
def outputs(program, backend: str) -> list[int]:
    [(port, frame)] = new_pipeline(program, build_p4info(program), backend).process(0, INPUT)
    assert port == 1 and frame[: len(INPUT)] == INPUT
    values, offset = [], len(INPUT)
    for _, type_name, _ in CASES:
        size = _width(type_name) // 8
        values.append(int.from_bytes(frame[offset : offset + size], "big"))
        offset += size
    return values


@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_expression(outputs: list[int], index: int, case: tuple[str, str, int]) -> None:
    expr, type_name, expected = case
    assert outputs[index] == expected, f"{expr} as {type_name}: got {outputs[index]:#x}, want {expected:#x}"
