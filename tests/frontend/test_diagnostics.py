"""Bad programs get p4c-style errors: file:line:column, the source line, a caret; exit code 1.

Each case puts one mistake into the apply block of an otherwise valid
v1model program (tests/frontend/skeleton.p4.in, line 14 is the body).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from softswitch.frontend import compile_file
from softswitch.frontend.diagnostics import CompileError

HERE = Path(__file__).parent
SKELETON = (HERE / "skeleton.p4.in").read_text()
INDENT = "        "


def program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prog.p4"
    path.write_text(SKELETON.replace("BODY", INDENT + body))
    return path


CASES = [
    ("undeclared name", "hdr.h.a = undeclared_x;", 19, "undeclared_x: undeclared name"),
    ("width mismatch without a cast", "hdr.h.a = hdr.h.b;", 19, "expected bit<8>, got bit<16>"),
    ("unknown field", "hdr.h.nope = 1;", 15, "no field nope in h_t"),
    ("bit where bool is needed", "bit<8> v = 1; bool f = v;", 32, "expected bool, got bit<8>"),
    ("wrong argument count", "a(1, 2);", 9, "expects 1 arguments, got 2"),
    ("int<W> where bit<W> is needed", "int<8> s = 1; hdr.h.a = s;", 33, "expected bit<8>, got int<8>"),
    ("unsupported construct", "header_union u;", 9, "header_union"),
]


@pytest.mark.parametrize(("what", "body", "column", "message"), CASES, ids=[c[0] for c in CASES])
def test_each_error_names_file_line_column(
    tmp_path: Path, what: str, body: str, column: int, message: str
) -> None:
    path = program(tmp_path, body)
    with pytest.raises(CompileError) as caught:
        compile_file(path)
    rendered = caught.value.render()
    first = rendered.splitlines()[0]
    assert first.startswith(f"{path}:14:{column}: error:"), rendered
    assert message in first
    source, caret = rendered.splitlines()[1:3]
    assert source == INDENT + body
    assert caret.index("^") == column - 1


def test_an_explicit_cast_makes_the_width_mismatch_legal(tmp_path: Path) -> None:
    compile_file(program(tmp_path, "hdr.h.a = (bit<8>) hdr.h.b;"))


def test_errors_inside_an_included_file_point_into_that_file(tmp_path: Path) -> None:
    (tmp_path / "bad.p4").write_text("const bit<8> OK = 1;\nconst bit<8> BAD = missing_name;\n")
    path = program(tmp_path, "hdr.h.a = OK;")
    path.write_text(
        path.read_text().replace("#include <v1model.p4>", '#include <v1model.p4>\n#include "bad.p4"')
    )
    with pytest.raises(CompileError) as caught:
        compile_file(path)
    assert caught.value.render().startswith(f"{tmp_path / 'bad.p4'}:2:20: error:")


def p4c(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "softswitch.p4c", *args], capture_output=True, text=True)


def test_cli_exit_codes_follow_p4c(tmp_path: Path) -> None:
    good = program(tmp_path, "t.apply();")
    done = p4c(str(good), "-o", str(tmp_path / "out.json"), "--p4runtime-files", str(tmp_path / "out.txtpb"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.json").read_bytes().startswith(b"{") and "tables {" in (
        tmp_path / "out.txtpb"
    ).read_text()

    bad = program(tmp_path, "hdr.h.a = undeclared_x;")
    done = p4c(str(bad), "-o", str(tmp_path / "bad.json"))
    assert done.returncode == 1 and "undeclared_x: undeclared name" in done.stderr
    assert "Traceback" not in done.stderr

    done = p4c(str(tmp_path / "missing.p4"))
    assert done.returncode == 2 and "no such file" in done.stderr
    done = p4c(str(good), "--arch", "psa")
    assert done.returncode == 2 and "v1model only" in done.stderr


def test_p4info_output_formats_follow_the_extension(tmp_path: Path) -> None:
    good = program(tmp_path, "t.apply();")
    outputs = [tmp_path / f"p4info.{ext}" for ext in ("txtpb", "bin", "json")]
    done = p4c(str(good), "-o", str(tmp_path / "o.json"), "--p4runtime-files", ",".join(map(str, outputs)))
    assert done.returncode == 0, done.stderr
    from finsy.proto import p4i
    from google.protobuf import json_format

    from softswitch.p4info import from_text

    text = from_text(outputs[0].read_text())
    binary = p4i.P4Info.FromString(outputs[1].read_bytes())
    js = json_format.Parse(outputs[2].read_text(), p4i.P4Info())
    assert text == binary == js and text.tables[0].preamble.name == "I.t"


def test_a_construct_the_executor_cannot_run_is_reported_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backstop: should the checker let through what the executor refuses, the compiler (which loads
    # every program it accepts) says `unsupported:` at the construct, not an internal error at 1:1.
    from softswitch import p4c as cli
    from softswitch.backends.common import UnsupportedError

    def refuse(program: object, info: object) -> None:
        first = program.block("ig").apply.stmts[0]  # type: ignore[attr-defined]
        raise UnsupportedError.at("a construct", first)

    monkeypatch.setattr(cli, "Pipeline", refuse)
    with pytest.raises(CompileError) as caught:
        cli.compile_program(program(tmp_path, "hdr.h.a = 1;"))
    assert caught.value.render().startswith(f"{tmp_path / 'prog.p4'}:14:9: error: unsupported: a construct")
