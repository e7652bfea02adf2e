"""P4 text -> lark parse tree (the untyped AST), with p4c-style syntax errors.

The grammar (grammar.lark) is LALR(1); what makes P4 LALR-parsable is lexer
feedback: an identifier that names a type declared earlier in the program is
re-tagged TYPE_NAME (`_TypeNames`), exactly as p4c's lexer does, so
`register<bit<8>>(4) r;` and `a < b` never look alike. P4 requires
declaration before use, so one pass over the token stream suffices.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.lark import PostLex

from softswitch.frontend.diagnostics import CompileError, Diagnostic
from softswitch.frontend.preprocess import Preprocessed

# Keywords after which the next identifier is a new type name.
_TYPE_INTRODUCERS = {"header", "header_union", "struct", "extern", "parser", "control", "package", "enum"}


class _TypeNames(PostLex):
    """Re-tag identifiers that name declared types (a small state machine over the token stream)."""

    always_accept = ("NAME",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        types: set[str] = set()
        expect_type = False  # the next NAME is a type being declared
        enum_width = False  # inside `enum bit<W>`: wait for the closing '>'
        in_typedef = False
        last_name: str | None = None
        for tok in stream:
            if tok.type == "GENERIC_NAME" and tok.value.rstrip(" \t<") in types:
                # `T<...>(` where T is a type (an annotated `register<bit<8>>(4) r;`): type arguments
                # of a type, not of a call; the lexer took it for a call where a call could follow.
                name = tok.value.rstrip(" \t<")
                yield Token.new_borrow_pos("TYPE_NAME", name, tok)
                lt = Token.new_borrow_pos("LT", "<", tok)
                lt.column = (tok.column or 0) + len(tok.value) - 1
                lt.start_pos = (tok.start_pos or 0) + len(tok.value) - 1
                yield lt
                last_name = name
                continue
            if tok.type == "NAME":
                if tok.value in types:
                    tok.type = "TYPE_NAME"
                elif expect_type and not enum_width:
                    types.add(tok.value)
                if not enum_width:
                    expect_type = False
                last_name = tok.value
            elif tok.value in _TYPE_INTRODUCERS and tok.type != "STRING":
                expect_type = True
            elif expect_type and tok.value in ("bit", "int"):
                enum_width = True
            elif enum_width and tok.value == ">":
                enum_width = False
            elif tok.value == "typedef":
                in_typedef = True
            elif in_typedef and tok.value == ";":
                if last_name is not None:
                    types.add(last_name)
                in_typedef = False
            else:
                expect_type = expect_type and enum_width
            if tok.type == "TYPE_NAME":
                last_name = tok.value
            yield tok


@cache
def _lark() -> Lark:
    grammar = (Path(__file__).resolve().parent / "grammar.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        postlex=_TypeNames(),
        propagate_positions=True,
        maybe_placeholders=True,
    )


def parse(pre: Preprocessed) -> Tree:
    """Parse preprocessed text; syntax errors are reported at their original file:line:column."""
    try:
        return _lark().parse(pre.text)
    except UnexpectedInput as exc:
        raise CompileError([_syntax_error(exc, pre)]) from None


def _syntax_error(exc: UnexpectedInput, pre: Preprocessed) -> Diagnostic:
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            line = len(pre.origins)
            return Diagnostic(pre.pos(line, 1), "syntax error: unexpected end of file")
        shown = tok.value if tok.value else tok.type
        return Diagnostic(pre.pos(line, col), f"syntax error, unexpected {shown!r}")
    if isinstance(exc, UnexpectedCharacters):
        ch = pre.text[exc.pos_in_stream] if exc.pos_in_stream < len(pre.text) else "?"
        return Diagnostic(pre.pos(line, col), f"syntax error: unexpected character {ch!r}")
    if isinstance(exc, UnexpectedEOF):
        return Diagnostic(pre.pos(len(pre.origins), 1), "syntax error: unexpected end of file")
    return Diagnostic(pre.pos(line, col), "syntax error")
