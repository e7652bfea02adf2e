"""Constants, shifts and slices at every bit position of wide fields: the bits land where P4 says.

A constant stored into a slice at bit 32 or above once came out 0 in the C
backend (it was shifted as a 32-bit C `int`). For fields of 33 to 64 bits,
every position is written by a constant (`f[p:p] = 1`, a 3-bit constant
at p), read back (`x[p:p]`), and shifted by a constant (0 to beyond the
width) and by a run-time amount, in a header field and in a local. Each
output is checked against the value P4 defines, on the Python backend,
and the C backend must give the same bytes (differential). Fields wider
than 64 bits run on the Python backend only (the C backend refuses them
by name, see test_c_backend); they are checked against the definition too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from tests.conftest import NO_COMPILER
from tests.executor.differential import EXPRESSIONS, Twin

Rule = Callable[[int, int], int]  # (x, s) -> the output's value


@dataclass
class Output:
    """One output field: its width, the statements that compute it, and its value by definition."""

    width: int
    statements: str
    value: Rule


def outputs(width: int) -> list[Output]:
    """Everything checked for a field of `width` bits; the input is `x` (that width) and `s` (bit<8>)."""
    full = (1 << width) - 1
    t = f"bit<{width}>"
    out: list[Output] = []
    for p in range(width):
        lo = min(p, width - 3)  # the 3-bit slice [lo+2:lo] closest to p
        out += [
            Output(width, f"hdr.o.{{f}} = 0; hdr.o.{{f}}[{p}:{p}] = 1;", lambda x, s, p=p: 1 << p),
            Output(
                width,
                f"hdr.o.{{f}} = hdr.i.x; hdr.o.{{f}}[{lo + 2}:{lo}] = 5;",
                lambda x, s, lo=lo: x & ~(7 << lo) | 5 << lo,
            ),
            Output(width, f"v = {width}w0; v[{p}:{p}] = 1; hdr.o.{{f}} = v;", lambda x, s, p=p: 1 << p),
            Output(1, f"hdr.o.{{f}} = hdr.i.x[{p}:{p}];", lambda x, s, p=p: x >> p & 1),
        ]
    for p in range(width + 4):  # and beyond the width: all bits shifted out
        out += [
            Output(width, f"hdr.o.{{f}} = hdr.i.x << {p};", lambda x, s, p=p: x << p & full),
            Output(width, f"hdr.o.{{f}} = hdr.i.x >> {p};", lambda x, s, p=p: x >> p),
            Output(width, f"hdr.o.{{f}} = ({t}) 1 << {p};", lambda x, s, p=p: 1 << p & full),
        ]
    out += [
        Output(width, "hdr.o.{f} = hdr.i.x << hdr.i.s;", lambda x, s: x << s & full),
        Output(width, "hdr.o.{f} = hdr.i.x >> hdr.i.s;", lambda x, s: x >> s),
        Output(width, f"hdr.o.{{f}} = ({t}) 1 << hdr.i.s;", lambda x, s: 1 << s & full),
    ]
    return out


def program(tmp_path: Path, width: int) -> tuple[Path, list[Output]]:
    outs = outputs(width)
    fields = [f"bit<{o.width}> o{i};" for i, o in enumerate(outs)]
    pad = -sum(o.width for o in outs) % 8
    path = tmp_path / f"positions{width}.p4"
    path.write_text(
        EXPRESSIONS.format(
            inputs=f"bit<{width}> x; bit<8> s; bit<{-width % 8 or 8}> pad;",
            outputs=" ".join(fields) + (f" bit<{pad}> pad;" if pad else ""),
            locals=f"bit<{width}> v;",
            assignments="\n".join("        " + o.statements.format(f=f"o{i}") for i, o in enumerate(outs)),
        )
    )
    return path, outs


def frame(width: int, x: int, s: int) -> bytes:
    bits = (x << 8 | s) << (-width % 8 or 8)
    return bits.to_bytes((width + 8 + (-width % 8 or 8)) // 8, "big")


def expected(width: int, outs: list[Output], x: int, s: int) -> bytes:
    """The input header as it came, then every output's value by definition, packed big-endian."""
    value, total = 0, 0
    for o in outs:
        value = value << o.width | o.value(x, s)
        total += o.width
    value <<= -total % 8
    return frame(width, x, s) + value.to_bytes((total + 7) // 8, "big")


def inputs(width: int, rng: random.Random) -> list[tuple[int, int]]:
    full = (1 << width) - 1
    pairs = [(0, 0), (full, 0), (full, width), (1, width - 1), (1 << (width - 1), 255)]
    return pairs + [(rng.getrandbits(width), rng.randrange(width + 8)) for _ in range(20)]


@pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc): the C backend cannot run")
@pytest.mark.parametrize("width", [33, 40, 48, 57, 63, 64])
def test_both_backends_put_every_bit_where_p4_says(tmp_path: Path, width: int) -> None:
    path, outs = program(tmp_path, width)
    twin = Twin(*compile_program(path))
    for x, s in inputs(width, random.Random(width)):
        outcome = twin.send(0, frame(width, x, s))  # C == Python, bit for bit
        assert outcome.frames == [(1, expected(width, outs, x, s))], f"x={x:#x} s={s}"


@pytest.mark.parametrize("width", [72, 128])
def test_the_python_backend_puts_every_bit_of_fields_wider_than_64_bits_where_p4_says(
    tmp_path: Path, width: int
) -> None:
    path, outs = program(tmp_path, width)
    pipeline = new_pipeline(*compile_program(path), "python")
    for x, s in inputs(width, random.Random(width)):
        assert pipeline.process(0, frame(width, x, s)) == [(1, expected(width, outs, x, s))], f"x={x:#x}"
