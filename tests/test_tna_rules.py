"""The rules the Tofino compiler imposes on p4src/tna/p4reduce.p4, checked without it (issue 21).

No Tofino compiler runs here (tests/test_tna_compile.py runs it where it exists), so these read
the preprocessed program, for Tofino 1 and for Tofino 2, and hold it to the rules docs/p4src.md
lists under "What the Tofino compiler requires": one access per register on every path, one ALU
operation at one width per action statement, initialised parser metadata, and what one
RegisterAction can do on each chip.
"""

from __future__ import annotations

import re

import pytest

from tests.p4src_text import (
    TNA_VARIANTS,
    V1MODEL_VARIANT,
    RegisterAccesses,
    Variant,
    actions_of,
    apply_body,
    blocks_of,
    counters_of,
    declared_fields,
    declared_registers,
    parser_state,
    preprocess,
    register_actions,
    tables_of,
    without_register_actions,
)

# What one stateful ALU offers (bf-p4c's device specs for Tofino and Tofino 2).
COMPARATORS = {1: 2, 2: 4}
OUTPUT_WORDS = {1: 1, 2: 4}
ACTIONS_PER_REGISTER = 4


@pytest.fixture(scope="module", params=TNA_VARIANTS, ids=[v.name for v in TNA_VARIANTS])
def tna(request: pytest.FixtureRequest) -> tuple[Variant, str]:
    return request.param, preprocess(request.param)


@pytest.mark.parametrize("control", ["MyIngress", "MyEgress"])
def test_each_register_is_accessed_at_most_once_per_path(tna: tuple[Variant, str], control: str) -> None:
    """A register lives in one stage: a packet (each pass of it) can execute it once."""
    _, text = tna
    body = blocks_of(text, "control")[control]
    accesses = RegisterAccesses(text, body).per_path(apply_body(body))
    assert {r: n for r, n in accesses.items() if n > 1} == {}


def test_every_register_is_accessed(tna: tuple[Variant, str]) -> None:
    """The path counting sees every register, so the check above is not vacuous."""
    _, text = tna
    body = blocks_of(text, "control")["MyIngress"]
    accesses = RegisterAccesses(text, body).per_path(apply_body(body))
    assert set(accesses) == declared_registers(text)
    assert set(accesses.values()) == {1}


def test_the_path_count_sees_a_second_access() -> None:
    """The counter itself: two executes of one register on a path are two, in branches one."""
    text = """
    Register<bit<32>, bit<32>>(4) r;
    RegisterAction<bit<32>, bit<32>, bit<32>>(r) a = { void apply(inout bit<32> v) { v = 1; } };
    RegisterAction<bit<32>, bit<32>, bit<32>>(r) b = { void apply(inout bit<32> v) { v = 2; } };
    """
    control = text + "action both() { a.execute(0); } table t { actions = { both; NoAction; } }"
    counter = RegisterAccesses(text, control)
    assert counter.per_path("if (x == 1) { a.execute(0); } else { b.execute(0); }") == {"r": 1}
    assert counter.per_path("if (x == 1) { a.execute(0); exit; } b.execute(0);") == {"r": 1}
    assert counter.per_path("a.execute(0); if (x == 1) { b.execute(0); }") == {"r": 2}
    assert counter.per_path("t.apply(); b.execute(0);") == {"r": 2}


# TNA: the tree child role's awaiting flag is a value of remaining (AWAITING, what a use completed below a
# parent holds until the parent's RESULT settles it): one access in remaining's stage, no stateful ALU more
# (docs/p4src.md, *How the TNA program differs*).
FOLDED_REGISTERS = {"awaiting": "remaining"}


def test_the_tna_program_keeps_the_v1model_per_copy_state(tna: tuple[Variant, str]) -> None:
    """Every register of the v1model program (congested included) is kept, awaiting inside remaining."""
    _, text = tna
    v1model = {r for r in declared_registers(preprocess(V1MODEL_VARIANT)) if not r.startswith("value")}
    assert v1model - set(FOLDED_REGISTERS) - declared_registers(text) == set()


