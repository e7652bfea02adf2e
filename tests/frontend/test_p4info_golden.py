"""P4Info identical to p4c's, entity kind by entity kind, in p4c's order.

`p4info_entities.p4` holds one of every kind the embedded switch accepts;
`p4info_entities.p4info.txtpb` is its P4Info as p4c's serializer rules give
it (reviewed rule by rule, see softswitch/p4info/__init__.py): NoAction joins
a table without default_action as @defaultonly, actions in p4c's order (the
top-level ones a control uses first), an action only called from another
action and the actions of a never-applied table absent, `h.$valid$` and a
field's @name in match field names, @id on controller header fields,
direct resources listed with their table only (a top-level, annotated direct meter too),
`is_const_table`, `idle_timeout_behavior`, `doc` from @brief, serializable enums in type_info, one
digest per struct type in order of first call (bit and int members in type_info.structs).

The builder was also compared with p4c's own published P4Info of its test programs that use meters,
direct meters or digests (p4lang/p4c testdata, not copied here): identical for every one the embedded
switch accepts; `test_digest_ids_are_p4cs` keeps the ids p4c gave three digests.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info, to_text
from softswitch.p4info import ids as p4ids

HERE = Path(__file__).parent


def test_every_entity_kind_matches_the_golden_p4info() -> None:
    info = build_p4info(compile_file(HERE / "p4info_entities.p4"))
    assert to_text(info) == (HERE / "p4info_entities.p4info.txtpb").read_text()


def test_the_order_is_p4cs_not_by_id() -> None:
    info = build_p4info(compile_file(HERE / "p4info_entities.p4"))
    assert [t.preamble.name for t in info.tables] == ["I.fwd", "I.fixed"]
    assert [a.preamble.name for a in info.actions] == ["NoAction", "I.forward", "I.drop", "I.direct_only"]


def test_type_info_is_absent_when_p4c_never_touches_it(tmp_path: Path) -> None:
    source = (HERE / "skeleton.p4.in").read_text().replace("BODY", "")
    trivial = source.replace("    action a(bit<8> x) { hdr.h.a = x; }\n", "").replace(
        "    table t { key = { hdr.h.a: exact; } actions = { a; NoAction; } default_action = NoAction(); }\n",
        "",
    )
    path = tmp_path / "trivial.p4"
    path.write_text(trivial)
    info = build_p4info(compile_file(path))
    assert not info.tables and not info.actions
    assert not info.HasField("type_info")
    assert "type_info" not in to_text(info)


def test_every_entity_kind_the_switch_supports_is_in_the_golden_program() -> None:
    info = build_p4info(compile_file(HERE / "p4info_entities.p4"))
    kinds = [f.name for f, _ in info.ListFields()]
    assert kinds == [
        "pkg_info",
        "tables",
        "actions",
        "counters",
        "direct_counters",
        "meters",
        "direct_meters",
        "controller_packet_metadata",
        "registers",
        "digests",
        "type_info",
    ]
    fixed = next(t for t in info.tables if t.preamble.name == "I.fixed")
    assert list(fixed.direct_resource_ids) == [info.direct_meters[1].preamble.id]


def test_digest_ids_are_p4cs() -> None:
    # p4c's v1model-digest-containing-ser-enum.p4: three digests named after their struct types.
    names = ["test_digest_t", "test_digest2_t", "test_digest3_t"]
    ids = p4ids.assign_ids([(p4ids.DIGEST, name, None) for name in names])
    assert [ids[(p4ids.DIGEST, n)] for n in names] == [387015589, 392468736, 399106899]
