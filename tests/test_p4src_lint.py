"""Static checks of the P4 sources that need no P4 compiler.

p4c is not installable here, so these catch what a typo would otherwise hide
until someone runs p4c: unbalanced blocks, references to header fields,
metadata fields, tables, externs and actions that are not declared, and
v1model standard_metadata fields that do not exist. Each program is read as
each of its compilers would see it after the C preprocessor: the v1model
program, and the TNA program for Tofino 1 and for Tofino 2
(tests/p4src_text.py). The TNA program's own rules are in
tests/test_tna_rules.py, the names the controller relies on in
tests/test_p4runtime_names.py.
"""

from __future__ import annotations

import re

import pytest

from tests.p4src_text import (
    V1MODEL_VARIANT,
    VARIANTS,
    Variant,
    actions_of,
    blocks_of,
    declared_fields,
    declared_registers,
    preprocess,
    register_actions,
    tables_of,
)

# The v1model standard_metadata_t fields (p4c's p4include/v1model.p4) this program may use.
STANDARD_METADATA = {
    "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "mcast_grp",
    "egress_rid", "checksum_error", "parser_error", "enq_qdepth",
}  # fmt: skip


@pytest.fixture(scope="module", params=VARIANTS, ids=[v.name for v in VARIANTS])
def program(request: pytest.FixtureRequest) -> tuple[Variant, str]:
    return request.param, preprocess(request.param)


def test_blocks_are_balanced(program: tuple[Variant, str]) -> None:
    _, text = program
    for open_, close in ("{}", "()", "[]"):
        depth = 0
        for char in text:
            depth += (char == open_) - (char == close)
            assert depth >= 0, f"unmatched {close}"
        assert depth == 0, f"unclosed {open_}"


def test_header_field_references_exist(program: tuple[Variant, str]) -> None:
    variant, text = program
    struct = "tna_headers_t" if variant.is_tna else "headers_t"
    instances = dict((name, type_) for type_, name in declared_fields(text, "struct", struct))
    fields = {
        name: {f for _, f in declared_fields(text, "header", type_)} for name, type_ in instances.items()
    }
    for instance, field in set(re.findall(r"\bhdr\.(\w+)\.(\w+)", text)):
        assert instance in fields, f"hdr.{instance} is not in {struct}"
        if field in {"isValid", "setValid", "setInvalid"}:
            continue
        assert field in fields[instance], f"hdr.{instance}.{field} is not a field of {instances[instance]}"


def test_metadata_references_exist(program: tuple[Variant, str]) -> None:
    variant, text = program
    pairs = (
        [("ig_md", "ig_metadata_t"), ("eg_md", "eg_metadata_t")]
        if variant.is_tna
        else [("meta", "metadata_t")]
    )
    for variable, struct in pairs:
        fields = {f for _, f in declared_fields(text, "struct", struct)}
        used = set(re.findall(rf"\b{variable}\.(\w+)", text))
        assert used <= fields, f"undeclared {struct} fields: {sorted(used - fields)}"
        assert fields <= used, f"unused {struct} fields: {sorted(fields - used)}"


def test_standard_metadata_fields_exist() -> None:
    used = set(re.findall(r"\bstandard_metadata\.(\w+)", preprocess(V1MODEL_VARIANT)))
    assert used <= STANDARD_METADATA, sorted(used - STANDARD_METADATA)


def test_applied_and_called_objects_are_declared(program: tuple[Variant, str]) -> None:
    _, text = program
    tables = {name for body in blocks_of(text, "control").values() for name in tables_of(body)}
    for name in set(re.findall(r"\b(\w+)\.apply\(\)", text)):
        assert name in tables, f"{name}.apply() but no table {name}"
    externs = set(re.findall(r"\b(?:register|counter|Register|Counter)\b[^;{\n]*\)\s+(\w+)\s*;", text))
    externs |= set(register_actions(text))
    for name in set(re.findall(r"\b(\w+)\.(?:read|write|count|execute)\(", text)):
        assert name in externs, f"{name} is used as an extern but not declared"
    for control in blocks_of(text, "control").values():
        actions = set(actions_of(control)) | {"NoAction"}
        for table in tables_of(control).values():
            for action in table.actions:
                assert action in actions, f"table {table.name} lists undeclared action {action}"


def test_register_actions_name_declared_registers(program: tuple[Variant, str]) -> None:
    _, text = program
    registers = declared_registers(text)
    for name, (register, _) in register_actions(text).items():
        assert register in registers, (
            f"RegisterAction {name} acts on {register}, which is not a declared Register"
        )


def test_every_value_is_held_in_a_register(program: tuple[Variant, str]) -> None:
    """Each of the K values is kept in a register (TNA: two per 64-bit cell), stored, added and read."""
    variant, text = program
    fields = sorted(set(re.findall(r"\bhdr\.vals\.v([0-9a-f]{2})\b", text)), key=lambda i: int(i, 16))
    assert len(fields) in (32, 64, 128, 256), f"{len(fields)} value fields"
    assert fields == [f"{i:02x}" for i in range(len(fields))], "value fields are not v00 .. in order"
    registers = declared_registers(text)
    if variant.is_tna:
        held = [f"value{fields[i]}_{fields[i + 1]}" for i in range(0, len(fields), 2)]
    else:
        held = [f"value{index}" for index in fields]
    missing = [name for name in held if name not in registers]
    assert not missing, f"value registers not declared: {missing[:4]}"
    assert len([r for r in registers if r.startswith("value")]) == len(held), "value registers beyond K"
    for index in fields:
        assert text.count(f"hdr.vals.v{index}") >= 3, f"hdr.vals.v{index} is not stored, added and read"


@pytest.mark.parametrize("values_per_packet", [32, 64, 128, 256, 512, 1024])
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_every_k_unrolls(variant: Variant, values_per_packet: int) -> None:
    """-DVALUES_PER_PACKET=K gives K value fields and their registers, for every allowed K."""
    text = preprocess(variant, {"VALUES_PER_PACKET": str(values_per_packet)})
    assert len(set(re.findall(r"\bbit<32>\s+v([0-9a-f]{2,3})\s*;", text))) == values_per_packet
    cells = values_per_packet // 2 if variant.is_tna else values_per_packet
    assert len([r for r in declared_registers(text) if r.startswith("value")]) == cells


def test_the_v1model_program_carries_its_targets_default_k() -> None:
    """p4c (bmv2) reads K = 64; p4reduce-p4c's default target predefines its macro and reads 1024."""
    from contracts.protocol import DEFAULT_VALUES_PER_PACKET, EMBEDDED_DEFAULT_VALUES_PER_PACKET
    from softswitch.frontend.preprocess import PREDEFINED  # what p4reduce-p4c's default target predefines

    for extra, k in (({}, DEFAULT_VALUES_PER_PACKET), (PREDEFINED, EMBEDDED_DEFAULT_VALUES_PER_PACKET)):
        text = preprocess(V1MODEL_VARIANT, extra)
        assert len(set(re.findall(r"\bvalue([0-9a-f]{2,3})\s*;", text))) == k
