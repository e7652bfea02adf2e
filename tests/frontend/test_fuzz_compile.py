"""Zero crashes: every input, valid or not, ends in `file:line:col` diagnostics or a program that runs.

Two generators feed `p4reduce-p4c`'s one entry point (`compile_program`:
front end, P4Info, and one load by the switch's executor):

* mutations of the repository's own P4 programs (tokens deleted,
  duplicated, swapped or replaced by keywords, punctuation and extreme
  numbers), which reach every corner of the grammar and the checker;
* programs built from a small P4 grammar of statements and expressions
  over a header of mixed widths (casts, slices, shifts, concatenation,
  saturating operators, list expressions, stacks, calls that are outside
  the subset), which reach the checker's typing rules and, when accepted,
  the executor: every accepted program must also process packets.

The property in both: compile either succeeds, or raises CompileError whose
every diagnostic has a real position and none says "internal compiler
error". Runs are bounded (hypothesis, derandomized, no deadline) so the
suite stays fast on a 2-core CI; raise P4_FUZZ_EXAMPLES to fuzz longer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from softswitch.backends.python.executor import Pipeline
from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("P4_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SEEDS = sorted(
    [ROOT / "tests/frontend/general_features.p4", ROOT / "tests/frontend/skeleton.p4.in"]
    + [ROOT / "tests/executor/unions.p4", ROOT / "tests/executor/varbit.p4"]
    + list((ROOT / "tests/tutorials").glob("*.p4"))
)
TOKEN = re.compile(r"\w+|\d+w\d+|<<|>>|&&&|\.\.|[^\s\w]")
NOISE = [
    "{",
    "}",
    "(",
    ")",
    ";",
    "<",
    ">",
    ",",
    "=",
    ".",
    "@name",
    "default",
    "exit",
    "return",
    "const",
    "header",
    "struct",
    "bit<0>",
    "bit<99999999999>",
    "int<1>",
    "varbit<8>",
    "-1",
    "0x",
    "8w256",
    "4294967296",
    "hdr",
    "apply",
    "transition",
    "select",
    "_",
    "error.NoMatch",
    "lookahead<bit<8>>()",
    "{1, 2}",
    "[3:5]",
    "[0:0]",
    "push_front(1)",
    "isValid()",
    "NoAction",
    "@priority(1)",
    "static_assert(false)",
]


def check(path: Path) -> None:
    """The property: a compiled program that runs, or positioned diagnostics from the program's text."""
    try:
        program, info = compile_program(path, [str(ROOT / "p4src")])
    except CompileError as error:
        assert error.diagnostics, "a CompileError with no diagnostic"
        for d in error.diagnostics:
            assert "internal compiler error" not in d.message, d.render()
            assert d.pos is None or (d.pos.file and d.pos.line >= 0), d.render()
        return
    pipeline = Pipeline(program, info)
    for frame in (b"", bytes(14), bytes(range(64)), b"\xff" * 200):
        pipeline.process(1, frame)


@FUZZ
@given(seed=hs.sampled_from(SEEDS), edits=hs.lists(hs.tuples(hs.integers(0, 3), hs.integers(0, 10**6),
       hs.sampled_from(NOISE)), min_size=1, max_size=4))  # fmt: skip
def test_mutated_programs_never_crash_the_compiler(
    tmp_path_factory: pytest.TempPathFactory, seed: Path, edits: list[tuple[int, int, str]]
) -> None:
    text = seed.read_text()
    tokens = [m for m in TOKEN.finditer(text)]
    pieces = [(m.start(), m.end()) for m in tokens]
    for kind, where, noise in edits:
        start, end = pieces[where % len(pieces)]
        if kind == 0:  # delete a token
            text = text[:start] + " " + text[end:]
        elif kind == 1:  # replace it by noise
            text = text[:start] + noise + text[end:]
        elif kind == 2:  # insert noise before it
            text = text[:start] + noise + " " + text[start:]
        else:  # duplicate the source line holding it
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", start)
            line_end = len(text) if line_end < 0 else line_end
            text = text[:line_end] + "\n" + text[line_start:line_end] + text[line_end:]
        tokens = [m for m in TOKEN.finditer(text)]
        pieces = [(m.start(), m.end()) for m in tokens] or [(0, 0)]
    path = tmp_path_factory.mktemp("mut") / "mutated.p4"
    path.write_text(text)
    check(path)


# ------------------------------------------------------------------ grammar-based programs