def test_awaiting_is_kept_in_remaining(tna: tuple[Variant, str]) -> None:
    """A use completing below a parent stores the job's mark (set_upstream's), and one action settles it."""
    _, text = tna
    bodies = [body for register, body in register_actions(text).values() if register == "remaining"]
    marks = [body for body in bodies if re.search(r"\br\s*=\s*ig_md\.up_mark\s*;", body)]
    settles = [
        body for body in bodies if re.search(r"if\s*\(\s*r\s*==\s*0x80\s*\)\s*\{\s*r\s*=\s*0\s*;", body)
    ]
    assert len(marks) == 2, "start (a single member) and count (the last) complete a use"
    assert len(settles) == 1
    assert re.search(
        r"ig_md\.up_mark\s*=\s*AWAITING|ig_md\.up_mark\s*=\s*0x80",
        actions_of(blocks_of(text, "control")["MyIngress"])["set_upstream"][1],
    )


def test_register_actions_fit_a_stateful_alu(tna: tuple[Variant, str]) -> None:
    """Comparators, output words and RegisterActions per register, as one stateful ALU allows."""
    variant, text = tna
    per_register: dict[str, int] = {}
    for name, (register, body) in register_actions(text).items():
        per_register[register] = per_register.get(register, 0) + 1
        signature = re.search(r"\bvoid\s+apply\s*\(([^)]*)\)", body)
        assert signature, f"{name} has no apply function"
        outputs = len(re.findall(r"\bout\b", signature.group(1)))
        assert outputs <= OUTPUT_WORDS[variant.tofino], f"{name}: {outputs} outputs"
        comparisons = {
            re.sub(r"\s+", "", atom).replace("!=", "==")
            for condition in re.findall(r"\bif\s*\((.*?)\)\s*\{", body)
            for atom in re.split(r"&&|\|\|", condition)
        }
        assert len(comparisons) <= COMPARATORS[variant.tofino], f"{name}: comparisons {sorted(comparisons)}"
    assert max(per_register.values()) <= ACTIONS_PER_REGISTER, per_register


def test_a_pair_register_action_has_one_output_source_on_tofino_1() -> None:
    """Tofino 1: a 64-bit cell's action outputs one half, or the constant 1 under a predicate."""
    text = preprocess(TNA_VARIANTS[0])
    pairs = {
        name
        for name in declared_registers(text)
        if re.search(rf"\bRegister<pair_t,[^;]*\)\s+{name}\s*;", text)
    }
    for name, (register, body) in register_actions(text).items():
        if register not in pairs:
            continue
        out = re.search(r"\bout\s+[\w<>]+\s+(\w+)", body)
        if out is None:
            continue
        sources = {s.strip() for s in re.findall(rf"(?<![\w.]){out.group(1)}\s*=\s*([^;]+);", body)} - {"0"}
        assert len(sources) == 1, f"{name}: outputs {sorted(sources)}"
        (source,) = sources
        assert re.fullmatch(r"\w+\.(lo|hi)|1", source), f"{name}: outputs {source}, neither a half nor 1"


def test_issue_21_casts_only_widen_plain_copies(tna: tuple[Variant, str]) -> None:
    """No cast-widened operand inside arithmetic (bf-p4c: `0 ++ x` is not an ALU operation)."""
    _, text = tna
    actions = without_register_actions(text)
    assert "++" not in actions, "concatenation in an action"
    for match in re.finditer(r"\((?:bit|int)<\d+>\)", actions):
        line = actions[actions.rfind("\n", 0, match.start()) + 1 : actions.find("\n", match.end())]
        assert re.fullmatch(r"\s*[\w.]+\s*=\s*\(bit<\d+>\)\s*[\w.]+(\[\d+:\d+\])?\s*;\s*", line), (
            f"a cast that is not a plain widening copy: {line.strip()}"
        )


