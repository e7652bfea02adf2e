"""P4Info as p4c writes it: the id scheme, aliases, and every object of p4reduce.p4 the controller uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy.proto import p4i

from contracts.protocol import (
    DEFAULT_SLOT_COUNT,
    DEFAULT_VALUES_PER_PACKET,
    DROP_REASON_COUNT,
    EMBEDDED_DEFAULT_VALUES_PER_PACKET,
    MAX_JOBS,
    P4INFO_SLOTS_ANNOTATION,
    P4INFO_VALUES_ANNOTATION,
)
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from softswitch.p4info.ids import aliases, assign_ids, jenkins_one_at_a_time
from softswitch.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("prefix", "name", "published"),
    [  # ids in p4lang/tutorials' basic.p4 P4Info, produced by p4c
        (0x02, "MyIngress.ipv4_lpm", 37375156),
        (0x01, "MyIngress.ipv4_forward", 28792405),
        (0x01, "MyIngress.drop", 25652968),
        (0x01, "NoAction", 21257015),
    ],
)
def test_ids_match_what_p4c_publishes(prefix: int, name: str, published: int) -> None:
    assert assign_ids([(prefix, name, None)])[(prefix, name)] == published


def test_collisions_probe_upwards_and_explicit_ids_win() -> None:
    low = jenkins_one_at_a_time("a.t") & 0xFFFFFF
    ids = assign_ids([(2, "a.t", None), (2, "b.t", (2 << 24) | low)])
    assert ids[(2, "b.t")] == (2 << 24) | low
    assert ids[(2, "a.t")] == (2 << 24) | (low + 1)


def test_aliases_are_the_shortest_unique_suffix() -> None:
    assert aliases(["MyIngress.t", "MyEgress.t", "MyIngress.u"]) == {
        "MyIngress.t": "MyIngress.t",
        "MyEgress.t": "MyEgress.t",
        "MyIngress.u": "u",
    }


@pytest.fixture(scope="module")
def info() -> p4i.P4Info:
    """The P4Info of p4reduce.p4 as p4reduce-p4c compiles it by default: for the embedded switch."""
    return build_p4info(compile_file(ROOT / "p4src/v1model/p4reduce.p4", include_dirs=[ROOT / "p4src"]))


def test_tables_have_the_keys_the_controller_writes(info: p4i.P4Info) -> None:
    tables = {t.preamble.name: t for t in info.tables}
    keys = {name: [(m.name, m.bitwidth, m.match_type) for m in t.match_fields] for name, t in tables.items()}
    exact = p4i.MatchField.EXACT
    assert keys == {
        "MyIngress.arp_responder": [("hdr.arp.target_proto_addr", 32, exact)],
        "MyIngress.agg_addresses": [("hdr.ipv4.dst_addr", 32, exact)],
        "MyIngress.l2_forward": [("hdr.ethernet.dst_addr", 48, exact)],
        "MyIngress.job_table": [("hdr.p4r.job_id", 16, exact), ("hdr.p4r.rank", 8, exact)],
        "MyEgress.result_dest": [("hdr.p4r.job_id", 16, exact), ("standard_metadata.egress_rid", 16, exact)],
        "MyEgress.ecn_threshold": [("standard_metadata.egress_port", 9, exact)],
        "MyIngress.upstream": [("hdr.p4r.job_id", 16, exact)],
        "MyIngress.from_parent": [("hdr.p4r.job_id", 16, exact), ("hdr.ipv4.src_addr", 32, exact)],
    }
    assert tables["MyIngress.job_table"].preamble.alias == "job_table"
    actions = {a.preamble.id: a.preamble.name for a in info.actions}
    assert actions[tables["MyIngress.l2_forward"].initial_default_action.action_id] == "MyIngress.flood"
    assert actions[tables["MyIngress.job_table"].initial_default_action.action_id] == "MyIngress.unknown_job"


def test_actions_have_their_parameters_in_order(info: p4i.P4Info) -> None:
    params = {a.preamble.name: [(p.id, p.name, p.bitwidth) for p in a.params] for a in info.actions}
    assert params["MyIngress.set_job"] == [
        (1, "base", 16),
        (2, "pool_size", 16),
        (3, "num_workers", 8),
        (4, "worker_bit", 32),
        (5, "mcast_grp", 16),
        (6, "sender_port", 9),
        (7, "sender_ip", 32),
        (8, "sender_udp_port", 16),
        (9, "key", 32),
        (10, "epoch", 32),
    ]
    assert params["MyEgress.set_result_dest"] == [
        (1, "dst_mac", 48),
        (2, "dst_ip", 32),
        (3, "dst_udp_port", 16),
        (4, "key", 32),
    ]
    assert params["MyIngress.arp_reply"] == [(1, "mac", 48)]
    assert params["MyIngress.forward"] == [(1, "port", 9)]
    assert params["NoAction"] == []


def test_counters_and_registers(info: p4i.P4Info) -> None:
    counters = {c.preamble.name: (c.size, c.spec.unit) for c in info.counters}
    both = p4i.CounterSpec.BOTH
    for name in ("data_in", "results_out", "duplicates", "replays", "missing", "aborts", "queries"):
        assert counters[f"MyIngress.job_{name}"] == (MAX_JOBS, both)
    assert counters["MyIngress.ingress_drops"] == (DROP_REASON_COUNT, both)
    assert counters["MyEgress.egress_drops"] == (DROP_REASON_COUNT, both)
    registers = {r.preamble.name: (r.size, r.type_spec.bitstring.bit.bitwidth) for r in info.registers}
    slots = DEFAULT_SLOT_COUNT
    for name in ("copy_seq", "copy_call", "bitmap"):
        assert registers[f"MyIngress.{name}"] == (2 * slots, 32)
    assert registers["MyIngress.remaining"] == (2 * slots, 8)
    assert registers["MyIngress.exp_max"] == (2 * slots, 8)
    assert registers["MyIngress.owner"] == (slots, 32)
    assert registers["MyIngress.aborted"] == (MAX_JOBS, 48)
    values = {name for name in registers if name.startswith("MyIngress.value")}
    assert values == {f"MyIngress.value{i:02x}" for i in range(EMBEDDED_DEFAULT_VALUES_PER_PACKET)}


@pytest.mark.parametrize(
    ("target", "k"), [("softswitch", EMBEDDED_DEFAULT_VALUES_PER_PACKET), ("bmv2", DEFAULT_VALUES_PER_PACKET)]
)
def test_without_d_the_program_states_its_targets_default_k(target: str, k: int) -> None:
    """No -DVALUES_PER_PACKET: the embedded switch's target gets its fastest K, bmv2's keeps p4c's 64."""
    program = compile_file(
        ROOT / "p4src/v1model/p4reduce.p4", include_dirs=[ROOT / "p4src"], predefined=TARGETS[target].defines
    )
    [job_table] = [t for t in build_p4info(program).tables if t.preamble.name == "MyIngress.job_table"]
    assert f"@{P4INFO_VALUES_ANNOTATION}({k})" in job_table.preamble.annotations


