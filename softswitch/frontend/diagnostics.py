"""Compiler diagnostics in p4c's format: `file:line:column: error: message`, the line, a caret.

The front end collects errors instead of stopping at the first, so one run
of `p4reduce-p4c` shows every problem it can find; `CompileError` carries
them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from softswitch.ir import Pos


@dataclass(frozen=True, slots=True)
class Diagnostic:
    pos: Pos | None
    message: str
    severity: str = "error"

    def render(self, sources: dict[str, list[str]] | None = None) -> str:
        """The p4c-style text: location, message, then the source line with a caret under the column."""
        if self.pos is None:
            return f"{self.severity}: {self.message}"
        head = f"{self.pos}: {self.severity}: {self.message}"
        line = _source_line(self.pos, sources)
        if line is None:
            return head
        caret = "".join(c if c == "\t" else " " for c in line[: max(self.pos.col - 1, 0)]) + "^"
        return f"{head}\n{line}\n{caret}"


class CompileError(Exception):
    """One or more errors in the P4 program (not in the compiler's own usage)."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def _source_line(pos: Pos, sources: dict[str, list[str]] | None) -> str | None:
    if sources is not None and pos.file in sources:
        lines = sources[pos.file]
    else:
        try:
            lines = Path(pos.file).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
    if 1 <= pos.line <= len(lines):
        return lines[pos.line - 1].rstrip()
    return None