HEADER = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; int<8> c; bit<32> d; bool f; bit<7> g; }
header s_t { bit<8> v; }
struct headers_t { h_t h; s_t[3] s; }
struct meta_t { bit<8> m; bit<48> w; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition select(hdr.h.a) { 1: more; default: accept; } }
    state more { pkt.extract(hdr.s.next); transition select(hdr.s.last.v) { 0: accept; default: more; } }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(4) r;
    action act(inout bit<8> x, bit<8> y) { x = y; %s }
    table t { key = { hdr.h.a: exact; } actions = { NoAction; } }
    apply {
        bit<8> l8 = 3; bit<16> l16 = 5; h_t lh; meta_t lm;
%s
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

_LEAVES8 = ["hdr.h.a", "l8", "meta.m", "8w7", "5", "hdr.s[0].v", "(bit<8>) hdr.h.c", "hdr.h.d[7:0]"]
_LEAVES16 = ["hdr.h.b", "l16", "16w300", "(bit<16>) hdr.h.a", "hdr.h.a ++ l8", "hdr.h.d[15:0]"]
_OPS = ["+", "-", "*", "&", "|", "^", "|+|", "|-|", "<<", ">>", "/", "%", "==", "<", "&&", "++"]


@hs.composite
def expressions(draw: hs.DrawFn, depth: int = 0) -> str:
    if depth > 2 or draw(hs.booleans()):
        return draw(hs.sampled_from(_LEAVES8 + _LEAVES16 + ["true", "hdr.h.f", "hdr.h.isValid()"]))
    choice = draw(hs.integers(0, 5))
    left = draw(expressions(depth + 1))
    if choice == 0:
        return f"({left} {draw(hs.sampled_from(_OPS))} {draw(expressions(depth + 1))})"
    if choice == 1:
        return f"(({draw(hs.sampled_from(['bit<8>', 'bit<16>', 'int<8>', 'bool', 'bit<1>']))}) {left})"
    if choice == 2:
        hi, lo = draw(hs.integers(-1, 20)), draw(hs.integers(-1, 20))
        return f"{left}[{hi}:{lo}]"
    if choice == 3:
        return f"({left} ? {draw(expressions(depth + 1))} : {draw(expressions(depth + 1))})"
    if choice == 4:
        return f"(~{left})"
    return f"(-{left})"


@hs.composite
def statements(draw: hs.DrawFn) -> str:
    target = draw(hs.sampled_from(["hdr.h.a", "l8", "hdr.h.b", "meta.m", "hdr.h.d[7:0]", "lh.a", "hdr.h.g",
                                   "hdr.s[1].v", "hdr.h.f"]))  # fmt: skip
    kind = draw(hs.integers(0, 11))
    e = draw(expressions())
    return [
        f"{target} = {e};",
        f"if ({e}) {{ {target} = {draw(expressions())}; }} else {{ exit; }}",
        f"act({target}, {e});",
        f"r.write((bit<32>) {e}, {target}); r.read({target}, 2);",
        f"hash({target}, HashAlgorithm.{draw(hs.sampled_from(['crc16', 'crc32', 'xor16', 'random']))}, "
        f"(bit<16>) 0, {{ {e}, hdr.h }}, (bit<32>) 16);",
        "hdr.s.push_front(1); hdr.s[0].setValid();",
        "hdr.s.pop_front(2);",
        f"lh = hdr.h; lh.a = {e}; hdr.h = lh;",
        f"lm = {{ {e}, 48w1 }};",
        f"switch (t.apply().action_run) {{ NoAction: {{ {target} = {e}; }} }}",
        f"random({target}, 8w1, 8w9);",
        f"digest<meta_t>(1, meta); clone(CloneType.I2E, 5); {target} = {e};",
    ][kind]


@FUZZ
@given(body=hs.lists(statements(), min_size=1, max_size=4), action_body=statements())
def test_generated_programs_compile_to_diagnostics_or_run(
    tmp_path_factory: pytest.TempPathFactory, body: list[str], action_body: str
) -> None:
    path = tmp_path_factory.mktemp("gen") / "generated.p4"
    action_body = action_body.replace("act(", "mark_to_drop(sm); //")
    path.write_text(HEADER % (action_body, "\n".join("        " + s for s in body)))
    check(path)


def test_each_repository_program_compiles_or_is_refused_with_a_position() -> None:
    programs = [ROOT / "p4src/v1model/p4reduce.p4", *SEEDS]
    for path in programs:
        if path.suffix == ".p4":
            check(path)
