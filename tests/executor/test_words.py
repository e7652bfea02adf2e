"""Runs of bit<32>/int<32> fields are parsed and deparsed exactly, on both backends.

tests/executor/words.p4 has runs of five, four (int<32>), four starting inside a byte and three;
the C backend byte-swaps the first two as blocks of four words. Ingress changes a word of each run.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program

PROGRAM = Path(__file__).with_name("words.p4")
LAYOUT = (
    [("x", 4), ("y", 4)]
    + [(f"a{i}", 32) for i in range(5)]
    + [("z", 16)]
    + [(f"b{i}", 32) for i in range(4)]
    + [("p", 3)]
    + [(f"c{i}", 32) for i in range(4)]
    + [("q", 5)]
    + [(f"d{i}", 32) for i in range(3)]
)
M32 = 0xFFFFFFFF


def pack(fields: dict[str, int]) -> bytes:
    value, bits = 0, 0
    for name, width in LAYOUT:
        value = value << width | (fields[name] & ((1 << width) - 1))
        bits += width
    return value.to_bytes(bits // 8, "big")


def test_runs_of_words_come_out_as_ingress_left_them(backend: str) -> None:
    program, info = compile_program(PROGRAM)
    pipeline = new_pipeline(program, info, backend)
    fields = {name: (0x9E3779B9 * (i + 1)) & ((1 << w) - 1) for i, (name, w) in enumerate(LAYOUT)}
    fields["b3"] = 0x80000001  # a negative int<32>
    frame = pack(fields) + b"payload"
    expected = dict(fields)
    expected["a4"] = (fields["a0"] + fields["a4"]) & M32
    expected["b2"] = (fields["b2"] - fields["b3"]) & M32
    expected["c1"] = fields["c1"] ^ fields["a1"]
    expected["d2"] = fields["d0"] | fields["c3"]
    expected["y"] = fields["x"]
    assert pipeline.process(0, frame) == [(1, pack(expected) + b"payload")]
