"""Both P4 programs offer the controller the same P4Runtime names, keys, parameters and widths.

The controller resolves every table, key, action, parameter and counter by its P4Info name and
encodes each parameter by its P4Info width (controller/tables/). One controller serves the
v1model program and the TNA program, for Tofino 1 and Tofino 2, only if what the controller can
see is the same in all three: the tables that are not @hidden, their keys, the actions they list
with their parameters' names and widths, the counters, and job_table's annotations (K and the
slot count). Registers are the data plane's own (docs/protocol.md) and differ by design.
"""

from __future__ import annotations

import re

import pytest

from tests.p4src_text import (
    TNA_VARIANTS,
    V1MODEL_VARIANT,
    Variant,
    actions_of,
    blocks_of,
    counters_of,
    preprocess,
    tables_of,
)

CONTROLS = ("MyIngress", "MyEgress")


def controller_view(variant: Variant, extra: dict[str, str] | None = None) -> dict[str, object]:
    """What P4Info tells the controller: qualified names with keys, actions, parameters, counters."""
    text = preprocess(variant, extra)
    controls = blocks_of(text, "control")
    tables: dict[str, object] = {}
    actions: dict[str, tuple[tuple[str, int], ...]] = {}
    counters: set[str] = set()
    annotations: dict[str, tuple[str, ...]] = {}
    for control in CONTROLS:
        body = controls[control]
        declared = actions_of(body)
        for table in tables_of(body).values():
            if table.hidden:
                continue
            tables[f"{control}.{table.name}"] = (table.keys, table.actions, table.default_action)
            annotations[f"{control}.{table.name}"] = tuple(
                a for a in table.annotations if a.startswith("@p4reduce")
            )
            for action in table.actions:
                if action != "NoAction":
                    actions[f"{control}.{action}"] = _params(declared[action][0])
        counters |= {f"{control}.{name}" for name in counters_of(body)}
    return {"tables": tables, "actions": actions, "counters": counters, "annotations": annotations}


def _params(declaration: str) -> tuple[tuple[str, int], ...]:
    return tuple((name, int(width)) for width, name in re.findall(r"bit<(\d+)>\s+(\w+)", declaration))


@pytest.mark.parametrize("variant", TNA_VARIANTS, ids=[v.name for v in TNA_VARIANTS])
def test_tna_offers_the_controller_what_v1model_offers(variant: Variant) -> None:
    """Everything, the tree child role's tables (upstream, from_parent) included (issue 32)."""
    v1model, tna = controller_view(V1MODEL_VARIANT), controller_view(variant)
    for part in ("tables", "actions", "counters", "annotations"):
        assert tna[part] == v1model[part], f"{part} differ"


@pytest.mark.parametrize("variant", TNA_VARIANTS, ids=[v.name for v in TNA_VARIANTS])
def test_the_tree_child_role_is_offered_with_the_v1model_parameters(variant: Variant) -> None:
    """A controller can build a tree through a Tofino: the two tables and their actions' widths."""
    view = controller_view(variant)
    tables, actions = view["tables"], view["actions"]
    assert tables["MyIngress.upstream"] == (("hdr.p4r.job_id",), ("set_upstream", "NoAction"), "NoAction")  # type: ignore[index]
    assert actions["MyIngress.set_upstream"] == (  # type: ignore[index]
        ("port", 9), ("parent_mac", 48), ("parent_ip", 32), ("own_ip", 32), ("parent_job", 16),
        ("parent_rank", 8), ("parent_key", 32),
    )  # fmt: skip
    assert actions["MyIngress.set_child"] == (  # type: ignore[index]
        ("job_id", 16), ("base", 16), ("pool_size", 16), ("mcast_grp", 16), ("parent_port", 9), ("key", 32),
        ("epoch", 32),
    )  # fmt: skip


@pytest.mark.parametrize("variant", TNA_VARIANTS, ids=[v.name for v in TNA_VARIANTS])
def test_job_table_annotations_follow_k_and_the_slot_count(variant: Variant) -> None:
    view = controller_view(variant, {"VALUES_PER_PACKET": "128", "SLOT_COUNT": "1024"})
    assert view["annotations"] == {
        **{name: () for name in view["tables"]},  # type: ignore[union-attr]
        "MyIngress.job_table": ("@p4reduce_values_per_packet(128)", "@p4reduce_slot_count(1024)"),
    }


def test_the_controller_uses_names_the_programs_offer() -> None:
    """Every table and action the controller writes exists, with the parameters it sets."""
    from controller.tables.job_table import JobTable
    from controller.tables.result_dest import ResultDest

    view = controller_view(V1MODEL_VARIANT)
    tables, actions = view["tables"], view["actions"]
    for writer in (JobTable, ResultDest):
        keys, listed, _ = tables[writer.TABLE]  # type: ignore[index]
        assert keys == writer.KEYS
        assert writer.ACTION.split(".")[-1] in listed
    assert [name for name, _ in actions[JobTable.ACTION]] == [  # type: ignore[index]
        "base", "pool_size", "num_workers", "worker_bit", "mcast_grp", "sender_port", "sender_ip",
        "sender_udp_port", "key", "epoch",
    ]  # fmt: skip
    assert [name for name, _ in actions[ResultDest.ACTION]] == ["dst_mac", "dst_ip", "dst_udp_port", "key"]  # type: ignore[index]
