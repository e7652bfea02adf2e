"""The P4 constants, the Python contract and the protocol document state the same numbers.

p4src/common/constants.p4 is parsed as plain `#define NAME VALUE` lines; every
name must be known here, so a constant added on one side only fails a test.
"""

from __future__ import annotations

import ast
import re
import socket
from pathlib import Path

import pytest

from contracts import protocol

ROOT = Path(__file__).resolve().parents[1]
CONSTANTS_P4 = ROOT / "p4src" / "common" / "constants.p4"
PROTOCOL_MD = ROOT / "docs" / "protocol.md"

_DEFINE = re.compile(r"^\s*#define\s+([A-Z][A-Z0-9_]*)\s+(.+?)\s*(?:/\*.*\*/)?\s*$")
_GUARD = "P4REDUCE_CONSTANTS_P4"
_PARAMETERS = ("VALUES_PER_PACKET", "SLOT_COUNT")  # compile-time parameters: `#ifndef NAME` around them


def _evaluate(expression: str, known: dict[str, int]) -> int:
    """A define's value: a number, or +, -, * and parentheses over numbers and earlier names."""
    tree = ast.parse(expression, mode="eval")

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in known:
            return known[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            left, right = value(node.left), value(node.right)
            return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}[type(node.op)]
        raise ValueError(f"not a constant expression: {expression!r}")

    return value(tree.body)


_TARGET_MACROS = ("__P4REDUCE_SOFTSWITCH__",)  # a default may depend on the target: `#ifdef` one of these


def parse_defines(text: str, target_macros: frozenset[str] = frozenset()) -> dict[str, int]:
    """Value-carrying #defines of a P4 source, as a target predefining `target_macros` reads them.

    `#ifdef`/`#else`/`#endif` on a target macro (_TARGET_MACROS) choose a branch; refuses anything
    else it cannot read."""
    values: dict[str, int] = {}
    skipping: list[bool] = []  # per open target conditional: is this branch left out?
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if words[:1] == ["#ifdef"] and words[1:2] and words[1] in _TARGET_MACROS:
            skipping.append(words[1] not in target_macros)
            continue
        if words[:1] == ["#else"] and skipping:
            skipping[-1] = not skipping[-1]
            continue
        if words[:1] == ["#endif"] and skipping and line.strip() == "#endif":
            skipping.pop()  # a target conditional is the innermost one: nothing nests inside it
            continue
        if any(skipping) or not line.lstrip().startswith("#define"):
            continue
        if line.split()[1:] == [_GUARD]:
            continue
        match = _DEFINE.match(line)
        if match is None:
            raise ValueError(f"constants.p4:{number}: not a `#define NAME NUMBER` line: {line!r}")
        name, literal = match.groups()
        if name in values:
            raise ValueError(f"constants.p4:{number}: {name} defined twice")
        try:
            values[name] = int(literal, 0)
        except ValueError:
            try:
                values[name] = _evaluate(literal, values)
            except (SyntaxError, ValueError):
                raise ValueError(
                    f"constants.p4:{number}: not a `#define NAME NUMBER` line: {line!r}"
                ) from None
    return values


@pytest.fixture(scope="module")
def p4_constants() -> dict[str, int]:
    return parse_defines(CONSTANTS_P4.read_text())


