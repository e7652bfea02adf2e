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
# An annotation body that is no expression list (`@doc(free text)`, `@x[k = v]`) is one ANNOTATION_RAW
# token: its brackets are replaced by these markers (same length, so positions stay), see _raw_bodies.
RAW_OPEN, RAW_STRUCTURED, RAW_CLOSE = "\x01", "\x03", "\x02"
_CLOSING = {"(": ")", "[": "]", "{": "}"}


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
            if tok.type == "GENERIC_NAME" and tok.value.rstrip(" \t<") in types | {"value_set"}:
                # `T<...>(` where T is a type (an annotated `register<bit<8>>(4) r;`): type arguments
                # of a type, not of a call; the lexer took it for a call where a call could follow.
                name = tok.value.rstrip(" \t<")
                kind = "VALUE_SET" if name == "value_set" else "TYPE_NAME"
                yield Token.new_borrow_pos(kind, name, tok)
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
            elif tok.value in ("typedef", "type") and tok.type != "STRING":
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
        start=["start", "annotation_args", "annotation_kvs"],
        parser="lalr",
        lexer="contextual",
        postlex=_TypeNames(),
        propagate_positions=True,
        maybe_placeholders=True,
    )


def parse(pre: Preprocessed) -> Tree:
    """Parse preprocessed text; syntax errors are reported at their original file:line:column."""
    try:
        return _lark().parse(_raw_bodies(pre.text), start="start")
    except UnexpectedInput as exc:
        raise CompileError([_syntax_error(exc, pre)]) from None


def _raw_bodies(text: str) -> str:
    """`text` with the body of every annotation that is not an expression list marked raw.

    P4 lets an annotation's parentheses hold any balanced tokens (`@doc(see RFC 791, p. 12)`) and its
    square brackets a structured list (`@x[1, "a"]`, `@x[k = 1]`); p4c's lexer keeps such a body
    unparsed. Here the brackets of such a body become RAW_OPEN (or RAW_STRUCTURED) and RAW_CLOSE, so
    that the lexer takes the body as one ANNOTATION_RAW token; a body that is an expression list is
    left alone, to be parsed (and checked) as expressions.
    """
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = _end_of(text, "\n", i)
        elif text.startswith("/*", i):
            i = _end_of(text, "*/", i + 2)
        elif c == '"':
            i = _string_end(text, i)
        elif c == "@" and i + 1 < n and (text[i + 1].isalpha() or text[i + 1] == "_"):
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            i = j
            if j < n and text[j] in "([":
                close = _matching(text, j)
                if close is not None and (text[j] == "[" or not _expression_list(text[j + 1 : close])):
                    out[j] = RAW_OPEN if text[j] == "(" else RAW_STRUCTURED
                    out[close] = RAW_CLOSE
                    i = close + 1
        else:
            i += 1
    return "".join(out)


def _end_of(text: str, end: str, i: int) -> int:
    found = text.find(end, i)
    return len(text) if found < 0 else found + len(end)


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text) and text[j] != '"':  # a P4 string may span lines
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _matching(text: str, i: int) -> int | None:
    """The index of the bracket closing the one at `i` (strings and nesting skipped), or None."""
    stack = [_CLOSING[text[i]]]
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == '"':
            j = _string_end(text, j)
            continue
        if c in _CLOSING:
            stack.append(_CLOSING[c])
        elif c in ")]}":
            if c != stack.pop():
                return None
            if not stack:
                return j
        j += 1
    return None


def annotation_body(body: str) -> Tree | None:
    """A structured annotation's body as an expression list or key-value list (None: neither)."""
    if not body.strip():
        return Tree("annotation_args", [])
    for start in ("annotation_args", "annotation_kvs"):
        try:
            return _lark().parse(body, start=start)
        except UnexpectedInput:
            continue
    return None


def _expression_list(body: str) -> bool:
    if not body.strip():
        return True
    try:
        _lark().parse(body, start="annotation_args")
    except UnexpectedInput:
        return False
    return True


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
