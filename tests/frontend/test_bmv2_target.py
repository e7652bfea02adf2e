"""`p4reduce-p4c --target bmv2` refuses what p4c's bmv2 back end refuses; the default target does not.

p4c builds each pipeline control's graph after its mid end, in which every
run of statements is a table of its own, and refuses a table applied where
its next nodes differ (issue 39: the v1model program's `upstream`, applied
in the MISSING branch and for members' packets). Each case is p4c's verdict
on the same shape of program, as its bmv2 tests record it (issue986-bmv2.p4
refused, issue986-1-bmv2.p4 accepted) or as its check decides it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from softswitch.frontend.diagnostics import CompileError
from softswitch.p4c import compile_program, main
from tests.frontend.skeleton import program
from tests.p4src_text import P4SRC, V1MODEL

ROOT = Path(__file__).resolve().parents[2]
SUCCESSORS = "Program is not supported by this target, because table I.t has multiple successors"
LOOP = "Program can not be implemented on this target since it contains a path from table I.t back to itself"
U = "table u { actions = { NoAction; } default_action = NoAction(); }"


def refusal(path: Path) -> str | None:
    """The first refusal under --target bmv2, as `source line: message`; None if accepted. The default
    target accepts every case."""
    compile_program(path)
    try:
        compile_program(path, target="bmv2")
    except CompileError as error:
        first = error.diagnostics[0]
        assert first.pos is not None
        return f"{path.read_text().splitlines()[first.pos.line - 1].strip()}: {first.message}"
    return None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # p4c's issue986-bmv2.p4: each branch goes on to its own statement after t
        ("if (hdr.h.a == 0) { t.apply(); sm.egress_spec = 1; } else { t.apply(); sm.egress_spec = 2; }",
         SUCCESSORS),
        # p4c's issue986-1-bmv2.p4: both places go on to the same node
        ("if (hdr.h.a == 0) { t.apply(); } else { t.apply(); } u.apply();", None),
        ("if (hdr.h.a == 0) { t.apply(); } else { t.apply(); }", None),
        # one place branches on the hit, the other does not: two edges against one
        ("if (hdr.h.a == 0) { if (t.apply().hit) { hdr.h.b = 1; } } else { t.apply(); }", SUCCESSORS),
        ("if (hdr.h.a == 0) { meta.m = 1; t.apply(); } else { t.apply(); }", None),
        # on one path twice
        ("t.apply(); t.apply();", LOOP),
        ("t.apply(); hdr.h.b = 2; if (t.apply().hit) { exit; }", LOOP),
        # exit is an action's statement in p4c's mid end, so the graph goes on past it
        ("if (hdr.h.a == 0) { t.apply(); exit; } else { t.apply(); exit; }", SUCCESSORS),
        ("bool x = t.apply().hit; if (x) { u.apply(); }", None),
        ("switch (t.apply().action_run) { a: { u.apply(); } default: { } }", None),
    ],
)  # fmt: skip
def test_a_table_in_several_places_is_refused_as_p4c_refuses_it(
    tmp_path: Path, body: str, expected: str | None
) -> None:
    got = refusal(program(tmp_path, body, local=U))
    table_t = "table t { key = { hdr.h.a: exact; } actions = { a; NoAction; } default_action = NoAction(); }"
    assert got == (None if expected is None else f"{table_t}: {expected}")


def test_the_v1model_program_compiles_for_bmv2() -> None:
    assert main(["--target", "bmv2", "-q", "-I", str(P4SRC), "-o", "/dev/null", str(V1MODEL)]) == 0


def copy_p4src(tmp_path: Path) -> Path:
    shutil.copytree(P4SRC, tmp_path / "p4src")
    return tmp_path / "p4src" / V1MODEL.relative_to(P4SRC)


def test_upstream_applied_again_for_a_parents_missing_is_refused(tmp_path: Path) -> None:
    """The shape issue 39 reported: `upstream` applied in the MISSING branch as well as for members."""
    path = copy_p4src(tmp_path)
    text = path.read_text()
    assert text.count("resend_up = true;") == 1
    path.write_text(
        text.replace("resend_up = true;", "if (!upstream.apply().hit) { INGRESS_DROP(DROP_UNKNOWN_JOB); }")
    )
    compile_program(path, [str(tmp_path / "p4src")])  # the embedded switch runs it
    with pytest.raises(CompileError) as refused:
        compile_program(path, [str(tmp_path / "p4src")], target="bmv2")
    (first,) = refused.value.diagnostics
    assert first.message == (
        "Program is not supported by this target, because table MyIngress.upstream has multiple successors"
    )
    assert (
        first.pos is not None
        and path.read_text().splitlines()[first.pos.line - 1].strip() == "table upstream {"
    )


def test_the_program_at_8f637a1_is_refused(tmp_path: Path) -> None:
    """The program as p4c refused it (issue 39), from the repository's history."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git history here to read the program at 8f637a1 from")
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"8f637a1:{V1MODEL.relative_to(ROOT)}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if old.returncode != 0:
        pytest.skip(f"commit 8f637a1 is not in this clone's history: {old.stderr.strip()}")
    path = copy_p4src(tmp_path)
    path.write_text(old.stdout)
    with pytest.raises(CompileError, match="table MyIngress.upstream has multiple successors"):
        compile_program(path, [str(tmp_path / "p4src")], target="bmv2")