def contract_values() -> dict[str, int]:
    """Every contract constant as the P4 side must spell it (defaults for the compile-time parameters)."""
    k, slots = protocol.DEFAULT_VALUES_PER_PACKET, protocol.DEFAULT_SLOT_COUNT
    values = {
        "PROTOCOL_VERSION": protocol.PROTOCOL_VERSION,
        "UDP_PORT": protocol.UDP_PORT,
        "VALUES_PER_PACKET": k,
        "SLOT_COUNT": slots,
        "HEADER_BYTES": protocol.HEADER_BYTES,
        "PAYLOAD_BYTES": protocol.payload_bytes(k),
        "MAX_WORKERS": protocol.MAX_WORKERS,
        "MAX_JOBS": protocol.MAX_JOBS,
        "FLOOD_GROUP": protocol.FLOOD_GROUP,
        "RESULT_TTL": protocol.RESULT_TTL,
        "EXP_BIAS": protocol.EXP_BIAS,
        "EXP_NONE": protocol.EXP_NONE,
        "EXP_NONFINITE": protocol.EXP_NONFINITE,
        "USE_BITS": protocol.USE_BITS,
        "ECN_MASK": protocol.ECN_MASK,
        "ECN_CE": protocol.ECN_CE,
        "DROP_REASON_COUNT": protocol.DROP_REASON_COUNT,
        # derived sizes
        "SLOT_REGISTER_SIZE": 2 * slots,
        "UDP_AGG_LENGTH": 8 + protocol.payload_bytes(k),
        "IPV4_AGG_LENGTH": 20 + 8 + protocol.payload_bytes(k),
        "UDP_NOTICE_LENGTH": 8 + protocol.HEADER_BYTES,
        "IPV4_NOTICE_LENGTH": 20 + 8 + protocol.HEADER_BYTES,
        # standard numbers, from the socket module's own tables where it has them
        "ETHERTYPE_IPV4": 0x0800,
        "ETHERTYPE_ARP": 0x0806,
        "IP_PROTO_UDP": socket.IPPROTO_UDP,
        "ARP_HTYPE_ETHERNET": 1,
        "ARP_OPER_REQUEST": 1,
        "ARP_OPER_REPLY": 2,
    }
    values.update({f"MSG_{m.name}": m.value for m in protocol.MsgType})
    values.update({f"DROP_{r.name}": r.value for r in protocol.DropReason})
    return values


# Names that are not wire contract: program limits stated in docs/protocol.md,
# and the internal packet kinds that ingress hands to egress.
LIMITS = ("JOB_TABLE_SIZE", "ADDRESS_TABLE_SIZE", "L2_TABLE_SIZE", "PORT_TABLE_SIZE")
PACKET_KINDS = ("PKT_KIND_FORWARD", "PKT_KIND_FLOOD", "PKT_KIND_JOB", "PKT_KIND_REPLY", "PKT_KIND_UP")


def test_every_p4_constant_is_known(p4_constants: dict[str, int]) -> None:
    known = set(contract_values()) | set(LIMITS) | set(PACKET_KINDS)
    assert sorted(set(p4_constants) - known) == [], "constants.p4 defines names this test does not check"
    assert sorted(known - set(p4_constants)) == [], "constants.p4 lacks contract constants"


@pytest.mark.parametrize("name", sorted(contract_values()))
def test_p4_constant_equals_contract(p4_constants: dict[str, int], name: str) -> None:
    assert p4_constants[name] == contract_values()[name], f"{name}: P4 and contracts/protocol.py disagree"


@pytest.mark.parametrize("k", protocol.SUPPORTED_VALUES_PER_PACKET)
def test_payload_size_follows_from_k(k: int) -> None:
    assert protocol.payload_bytes(k) == protocol.HEADER_BYTES + 4 * k
    assert protocol.packet_dtype(k).itemsize == protocol.payload_bytes(k)


def test_the_default_k_follows_the_target() -> None:
    """bmv2 (p4c) and Tofino keep K = 64; the embedded switch's target gets its fastest K."""
    text = CONSTANTS_P4.read_text()
    embedded = parse_defines(text, frozenset({"__P4REDUCE_SOFTSWITCH__"}))
    assert parse_defines(text)["VALUES_PER_PACKET"] == protocol.DEFAULT_VALUES_PER_PACKET == 64
    assert embedded["VALUES_PER_PACKET"] == protocol.EMBEDDED_DEFAULT_VALUES_PER_PACKET == 1024
    assert embedded["PAYLOAD_BYTES"] == protocol.payload_bytes(1024)


def test_compile_time_parameters_can_be_overridden() -> None:
    text = CONSTANTS_P4.read_text()
    for name in _PARAMETERS:
        # `#ifndef NAME`, then at most a target conditional (its #ifdef and a comment), then the #define
        guarded = rf"#ifndef {name}\n(#ifdef __\w+__\n(/\*.*?\*/\n)?)?#define {name} "
        assert re.search(guarded, text, re.S), f"{name} cannot be set with -D{name}=..."
        first, every = (
            text.index(f"#ifndef {name}\n"),
            [m.start() for m in re.finditer(f"#define {name} ", text)],
        )
        assert all(first < at for at in every), f"a #define {name} outside its #ifndef"


