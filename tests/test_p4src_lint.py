"""Static checks of the P4 sources that need no P4 compiler.

p4c is not installable here, so these catch what a typo would otherwise hide
until someone runs p4c: unbalanced blocks, references to header fields,
metadata fields, tables, externs and actions that are not declared, and
v1model standard_metadata fields that do not exist. The sources are run
through a C preprocessor (pcpp) first, exactly as p4c's front end would.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pcpp
import pytest

P4SRC = Path(__file__).resolve().parents[1] / "p4src"
V1MODEL = P4SRC / "v1model" / "p4reduce.p4"
TNA = P4SRC / "tna" / "p4reduce.p4"

# The v1model standard_metadata_t fields (p4c's p4include/v1model.p4) this program may use.
STANDARD_METADATA = {
    "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "mcast_grp",
    "egress_rid", "checksum_error", "parser_error",
}  # fmt: skip


class _Preprocessor(pcpp.Preprocessor):  # type: ignore[misc]
    """Leaves the architecture's system includes out; fails on anything else it cannot find."""

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:
        if is_system_include and includepath in {"core.p4", "v1model.p4", "tna.p4"}:
            raise pcpp.OutputDirective(pcpp.Action.IgnoreAndRemove)
        raise AssertionError(f"include not found: {includepath}")

    def on_error(self, file: str, line: int, msg: str) -> None:
        raise AssertionError(f"{file}:{line}: {msg}")


def preprocess(path: Path) -> str:
    pre = _Preprocessor()
    pre.line_directive = None
    pre.parse(path.read_text(), str(path))
    out = io.StringIO()
    pre.write(out)
    text = re.sub(r"/\*.*?\*/", " ", out.getvalue(), flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared_fields(text: str, kind: str, name: str) -> list[tuple[str, str]]:
    """(type, field) pairs of `header name { ... }` or `struct name { ... }`."""
    body = re.search(rf"\b{kind}\s+{name}\s*\{{(.*?)\}}", text, flags=re.S)
    assert body is not None, f"{kind} {name} not found"
    return re.findall(r"([\w<>]+)\s+(\w+)\s*;", body.group(1))


@pytest.fixture(scope="module", params=[V1MODEL, TNA], ids=["v1model", "tna"])
def program(request: pytest.FixtureRequest) -> tuple[Path, str]:
    return request.param, preprocess(request.param)


def test_blocks_are_balanced(program: tuple[Path, str]) -> None:
    _, text = program
    for open_, close in ("{}", "()", "[]"):
        depth = 0
        for char in text:
            depth += (char == open_) - (char == close)
            assert depth >= 0, f"unmatched {close}"
        assert depth == 0, f"unclosed {open_}"


def test_header_field_references_exist(program: tuple[Path, str]) -> None:
    path, text = program
    struct = "tna_headers_t" if path == TNA else "headers_t"
    instances = dict((name, type_) for type_, name in declared_fields(text, "struct", struct))
    fields = {
        name: {f for _, f in declared_fields(text, "header", type_)} for name, type_ in instances.items()
    }
    for instance, field in set(re.findall(r"\bhdr\.(\w+)\.(\w+)", text)):
        assert instance in fields, f"hdr.{instance} is not in {struct}"
        if field in {"isValid", "setValid", "setInvalid"}:
            continue
        assert field in fields[instance], f"hdr.{instance}.{field} is not a field of {instances[instance]}"


def test_metadata_references_exist(program: tuple[Path, str]) -> None:
    path, text = program
    variable, struct = ("ig_md", "ig_metadata_t") if path == TNA else ("meta", "metadata_t")
    fields = {f for _, f in declared_fields(text, "struct", struct)}
    used = set(re.findall(rf"\b{variable}\.(\w+)", text))
    assert used <= fields, f"undeclared {struct} fields: {sorted(used - fields)}"
    assert fields <= used, f"unused {struct} fields: {sorted(fields - used)}"


def test_standard_metadata_fields_exist() -> None:
    used = set(re.findall(r"\bstandard_metadata\.(\w+)", preprocess(V1MODEL)))
    assert used <= STANDARD_METADATA, sorted(used - STANDARD_METADATA)


def test_applied_and_called_objects_are_declared(program: tuple[Path, str]) -> None:
    _, text = program
    tables = set(re.findall(r"\btable\s+(\w+)\s*\{", text))
    for name in set(re.findall(r"\b(\w+)\.apply\(\)", text)):
        assert name in tables, f"{name}.apply() but no table {name}"
    externs = set(re.findall(r"\b(?:register|counter|Register|Counter)\b[^;{\n]*\)\s+(\w+)\s*;", text))
    externs |= set(re.findall(r"\bRegisterAction<[^\n]*?>\s*\(\w+\)\s+(\w+)\s*=", text))
    for name in set(re.findall(r"\b(\w+)\.(?:read|write|count|execute)\(", text)):
        assert name in externs, f"{name} is used as an extern but not declared"
    actions = set(re.findall(r"\baction\s+(\w+)\s*\(", text)) | {"NoAction"}
    for body in re.findall(r"\bactions\s*=\s*\{([^}]*)\}", text):
        for action in filter(None, (a.strip() for a in body.split(";"))):
            assert action in actions, f"table lists undeclared action {action}"


def test_every_value_register_is_unrolled(program: tuple[Path, str]) -> None:
    """Every value register the program declares is stored, added and read through its header field."""
    _, text = program
    registers = sorted(set(re.findall(r"\bvalue([0-9a-f]{2})\b(?!\w)", text)))
    assert len(registers) in (32, 64, 128, 256), f"{len(registers)} value registers"
    for index in registers:
        assert re.search(rf"\bvalue{index}\s*;", text), f"value{index} not declared"
        field = f"hdr.vals.v{index}"
        assert text.count(field) >= 3, f"{field} is not stored, added and read"


def test_the_v1model_program_carries_the_default_k() -> None:
    from contracts.protocol import DEFAULT_VALUES_PER_PACKET

    text = preprocess(V1MODEL)
    assert len(set(re.findall(r"\bvalue([0-9a-f]{2})\s*;", text))) == DEFAULT_VALUES_PER_PACKET