def test_each_target_predefines_its_own_macros(tmp_path: Path) -> None:
    """p4c's bmv2 back end predefines __TARGET_BMV2__; only the embedded switch adds its own macro."""
    body = "#ifdef __P4REDUCE_SOFTSWITCH__\n t.apply();\n#endif\n"
    body += "#ifndef __TARGET_BMV2__\n#error no bmv2\n#endif\n"
    path = program(tmp_path, body + " t.apply();", local=U)
    with pytest.raises(CompileError, match="back to itself"):
        compile_program(path, target="bmv2", defines={"__P4REDUCE_SOFTSWITCH__": "1"})
    compile_program(path, target="bmv2")  # one apply: accepted


# The other refusals of p4c's bmv2 back end (softswitch/targets/bmv2_limits.py): a program with one
# construct placed in the block it is about. Each refused case is one p4c's sources refuse (its own bmv2
# tests list hashing-non-tuple-bmv2.p4 and issue1765-bmv2.p4 as failing for two of these); each accepted
# one is a near miss that p4c compiles.
TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<32> c; }
struct headers_t { h_t h; }
struct meta_t { bit<8> m; bit<32> w; bit<16> s; }
enum bit<8> Kind { ONE = 1 }
TOP
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); PARSE transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { VERIFY } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action a(bit<8> x) { hdr.h.a = x; }
    ILOCAL
    apply { INGRESS sm.egress_spec = 1; }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { ELOCAL apply { EGRESS } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { COMPUTE } }