def test_seq_holds_call_number_and_use() -> None:
    seq = protocol.seq_of(protocol.CALL_NUMBERS + 3, 5)  # call numbers wrap
    assert seq == (3 << protocol.USE_BITS) | 5
    assert protocol.call_number_of(seq) == 3


def test_drop_reasons_fit_the_counter_arrays() -> None:
    assert max(protocol.DropReason) < protocol.DROP_REASON_COUNT
    assert min(protocol.DropReason) >= 1, "index 0 is reserved: an unset reason must not look like a drop"


def test_packet_kinds_are_distinct(p4_constants: dict[str, int]) -> None:
    kinds = [p4_constants[name] for name in PACKET_KINDS]
    assert len(set(kinds)) == len(kinds)
    assert p4_constants["PKT_KIND_FORWARD"] == 0, "metadata starts zeroed, so plain forwarding must be kind 0"


def _markdown_table(text: str, header: str) -> list[list[str]]:
    """Rows (cells stripped, backticks removed) of the first table whose header row starts with `header`."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("|") and line.replace(" ", "").startswith(header.replace(" ", "")):
            rows = []
            for row in lines[start + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip().strip("`") for cell in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"docs/protocol.md has no table starting with {header!r}")


def test_documented_drop_reasons_match_contract() -> None:
    rows = _markdown_table(PROTOCOL_MD.read_text(), "| index | name | when |")
    documented = {row[1]: int(row[0]) for row in rows}
    assert documented == {r.name: r.value for r in protocol.DropReason}


def test_documented_limits_match_p4(p4_constants: dict[str, int]) -> None:
    rows = _markdown_table(PROTOCOL_MD.read_text(), "| what | limit | why |")
    limits = {row[0]: row[1] for row in rows}
    assert str(p4_constants["JOB_TABLE_SIZE"]) in limits["job table entries"]
    assert str(protocol.DEFAULT_SLOT_COUNT) in limits["slots per set (switch-wide pool)"]
    assert str(protocol.MAX_WORKERS) in limits["workers per job"]
    assert str(protocol.MAX_JOBS) in limits["jobs"]


def test_documented_port_and_k_match_contract() -> None:
    text = PROTOCOL_MD.read_text()
    k = protocol.DEFAULT_VALUES_PER_PACKET
    assert f"**{protocol.UDP_PORT}**" in text
    # per row of *Values per packet*: the macros a compiler predefines, and the default K they give
    rows = _markdown_table(text, "| compiler and target | predefines | default K |")
    defaults = {frozenset(re.findall(r"__\w+__", row[1])): row[2] for row in rows}
    from softswitch.targets import TARGETS  # what p4reduce-p4c's targets really predefine

    assert defaults == {
        frozenset(TARGETS["softswitch"].defines): f"**K = {protocol.EMBEDDED_DEFAULT_VALUES_PER_PACKET}**",
        frozenset(TARGETS["bmv2"].defines): f"**K = {k}**",
        frozenset({"__TARGET_TOFINO__"}): f"**K = {k}**",
    }, "docs/protocol.md, *Values per packet*: each target's default K"
    for macros, documented in defaults.items():  # and constants.p4 gives each of them that K
        chosen = parse_defines(CONSTANTS_P4.read_text(), frozenset(macros))["VALUES_PER_PACKET"]
        assert documented == f"**K = {chosen}**", (sorted(macros), documented)
    assert f"`24 + 4*K = {protocol.payload_bytes(k)}`" in text
    assert f"{protocol.HEADER_BYTES}-byte header" in text


def test_parse_defines_rejects_unreadable_lines() -> None:
    assert parse_defines("#define A 2\n#define B (A * 1024 + 1)\n") == {"A": 2, "B": 2049}
    with pytest.raises(ValueError, match="not a `#define NAME NUMBER`"):
        parse_defines("#define SLOT_COUNT (2 << 10)\n")
    with pytest.raises(ValueError, match="not a `#define NAME NUMBER`"):
        parse_defines("#define SLOT_COUNT (UNKNOWN * 2)\n")
    with pytest.raises(ValueError, match="defined twice"):
        parse_defines("#define A 1\n#define A 2\n")
