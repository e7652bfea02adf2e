"""All-exact tables hit and miss alike whether their key fits one word (64 bits) or not, on both backends.

tests/executor/exact_keys.p4 applies four tables: two_words (bit<32> + bit<32>), one_wide (bit<64>),
three (bit<7> + bool + bit<32>), which the C backend matches as one packed word, and too_wide
(bit<48> + bit<48>), which it matches field by field. Each hit XORs its entry's byte into `out`.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from softswitch.runtime.pipeline import Pipeline

PROGRAM = Path(__file__).with_name("exact_keys.p4")
A, B, C, D, E, F = 0xFFFFFFFF, 0x00000001, 0xFFFFFFFFFFFF, 0x800000000001, 0xFFFFFFFFFFFFFFFF, 0x7F


def keys(a: int = A, b: int = B, c: int = C, d: int = D, e: int = E, f: int = F, g: int = 1) -> bytes:
    packed = (((((a << 32 | b) << 48 | c) << 48 | d) << 64 | e) << 7 | f) << 1 | g
    return packed.to_bytes(29, "big") + b"\x00"


def switch(backend: str) -> Pipeline:
    program, info = compile_program(PROGRAM)
    pipeline = new_pipeline(program, info, backend)
    put = next(a.preamble.id for a in info.actions if a.preamble.name.endswith("put"))
    tables = {t.name.rsplit(".", 1)[-1]: t for t in pipeline.state.tables.values()}
    for name, match, byte in (
        ("two_words", (A, B), 0x01),
        ("one_wide", (E,), 0x02),
        ("too_wide", (C, D), 0x04),
        ("three", (F, 1, A), 0x08),
    ):
        tables[name].insert(st.Entry(match, 0, st.ActionCall(put, (byte,))))
    return pipeline


def out_byte(pipeline: Pipeline, frame: bytes) -> int:
    ((port, sent),) = pipeline.process(0, frame)
    assert port == 1 and sent[:29] == frame[:29]
    return sent[29]


def test_every_table_hits_its_entry_whatever_the_width_of_its_key(backend: str) -> None:
    assert out_byte(switch(backend), keys()) == 0x0F


def test_a_key_that_differs_in_one_field_misses(backend: str) -> None:
    pipeline = switch(backend)
    assert out_byte(pipeline, keys(b=2)) == 0x0F ^ 0x01
    assert out_byte(pipeline, keys(a=B)) == 0x0F ^ 0x01 ^ 0x08  # a is in two_words and three
    assert out_byte(pipeline, keys(e=E - 1)) == 0x0F ^ 0x02
    assert out_byte(pipeline, keys(d=C)) == 0x0F ^ 0x04
    assert out_byte(pipeline, keys(g=0)) == 0x0F ^ 0x08
    assert out_byte(pipeline, keys(f=F >> 1)) == 0x0F ^ 0x08
