"""Reading the preprocessed P4 programs without a P4 compiler: blocks, declarations, control paths.

Neither p4c nor the Tofino compiler can be installed here, so the tests that hold the two P4
programs to their rules read the source text after the C preprocessor (pcpp, as p4c's front end
would run it). These helpers understand the subset the programs are written in (braced blocks,
`if`/`else`, statements ending in `;`) and raise on anything they cannot place.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pcpp

P4SRC = Path(__file__).resolve().parents[1] / "p4src"
V1MODEL = P4SRC / "v1model" / "p4reduce.p4"
TNA = P4SRC / "tna" / "p4reduce.p4"
SYSTEM_INCLUDES = {"core.p4", "v1model.p4", "tna.p4", "t2na.p4"}


@dataclass(frozen=True)
class Variant:
    """One program as one compiler sees it: the source and the macros the compiler predefines."""

    name: str
    path: Path
    defines: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_tna(self) -> bool:
        return self.path == TNA

    @property
    def tofino(self) -> int:
        """1 or 2 for the TNA program's targets, 0 for v1model."""
        return int(self.defines.get("__TARGET_TOFINO__", "0"))


V1MODEL_VARIANT = Variant("v1model", V1MODEL)
TOFINO = Variant("tofino", TNA, {"__TARGET_TOFINO__": "1"})
TOFINO2 = Variant("tofino2", TNA, {"__TARGET_TOFINO__": "2"})
VARIANTS = (V1MODEL_VARIANT, TOFINO, TOFINO2)
TNA_VARIANTS = (TOFINO, TOFINO2)


class _Preprocessor(pcpp.Preprocessor):  # type: ignore[misc]
    """Leaves the architectures' system includes out; fails on anything else it cannot find."""

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:
        if is_system_include and includepath in SYSTEM_INCLUDES:
            raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)
        raise AssertionError(f"include not found: {includepath}")

    def on_error(self, file: str, line: int, msg: str) -> None:
        raise AssertionError(f"{file}:{line}: {msg}")