@pytest.mark.parametrize("k", [32, 64, 128, 256])
def test_the_program_states_k_and_its_slot_count_for_the_controller(k: int) -> None:
    program = compile_file(
        ROOT / "p4src/v1model/p4reduce.p4",
        include_dirs=[ROOT / "p4src"],
        defines={"VALUES_PER_PACKET": str(k)},
    )
    info = build_p4info(program)
    [job_table] = [t for t in info.tables if t.preamble.name == "MyIngress.job_table"]
    assert f"@{P4INFO_VALUES_ANNOTATION}({k})" in job_table.preamble.annotations
    assert f"@{P4INFO_SLOTS_ANNOTATION}({DEFAULT_SLOT_COUNT})" in job_table.preamble.annotations
    assert sum(r.preamble.name.startswith("MyIngress.value") for r in info.registers) == k


def test_ids_carry_their_type_prefix(info: p4i.P4Info) -> None:
    for objects, prefix in (
        (info.tables, 0x02),
        (info.actions, 0x01),
        (info.counters, 0x12),
        (info.registers, 0x16),
    ):
        assert {o.preamble.id >> 24 for o in objects} == {prefix}
    all_ids = [
        o.preamble.id for group in (info.tables, info.actions, info.counters, info.registers) for o in group
    ]
    assert len(all_ids) == len(set(all_ids))