@pytest.mark.parametrize(("parser", "variable", "struct"), [
    ("IngressParser", "ig_md", "ig_metadata_t"),
    ("EgressParser", "eg_md", "eg_metadata_t"),
])  # fmt: skip
def test_issue_21_parser_initialises_every_metadata_field(
    tna: tuple[Variant, str], parser: str, variable: str, struct: str
) -> None:
    _, text = tna
    start = parser_state(blocks_of(text, "parser")[parser], "start")
    assigned = set(re.findall(rf"\b{variable}\.(\w+)\s*=", start))
    fields = {name for _, name in declared_fields(text, "struct", struct)}
    assert fields - assigned == set(), f"{parser} leaves {sorted(fields - assigned)} unset in state start"


def test_a_resubmitted_packet_carries_exactly_the_port_metadata_size(tna: tuple[Variant, str]) -> None:
    """TNA passes 64 bits of resubmit data, in place of the port metadata."""
    _, text = tna
    widths = [int(w) for w, _ in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", _header(text, "resubmit_h"))]
    assert sum(widths) == 64


def test_tofino_1_recirculates_and_tofino_2_does_not() -> None:
    """The value and harvest passes exist only where a RegisterAction returns one word."""
    one, two = (preprocess(v) for v in TNA_VARIANTS)
    assert "parse_recirc" in one and "bypass_egress" in one
    assert "parse_recirc" not in two and "bypass_egress" not in two


def _header(text: str, name: str) -> str:
    match = re.search(rf"\bheader\s+{name}\s*\{{([^}}]*)\}}", text)
    assert match, f"header {name} not found"
    return match.group(1)


@pytest.mark.parametrize("control", ["MyIngress", "MyEgress"])
def test_each_counter_is_counted_at_one_place(tna: tuple[Variant, str], control: str) -> None:
    """A counter lives in one stage: it is counted by the actions of one table, or by one direct call."""
    _, text = tna
    body = blocks_of(text, "control")[control]
    actions = actions_of(body)
    tables = tables_of(body)
    for counter in counters_of(body):
        counting = {name for name, (_, code) in actions.items() if f"{counter}.count(" in code}
        direct = len(re.findall(rf"\b{counter}\.count\(", apply_body(body)))
        sites = {t.name for t in tables.values() if counting & set(t.actions)}
        called = [a for a in counting if re.search(rf"(?<![\w.]){a}\s*\(", apply_body(body))]
        assert len(sites) + direct + len(called) == 1, (
            f"{counter}: tables {sorted(sites)}, {direct} direct counts, called actions {called}"
        )


def test_no_exit_in_the_controls(tna: tuple[Variant, str]) -> None:
    """Without `exit` the counting at the end of a pass is always reached (bf-p4c turns exit into flags)."""
    _, text = tna
    for name, body in blocks_of(text, "control").items():
        assert not re.search(r"\bexit\s*;", body), f"exit in {name}"


@pytest.mark.parametrize("control", ["MyIngress", "MyEgress"])
def test_each_table_is_applied_in_one_place(tna: tuple[Variant, str], control: str) -> None:
    """A table is one place in a Tofino pipeline, as in a bmv2 one (issue 39: p4c's bmv2 back end refused
    the v1model program for a table applied twice); the TNA program keeps every table to one apply."""
    _, text = tna
    body = blocks_of(text, "control")[control]
    applied = re.findall(r"\b(\w+)\.apply\s*\(", apply_body(body))
    assert set(applied) <= set(tables_of(body)), "an apply of something that is not a table of the control"
    assert {t: applied.count(t) for t in set(applied) if applied.count(t) > 1} == {}
    if control == "MyIngress":
        assert len(applied) >= 10  # not vacuous: the ingress tables are seen
