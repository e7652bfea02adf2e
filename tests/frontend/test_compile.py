"""The front end compiles real programs into a typed IR that survives the device-config round trip.

Acceptance: our own p4src/v1model/p4reduce.p4 (includes + macros) compiles;
a small program exercising the general P4_16 subset (lpm/ternary keys,
const entries, switch on action_run, slices, ++, shifts, saturating ops,
int<W>, setValid/setInvalid, select masks and ranges, direct_counter,
hash) compiles; a device config that is not ours is refused clearly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from softswitch import ir, program
from softswitch.frontend import compile_file

ROOT = Path(__file__).resolve().parents[2]
P4REDUCE = ROOT / "p4src" / "v1model" / "p4reduce.p4"
GENERAL = Path(__file__).parent / "general_features.p4"


@pytest.fixture(scope="module")
def p4reduce() -> ir.Program:
    start = time.perf_counter()
    prog = compile_file(P4REDUCE)
    print(f"compiled {P4REDUCE.name} in {time.perf_counter() - start:.2f} s")
    return prog


def test_p4reduce_binds_the_six_v1model_blocks(p4reduce: ir.Program) -> None:
    assert p4reduce.arch == "v1model"
    assert [b.param for b in p4reduce.main.blocks] == ["p", "vr", "ig", "eg", "ck", "dep"]
    assert isinstance(p4reduce.block("p"), ir.ParserDecl)
    assert isinstance(p4reduce.block("ig"), ir.ControlDecl)


def test_p4reduce_names_are_fully_qualified(p4reduce: ir.Program) -> None:
    ingress = p4reduce.block("ig")
    assert ingress.tables, "ingress has tables"
    for table in ingress.tables:
        assert table.fq_name == f"{ingress.name}.{table.name}"
    for action in ingress.actions:
        assert action.fq_name == f"{ingress.name}.{action.name}"


def test_general_subset_compiles_with_typed_tables() -> None:
    prog = compile_file(GENERAL)
    table = prog.control("I").tables[0]
    assert table.fq_name == "I.t"
    assert [k.match_kind for k in table.keys] == ["lpm", "ternary"]
    assert [k.name for k in table.keys] == ["hdr.h.a", "hdr.h.b"]
    assert table.entries_const and len(table.entries) == 1
    assert table.direct_counter == "I.dc"
    states = {s.name for s in prog.parser("P").states}
    assert {"start", "parse_g"} <= states


def test_device_config_round_trip_is_lossless(p4reduce: ir.Program, tmp_path: Path) -> None:
    path = tmp_path / "p4reduce.json"
    program.save(p4reduce, path)
    assert program.load(path) == p4reduce


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x01garbage", "not JSON"),
        (b'{"nodes": [], "pipelines": []}', "bmv2 JSON"),
        (b'{"format": "p4reduce-softswitch-program", "version": 999, "program": {}}', "version 999"),
        (b'{"format": "p4reduce-softswitch-program", "version": 1, "program": 5}', "corrupt"),
    ],
    ids=["binary", "bmv2", "future-version", "corrupt"],
)
def test_foreign_device_configs_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(program.ProgramFormatError, match=message):
        program.loads(data)


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda text: text.replace('"_":"HeaderDecl"', '"_":"Nonesuch"', 1), "unknown IR node 'Nonesuch'"),
        (lambda text: text.replace('"arch":"v1model"', '"arch":"v1model","colour":1', 1), "bad Program node"),
        (lambda text: text.replace('"_":"HeaderDecl",', "", 1), "unknown IR node None"),  # untagged in a node
        (lambda text: text.replace('"version":1', '"version":2', 1).replace('"_":"HeaderDecl"', '"_":"H"'),
         "version 2"),  # a newer file whose nodes this reader lacks is named newer, not corrupt
    ],  # fmt: skip
    ids=["unknown-node", "unknown-field", "untagged-object", "newer-with-new-nodes"],
)
def test_a_compiled_program_with_a_spoiled_node_is_refused_by_name(
    p4reduce: ir.Program, spoil: Callable[[str], str], message: str
) -> None:
    text = program.dumps(p4reduce).decode()
    assert program.loads(text) == p4reduce
    with pytest.raises(program.ProgramFormatError, match=message):
        program.loads(spoil(text))


def test_defines_reach_the_preprocessor(tmp_path: Path) -> None:
    path = tmp_path / "sized.p4"
    path.write_text(
        GENERAL.read_text().replace(
            "default_action = NoAction();", "default_action = NoAction(); size = TSIZE;"
        )
    )
    prog = compile_file(path, defines={"TSIZE": "77"})
    assert prog.control("I").tables[0].size == 77


@pytest.mark.parametrize("name", ["unions", "varbit"])
def test_device_config_round_trip_keeps_unions_and_varbit(name: str) -> None:
    """`StructDecl.union`, `VarbitType` and `Extract.size` survive the device config."""
    checked = compile_file(Path(__file__).parents[1] / "executor" / f"{name}.p4")
    assert program.loads(program.dumps(checked)) == checked
    assert any(s.union for s in checked.structs) or any(
        isinstance(f.type, ir.VarbitType) for h in checked.headers for f in h.fields
    )
