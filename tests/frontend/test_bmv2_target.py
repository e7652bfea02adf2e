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
