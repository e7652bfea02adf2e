"""C preprocessing of P4 sources (pcpp) with a map back to the original file:line.

P4 programs rely on the C preprocessor (#include, #define with arguments,
#if); pcpp does it in-process. Its `#line` markers are removed from the text
handed to the parser and turned into a line map, so that every diagnostic
and every IR position names the file and line the programmer wrote.
`#include <core.p4>` and `<v1model.p4>` resolve to softswitch/p4include/.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pcpp

from softswitch.frontend.diagnostics import CompileError, Diagnostic
from softswitch.ir import Pos

P4INCLUDE = Path(__file__).resolve().parent / "p4include"

# What the program may test with #ifdef on the embedded switch, which stands in for bmv2's simple_switch;
# another target (softswitch/targets) predefines its own.
PREDEFINED = {"__TARGET_BMV2__": "1", "__P4REDUCE_SOFTSWITCH__": "1"}

_LINE = re.compile(r'^#line (\d+) "(.*)"\s*$')


@dataclass(frozen=True, slots=True)
class Preprocessed:
    """Preprocessed text and, per line of it (0-based), the original (file, line)."""

    text: str
    origins: tuple[tuple[str, int], ...]

    def pos(self, line: int, col: int) -> Pos:
        """The original position of 1-based (line, col) of `text`."""
        if 1 <= line <= len(self.origins):
            file, orig = self.origins[line - 1]
            return Pos(file, orig, col)
        return Pos("<unknown>", line, col)


class _Preprocessor(pcpp.Preprocessor):
    """pcpp with errors collected as diagnostics instead of printed."""

    def __init__(self) -> None:
        super().__init__()
        self.diagnostics: list[Diagnostic] = []
        self.passthru_comments = False

    def on_error(self, file: str, line: int, msg: str) -> None:
        self.diagnostics.append(Diagnostic(Pos(file, line, 1), msg))
        self.return_code += 1

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:
        where = self.lastdirective
        pos = Pos(where.source, where.lineno, 1) if where is not None else None
        self.diagnostics.append(Diagnostic(pos, f"cannot find include file {includepath!r}"))
        self.return_code += 1
        raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)

    def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):  # type: ignore[no-untyped-def]
        text = "".join(tok.value for tok in toks).strip()
        if directive.value == "error":
            self.diagnostics.append(Diagnostic(Pos(directive.source, directive.lineno, 1), f"#error {text}"))
            self.return_code += 1
            return True
        if directive.value == "warning":
            return True
        return super().on_directive_unknown(directive, toks, ifpassthru, precedingtoks)


def preprocess(
    path: str | Path,
    include_dirs: Sequence[str | Path] = (),
    defines: Mapping[str, str] | None = None,
    predefined: Mapping[str, str] = PREDEFINED,
) -> Preprocessed:
    """Run the preprocessor on `path` with the target's `predefined` macros and then `defines` (which
    win); raises CompileError on #error or a missing include."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CompileError([Diagnostic(None, f"cannot read {path}: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise CompileError([Diagnostic(None, f"{path} is not UTF-8 text")]) from None
    pp = _Preprocessor()
    for d in include_dirs:
        pp.add_path(str(d))
    pp.add_path(str(P4INCLUDE))
    for name, value in {**predefined, **(defines or {})}.items():
        pp.define(f"{name} {value}")
    pp.parse(source, str(path))
    out = io.StringIO()
    pp.write(out)
    if pp.diagnostics:
        raise CompileError(pp.diagnostics)
    return _split(out.getvalue(), str(path))


def _split(raw: str, default_file: str) -> Preprocessed:
    lines: list[str] = []
    origins: list[tuple[str, int]] = []
    file, line = default_file, 1
    for text in raw.split("\n"):
        m = _LINE.match(text)
        if m:
            line, file = int(m.group(1)), m.group(2)
            lines.append("")
            origins.append((file, line))
            continue
        lines.append(text)
        origins.append((file, line))
        line += 1
    return Preprocessed("\n".join(lines), tuple(origins))
