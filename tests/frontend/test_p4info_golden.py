"""P4Info identical to p4c's, entity kind by entity kind, in p4c's order.

`p4info_entities.p4` holds one of every kind the embedded switch accepts;
`p4info_entities.p4info.txtpb` is its P4Info as p4c's serializer rules give
it (reviewed rule by rule, see softswitch/p4info/__init__.py): NoAction joins
a table without default_action as @defaultonly, actions in p4c's order (the
top-level ones a control uses first), an action only called from another
action and the actions of a never-applied table absent, `h.$valid$` and a
field's @name in match field names, @id on controller header fields,
direct resources listed with their table only, `is_const_table`,
`idle_timeout_behavior`, `doc` from @brief, serializable enums in type_info.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info, to_text

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
