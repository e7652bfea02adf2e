"""The front end in one call: P4 file -> checked, typed `ir.Program`.

preprocess (pcpp) -> parse (lark, LALR) -> check (names, types, widths).
Every problem in the program raises `CompileError` carrying p4c-style
diagnostics; nothing else escapes for bad input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from softswitch import ir
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocess import PREDEFINED, preprocess
from softswitch.frontend.typecheck import check


def compile_file(
    path: str | Path,
    include_dirs: Sequence[str | Path] = (),
    defines: Mapping[str, str] | None = None,
    predefined: Mapping[str, str] = PREDEFINED,
) -> ir.Program:
    """Compile a v1model P4_16 program; raises softswitch.frontend.diagnostics.CompileError on errors.

    `predefined`: the target's own macros (softswitch/targets), the embedded switch's by default.
    """
    pre = preprocess(path, include_dirs, defines, predefined)
    tree = parse(pre)
    return check(tree, pre, str(path))