control D(packet_out pkt, in headers_t hdr) { apply { DEPARSE } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
PLACES = ("TOP", "PARSE", "VERIFY", "ILOCAL", "INGRESS", "ELOCAL", "EGRESS", "COMPUTE", "DEPARSE")
CSUM = "update_checksum(true, {DATA}, hdr.h.b, HashAlgorithm.csum16);"
UNEVALUATED = "could not evaluate expression at compilation time"


def placed(tmp_path: Path, **where: str) -> Path:
    text = TEMPLATE
    for place in PLACES:
        text = text.replace(place, where.get(place, "pkt.emit(hdr.h);" if place == "DEPARSE" else ""), 1)
    path = tmp_path / "limits.p4"
    path.write_text(text)
    return path


LIMITS = [
    ("shift by a 16-bit amount", {"INGRESS": "hdr.h.c = hdr.h.c << meta.s;"},
     "shift amount limited to 8 bits on this target"),
    ("shift by a typed 16-bit constant", {"INGRESS": "hdr.h.c = hdr.h.c << 16w3;"},
     "shift amount limited to 8 bits on this target"),
    ("shift by an 8-bit amount", {"INGRESS": "hdr.h.c = hdr.h.c << hdr.h.a;"}, None),
    ("shift of 0 by anything", {"INGRESS": "hdr.h.c = 32w0 << hdr.h.c;"}, None),
    ("shift by 300", {"INGRESS": "hdr.h.c = hdr.h.c << 300;"}, "shift amount limited to 256 on this target"),
    ("division by 3", {"INGRESS": "hdr.h.c = hdr.h.c / 3;"}, UNEVALUATED),
    ("modulo 3", {"INGRESS": "hdr.h.c = hdr.h.c % 3;"}, UNEVALUATED),
    ("division by 4", {"INGRESS": "hdr.h.c = hdr.h.c / 4;"}, None),
    ("an if in the compute checksum control",
     {"COMPUTE": "if (hdr.h.isValid()) { " + CSUM.replace("DATA", "hdr.h.a") + " }"},
     "Only calls to update_checksum or update_checksum_with_payload allowed"),
    ("an assignment in the verify checksum control", {"VERIFY": "meta.m = 1;"},
     "Only calls to verify_checksum or verify_checksum_with_payload allowed"),
    ("a slice in checksum data", {"COMPUTE": CSUM.replace("DATA", "hdr.h.a, hdr.h.c[15:0]")},
     "Computations are not supported in update_checksum"),
    ("fields as checksum data", {"COMPUTE": CSUM.replace("DATA", "hdr.h.a, hdr.h.c")}, None),
    ("an if in the deparser", {"DEPARSE": "if (hdr.h.isValid()) { pkt.emit(hdr.h); }"},
     "not supported within a deparser on this target"),
    ("mark_to_drop in a parser", {"PARSE": "mark_to_drop(sm);"}, "not supported in parser on this target"),
    ("clone I2E in egress", {"EGRESS": "clone(CloneType.I2E, 5);"},
     "'clone(I2E, ...) not invoked in ingress"),
    ("clone E2E in ingress", {"INGRESS": "clone(CloneType.E2E, 5);"},
     "'clone(E2E, ...) not invoked in egress"),
    ("clone I2E in ingress", {"INGRESS": "clone(CloneType.I2E, 5);"}, None),
    ("resubmit in an egress action",
     {"ELOCAL": "action r() { resubmit_preserving_field_list(1); } table te { actions = { r; } }",
      "EGRESS": "te.apply();"},
     "'resubmit' can only be invoked in ingress"),
    ("recirculate in ingress", {"INGRESS": "recirculate_preserving_field_list(1);"},
     "'resubmit' can only be invoked in egress"),
    ("one direct counter on two tables",
     {"ILOCAL": "direct_counter(CounterType.packets) dc; "
                "table t2 { key = { hdr.h.b: exact; } actions = { a; } counters = dc; } "
                "table t3 { key = { hdr.h.c: exact; } actions = { a; } counters = dc; }",
      "INGRESS": "t2.apply(); t3.apply();"},
     "Direct counters cannot be attached to multiple tables I.t2 and I.t3"),
    ("a bool action parameter",
     {"ILOCAL": "action ab(bool x) { meta.m = x ? 8w1 : 8w0; } table t2 { key = { hdr.h.b: exact; } "
                "actions = { ab; } }",
      "INGRESS": "t2.apply();"},
     "action parameters must be bit<> or int<> on this target"),
    ("a register of bool", {"ILOCAL": "register<bool>(4) r;", "INGRESS": "r.write(0, true);"},
     "Only registers with bit or int types are currently supported"),
    ("a register of a serializable enum",
     {"ILOCAL": "register<Kind>(4) r;", "INGRESS": "r.write(0, Kind.ONE);"}, None),
    ("a register of size 0", {"ILOCAL": "register<bit<8>>(0) r;"},
     "direct registers are not supported in bmv2"),
    ("hash of a bare field", {"INGRESS": "hash(meta.w, HashAlgorithm.crc32, 32w0, hdr.h.c, 32w1024);"},
     "expected a struct"),
    ("hash of a list", {"INGRESS": "hash(meta.w, HashAlgorithm.crc32, 32w0, {hdr.h.c}, 32w1024);"}, None),
    ("an lpm mask that is not a prefix",
     {"ILOCAL": "table t2 { key = { hdr.h.c: lpm; } actions = { a; } "
                "const entries = { 32w0x0a000000 &&& 32w0xff00ff00 : a(1); } }",
      "INGRESS": "t2.apply();"},
     "invalid mask for LPM key"),
    ("a range on a ternary key",
     {"ILOCAL": "table t2 { key = { hdr.h.b: ternary; } actions = { a; } "
                "const entries = { 1 .. 5 : a(1); } }",
      "INGRESS": "t2.apply();"},
     "unsupported ternary key expression"),
    ("a match kind of the program's own",
     {"TOP": "match_kind { fancy }", "ILOCAL": "table t2 { key = { hdr.h.b: fancy; } actions = { a; } }",
      "INGRESS": "t2.apply();"},
     "match type not supported on this target"),
]  # fmt: skip


@pytest.mark.parametrize(("where", "expected"), [c[1:] for c in LIMITS], ids=[c[0] for c in LIMITS])
def test_what_p4cs_bmv2_back_end_refuses_is_refused(
    tmp_path: Path, where: dict[str, str], expected: str | None
) -> None:
    path = placed(tmp_path, **where)
    compile_program(path)  # the embedded switch runs each
    try:
        compile_program(path, target="bmv2")
    except CompileError as error:
        assert expected is not None, error.render()
        assert [d.message for d in error.diagnostics] == [expected]
        assert error.diagnostics[0].pos is not None and error.diagnostics[0].pos.line > 1
        return
    assert expected is None, f"accepted; p4c refuses it: {expected}"