def preprocess(variant: Variant, extra: Mapping[str, str] | None = None) -> str:
    """The program's text after preprocessing, comments removed."""
    pre = _Preprocessor()
    pre.line_directive = None
    for name, value in {**variant.defines, **(extra or {})}.items():
        pre.define(f"{name} {value}")
    pre.parse(variant.path.read_text(), str(variant.path))
    out = io.StringIO()
    pre.write(out)
    text = re.sub(r"/\*.*?\*/", " ", out.getvalue(), flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def closing(text: str, start: int) -> int:
    """Index of the bracket that closes the one at `start`."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    opener = text[start]
    closer = pairs[opener]
    depth = 0
    for index in range(start, len(text)):
        depth += (text[index] == opener) - (text[index] == closer)
        if depth == 0:
            return index
    raise ValueError(f"unclosed {opener} at offset {start}")


def block(text: str, start: int) -> str:
    """The inside of the first {...} at or after `start`."""
    open_ = text.index("{", start)
    return text[open_ + 1 : closing(text, open_)]


def declared_fields(text: str, kind: str, name: str) -> list[tuple[str, str]]:
    """(type, field) pairs of `header name { ... }` or `struct name { ... }`."""
    match = re.search(rf"\b{kind}\s+{name}\s*\{{", text)
    assert match is not None, f"{kind} {name} not found"
    return re.findall(r"([\w<>]+)\s+(\w+)\s*;", block(text, match.start()))


def blocks_of(text: str, keyword: str) -> dict[str, str]:
    """Bodies of the `control NAME(...) {...}` or `parser NAME(...) {...}` declarations, by name."""
    found = {}
    for match in re.finditer(rf"\b{keyword}\s+(\w+)\s*\(", text):
        after_params = closing(text, match.end() - 1) + 1
        rest = text[after_params:].lstrip()
        if rest.startswith("{"):  # a declaration, not a package argument
            found[match.group(1)] = block(text, after_params)
    return found


def apply_body(control: str) -> str:
    """The control's `apply { ... }` block: the last `apply {` at the control's top level."""
    depth, last = 0, None
    for index, char in enumerate(control):
        depth += (char == "{") - (char == "}")
        if (
            depth == 0
            and control.startswith("apply", index)
            and control[index + 5 :].lstrip().startswith("{")
        ):
            last = index
    assert last is not None, "control without an apply block"
    return block(control, last)


def parser_state(parser: str, state: str) -> str:
    match = re.search(rf"\bstate\s+{state}\s*\{{", parser)
    assert match is not None, f"no state {state}"
    return block(parser, match.start())


def register_actions(text: str) -> dict[str, tuple[str, str]]:
    """RegisterAction name -> (its register, the body of its apply function)."""
    found = {}
    for match in re.finditer(r"\bRegisterAction<[^\n]*?>\s*\((\w+)\)\s+(\w+)\s*=\s*\{", text):
        outer = block(text, match.end() - 1)
        found[match.group(2)] = (match.group(1), outer)
    return found


def without_register_actions(text: str) -> str:
    """The text with every RegisterAction body blanked: the stateful ALU has rules of its own."""
    for match in reversed(list(re.finditer(r"\bRegisterAction<[^\n]*?>\s*\(\w+\)\s+\w+\s*=\s*\{", text))):
        end = closing(text, match.end() - 1)
        text = text[: match.end()] + " " * (end - match.end()) + text[end:]
    return text


def declared_registers(text: str) -> set[str]:
    return set(re.findall(r"\b(?:Register|register)\s*<[^;{\n]*?\)\s+(\w+)\s*;", text))


def actions_of(control: str) -> dict[str, tuple[str, str]]:
    """Action name -> (parameter list, body)."""
    found = {}
    for match in re.finditer(r"\baction\s+(\w+)\s*\(", control):
        params_end = closing(control, match.end() - 1)
        found[match.group(1)] = (control[match.end() : params_end], block(control, params_end))
    return found


@dataclass(frozen=True)
class Table:
    name: str
    hidden: bool
    annotations: tuple[str, ...]
    keys: tuple[str, ...]
    actions: tuple[str, ...]
    default_action: str


def tables_of(control: str) -> dict[str, Table]:
    found = {}
    for match in re.finditer(r"((?:@\w+(?:\([^)]*\))?\s*)*)\btable\s+(\w+)\s*\{", control):
        body = block(control, match.start(2))
        annotations = tuple(re.findall(r"@\w+(?:\([^)]*\))?", match.group(1)))
        key_match = re.search(r"\bkey\s*=\s*\{", body)
        keys: tuple[str, ...] = ()
        if key_match:
            keys = tuple(
                _key_name(entry) for entry in block(body, key_match.start()).split(";") if entry.strip()
            )
        actions_match = re.search(r"\bactions\s*=\s*\{", body)
        assert actions_match, f"table {match.group(2)} without actions"
        actions = tuple(
            re.sub(r"@\w+\s*", "", a).strip()
            for a in block(body, actions_match.start()).split(";")
            if a.strip()
        )
        default = re.search(r"\bdefault_action\s*=\s*(\w+)", body)
        found[match.group(2)] = Table(
            match.group(2),
            "@hidden" in annotations,
            annotations,
            keys,
            actions,
            default.group(1) if default else "",
        )
    return found


def _key_name(entry: str) -> str:
    """The P4Runtime name of a key: its @name annotation, else the expression."""
    named = re.search(r'@name\("([^"]+)"\)', entry)
    if named:
        return named.group(1)
    return entry.split(":")[0].strip()


def counters_of(control: str) -> set[str]:
    return set(re.findall(r"\b(?:Counter|counter)\b[^;{\n]*\)\s+(\w+)\s*;", control))


# ------------------------------------------------------------------------------------------------
# Statements and control paths
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Simple:
    text: str


@dataclass(frozen=True)
class If:
    condition: str
    then: tuple[Statement, ...]
    otherwise: tuple[Statement, ...]


Statement = Simple | If


def statements(body: str) -> tuple[Statement, ...]:
    """The statements of a block, with nested blocks flattened and `else if` chains as nested Ifs."""
    out: list[Statement] = []
    index = 0
    while True:
        index = _skip_space(body, index)
        if index >= len(body):
            return tuple(out)
        if _keyword_at(body, index, "if"):
            statement, index = _if_at(body, index)
            out.append(statement)
        elif body[index] == "{":
            end = closing(body, index)
            out.extend(statements(body[index + 1 : end]))
            index = end + 1
        else:
            end = _statement_end(body, index)
            out.append(Simple(body[index:end].strip()))
            index = end + 1


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _keyword_at(text: str, index: int, word: str) -> bool:
    end = index + len(word)
    return text.startswith(word, index) and (
        end == len(text) or not (text[end].isalnum() or text[end] == "_")
    )


def _statement_end(text: str, index: int) -> int:
    depth = 0
    for position in range(index, len(text)):
        char = text[position]
        depth += (char in "({[") - (char in ")}]")
        if char == ";" and depth == 0:
            return position
    raise ValueError(f"statement without ';': {text[index : index + 60]!r}")


def _branch(text: str, index: int) -> tuple[tuple[Statement, ...], int]:
    index = _skip_space(text, index)
    if text[index] == "{":
        end = closing(text, index)
        return statements(text[index + 1 : end]), end + 1
    if _keyword_at(text, index, "if"):
        statement, end = _if_at(text, index)
        return (statement,), end
    end = _statement_end(text, index)
    return (Simple(text[index:end].strip()),), end + 1


def _if_at(text: str, index: int) -> tuple[If, int]:
    open_ = text.index("(", index)
    close = closing(text, open_)
    then, index = _branch(text, close + 1)
    after = _skip_space(text, index)
    otherwise: tuple[Statement, ...] = ()
    if _keyword_at(text, after, "else"):
        otherwise, index = _branch(text, after + 4)
    return If(text[open_ + 1 : close], then, otherwise), index


Counts = dict[str, int]


def _plus(a: Counts | None, b: Counts | None) -> Counts | None:
    if a is None or b is None:
        return None
    return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}


def _most(a: Counts | None, b: Counts | None) -> Counts | None:
    if a is None:
        return b
    if b is None:
        return a
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()}


class RegisterAccesses:
    """How often each register can be executed on one path through a control's apply block.

    A path is followed through `if`/`else` (the larger branch counts), into the actions it calls
    and the tables it applies (the action a table runs is one of its actions), and ends at `exit`.
    """

    def __init__(self, text: str, control: str) -> None:
        self._register_of = {name: register for name, (register, _) in register_actions(text).items()}
        self._actions = {name: body for name, (_, body) in actions_of(control).items()}
        self._tables = tables_of(control)
        self._memo: dict[str, Counts] = {}

    def per_path(self, body: str) -> Counts:
        """The largest number of executions of each register on any path through `body`."""
        going_on, ended = self._sequence(statements(body))
        return _most(going_on, ended) or {}

    def _calls(self, text: str) -> Counts:
        counts: Counts = {}
        for match in re.finditer(r"\b(\w+)\s*\.\s*execute\s*\(", text):
            register = self._register_of[match.group(1)]
            counts[register] = counts.get(register, 0) + 1
        for match in re.finditer(r"\b(\w+)\s*\.\s*apply\s*\(", text):
            counts = _plus(counts, self._table(match.group(1))) or {}
        for match in re.finditer(r"(?<![\w.])(\w+)\s*\(", text):
            if match.group(1) in self._actions:
                counts = _plus(counts, self._action(match.group(1))) or {}
        return counts

    def _action(self, name: str) -> Counts:
        if name not in self._memo:
            self._memo[name] = self._calls(self._actions[name])
        return self._memo[name]

    def _table(self, name: str) -> Counts:
        most: Counts = {}
        for action in self._tables[name].actions:
            if action in self._actions:
                most = _most(most, self._action(action)) or {}
        return most

    def _sequence(self, body: tuple[Statement, ...]) -> tuple[Counts | None, Counts | None]:
        going_on: Counts | None = {}
        ended: Counts | None = None
        for statement in body:
            if going_on is None:
                break
            through, stopped = self._statement(statement)
            ended = _most(ended, _plus(going_on, stopped))
            going_on = _plus(going_on, through)
        return going_on, ended

    def _statement(self, statement: Statement) -> tuple[Counts | None, Counts | None]:
        if isinstance(statement, Simple):
            calls = self._calls(statement.text)
            return (None, calls) if statement.text == "exit" else (calls, None)
        condition = self._calls(statement.condition)
        then_on, then_ended = self._sequence(statement.then)
        else_on, else_ended = self._sequence(statement.otherwise)
        return _plus(condition, _most(then_on, else_on)), _plus(condition, _most(then_ended, else_ended))
