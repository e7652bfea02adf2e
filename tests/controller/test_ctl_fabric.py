"""A job's aggregation tree over the config's fabric (controller/fabric.py): which switch aggregates for
which, as `job show` will print it. Pure functions of the config file: no switch is needed."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from controller import config
from controller.allocator import SlotRange
from controller.errors import ConfigError, JobError
from controller.fabric import AggregationTree, Uplink, flood_links, next_hops, tree_for
from controller.job import Job, job_group
from controller.job import Worker as JobWorker
from controller.trees import TreeEntries, check_same_program, plan_parts


def topology(names: list[str], links: list[list[str]]) -> config.Topology:
    switches = [
        {"name": n, "grpc": f"127.0.0.1:{9000 + i}", "p4info": "p", "device_config": "d",
         "aggregation": {"ipv4": f"10.0.{i}.254", "mac": f"02:00:00:00:{i:02x}:fe"}}
        for i, n in enumerate(names)
    ]  # fmt: skip
    return config.parse({"switches": switches, "links": links}, Path("."))


def fabric(leaves: int, spines: int = 1, links: list[list[str]] | None = None) -> config.Topology:
    """Leaves leaf0.. with uplink ports 9 (to spine0), 10 (to spine1), ...; spine s has leaf i on port i+1."""
    names = [f"leaf{i}" for i in range(leaves)] + [f"spine{s}" for s in range(spines)]
    cables = links if links is not None else [
        [f"leaf{i}:{9 + s}", f"spine{s}:{i + 1}"] for i in range(leaves) for s in range(spines)
    ]  # fmt: skip
    return topology(names, cables)


def test_ranks_on_two_leaves_are_joined_at_the_spine() -> None:
    tree = tree_for(fabric(2), {"leaf0", "leaf1"})
    assert tree.root == "spine0"
    assert tree.uplinks == {"leaf0": Uplink("spine0", 9, 1), "leaf1": Uplink("spine0", 9, 2)}
    assert tree.switches == ["spine0", "leaf0", "leaf1"]
    assert tree.describe() == [
        "spine0: root; aggregates leaf0 (port 1), leaf1 (port 2)",
        "leaf0: for spine0 via port 9; aggregates its ranks",
        "leaf1: for spine0 via port 9; aggregates its ranks",
    ]


def test_ranks_on_one_leaf_never_leave_it_and_unused_leaves_are_not_in_the_tree() -> None:
    tree = tree_for(fabric(3), {"leaf2"})
    assert tree.root == "leaf2" and tree.uplinks == {} and tree.switches == ["leaf2"]
    two_of_three = tree_for(fabric(3), {"leaf0", "leaf2"})
    assert two_of_three.root == "spine0" and set(two_of_three.uplinks) == {"leaf0", "leaf2"}


def test_ranks_on_a_leaf_and_on_the_spine_itself_tie_and_the_name_decides() -> None:
    tree = tree_for(fabric(2), {"leaf1", "spine0"})
    assert tree.root == "leaf1" and tree.uplinks == {"spine0": Uplink("leaf1", 2, 9)}
    assert tree.describe() == [
        "leaf1: root; aggregates its ranks, spine0 (port 9)",
        "spine0: for leaf1 via port 2; aggregates its ranks",
    ]


def test_with_two_spines_one_is_chosen_the_same_way_every_time() -> None:
    trees = [tree_for(fabric(4, spines=2), {"leaf0", "leaf1", "leaf3"}) for _ in range(3)]
    assert trees[0] == trees[1] == trees[2]
    assert trees[0].root == "spine0"  # the two spines are equally good: the name decides
    assert {up.parent for up in trees[0].uplinks.values()} == {"spine0"}


def test_a_chain_is_joined_in_its_middle() -> None:
    cables = [["a:1", "b:1"], ["b:2", "c:1"], ["c:2", "d:1"], ["d:2", "e:1"]]
    chain = topology(["a", "b", "c", "d", "e"], cables)
    tree = tree_for(chain, {"a", "e"})
    assert tree.root == "c"
    assert tree.uplinks == {"a": Uplink("b", 1, 1), "b": Uplink("c", 2, 1), "d": Uplink("c", 1, 2),
                            "e": Uplink("d", 1, 2)}  # fmt: skip


def test_switches_the_links_do_not_join_are_an_error_naming_them() -> None:
    split = fabric(2, links=[["leaf0:9", "spine0:1"]])
    with pytest.raises(ConfigError, match="switches 'leaf0' and 'leaf1' are not connected"):
        tree_for(split, {"leaf0", "leaf1"})
    with pytest.raises(ConfigError, match="unknown switch 'leaf7'"):
        tree_for(split, {"leaf7"})


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ([["leaf0:9"]], "links[0]: expected two ends like [leaf1:9, spine:1], got 1"),
        ([["leaf0:9", "spine9:1"]], "links[0]: unknown switch 'spine9'"),
        ([["leaf0:x", "spine0:1"]], "links[0]: 'leaf0:x' is not SWITCH:PORT"),
        ([["leaf0:9", "leaf0:10"]], "links[0]: both ends are on switch 'leaf0'"),
        ([["leaf0:9", "spine0:1"], ["leaf1:9", "spine0:1"]], "duplicate link end (a port carries one cable)"),
        ([["leaf0:600", "spine0:1"]], "links[0]: 'leaf0:600' port: 600 is not an integer in 0..511"),
    ],
)
def test_link_mistakes_are_one_line(links: list[list[str]], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        fabric(2, links=links)


def test_the_tree_command_prints_it_from_the_config_file(tmp_path: Path) -> None:
    import yaml
    from ctl_support import cli

    names = ["leaf0", "leaf1", "spine0"]
    data = {
        "switches": [{"name": n, "grpc": f"127.0.0.1:{9000 + i}", "p4info": "p", "device_config": "d",
                      "aggregation": {"ipv4": f"10.0.{i}.254", "mac": f"02:00:00:00:{i:02x}:fe"}}
                     for i, n in enumerate(names)],
        "links": [["leaf0:9", "spine0:1"], ["leaf1:9", "spine0:2"]],
    }  # fmt: skip
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(data))
    shown = cli("tree", "--config", str(path), "leaf0", "leaf1")
    assert shown.code == 0
    assert shown.out.splitlines()[0] == "spine0: root; aggregates leaf0 (port 1), leaf1 (port 2)"
    split = cli("tree", "--config", str(path), "leaf0", "nowhere")
    assert split.code == 1
    assert split.err.strip() == "p4reduce-ctl: error: unknown switch 'nowhere' in the job's ranks"


# ---- the job's parts and their entries (controller/trees.py) ----------------------------------


def tree_job(fab: config.Topology, ranks_on: dict[int, str]) -> tuple[Job, AggregationTree]:
    """A job of leaf0 whose ranks sit where `ranks_on` says (rank -> switch)."""
    job = Job("wide", 7, "leaf0", len(ranks_on), SlotRange(100, 8), job_group(7))
    for rank, switch in ranks_on.items():
        ip, mac = 0x0A000001 + rank, 0x020000000001 + rank
        job.workers[rank] = JobWorker(rank, ip, 40000 + rank, mac, 1 + rank % 4, 0x1000 + rank, switch)
    return job, tree_for(fab, set(ranks_on.values()))


def allocator_of(fresh: list[tuple[str, int, SlotRange]]) -> Callable[[str], tuple[int, SlotRange]]:
    def allocate(switch: str) -> tuple[int, SlotRange]:
        taken = (50 + len(fresh), SlotRange(8 * len(fresh), 8))
        fresh.append((switch, *taken))
        return taken

    return allocate


def test_each_switch_of_the_tree_gets_a_part_and_a_child_is_the_lowest_rank_below_it() -> None:
    fab = fabric(2)
    job, tree = tree_job(fab, {0: "leaf1", 1: "leaf0", 2: "leaf1", 3: "leaf0"})
    fresh: list[tuple[str, int, SlotRange]] = []
    parts = plan_parts(job, tree, allocator_of(fresh))
    assert [s for s, _, _ in fresh] == ["spine0", "leaf1"]  # leaf0 is the job's own switch: its id and slots
    assert parts["leaf0"].job_id == 7 and parts["leaf0"].slots == SlotRange(100, 8)
    assert parts["spine0"].parent == "" and parts["leaf0"].parent == parts["leaf1"].parent == "spine0"
    assert (parts["leaf0"].up_rank, parts["leaf1"].up_rank) == (1, 0)
    assert (parts["leaf0"].child_port, parts["leaf0"].parent_port) == (9, 1)
    assert parts["leaf0"].up_key != parts["leaf1"].up_key and parts["leaf0"].up_key


def test_a_parent_knows_each_child_as_a_member_at_its_aggregation_address() -> None:
    fab = fabric(2)
    job, tree = tree_job(fab, {0: "leaf0", 1: "leaf0", 2: "leaf1"})
    job.parts = plan_parts(job, tree, allocator_of([]))
    entries = TreeEntries({s.name: s for s in fab.switches})
    spine = entries.members(job, job.parts["spine0"])
    assert [(m.rank, m.ipv4, m.udp_port, m.switch_port) for m in spine] == [
        (0, 0x0A0000FE, 20562, 1), (2, 0x0A0001FE, 20562, 2),  # leaf0 and leaf1's aggregation addresses
    ]  # fmt: skip
    assert [m.key for m in spine] == [job.parts["leaf0"].up_key, job.parts["leaf1"].up_key]
    assert entries.size(job, job.parts["spine0"]) == 2 and entries.size(job, job.parts["leaf0"]) == 2


def test_results_have_somewhere_to_go_before_any_member_may_send() -> None:
    """A child whose members were accepted before its upstream entry would multicast a partial sum as the
    result: every switch gets its group, result_dest, upstream and from_parent in a first write and its
    members' job_table entries in a second, parents first; removal runs the other way."""
    fab = fabric(2)
    job, tree = tree_job(fab, {0: "leaf0", 1: "leaf1"})
    job.parts = plan_parts(job, tree, allocator_of([]))
    entries = TreeEntries({s.name: s for s in fab.switches})
    assert [p.switch for p in entries.order(job)] == ["spine0", "leaf0", "leaf1"]
    first, members = entries.install(job, job.parts["leaf1"])
    assert [u.label.split()[0] for u in first] == ["multicast", "result_dest", "upstream", "from_parent"]
    assert [u.label.split()[0] for u in members] == ["job_table"]
    gone_first, rest = entries.removal(job, job.parts["leaf1"])
    assert [u.label.split()[0] for u in gone_first] == ["job_table"]
    assert "upstream" in {u.label.split()[0] for u in rest}


def test_a_tree_needs_every_switch_to_run_the_tree_roles_and_the_same_k() -> None:
    job, _ = tree_job(fabric(2), {0: "leaf0", 1: "leaf1"})
    switches = ["spine0", "leaf0", "leaf1"]
    check_same_program(job, switches, dict.fromkeys(switches, (64, True)))
    with pytest.raises(
        JobError, match=r"needs switch leaf1 in its aggregation tree, but its program has no "
    ):
        check_same_program(job, switches, {"spine0": (64, True), "leaf0": (64, True), "leaf1": (64, False)})
    with pytest.raises(JobError, match=r"different values per packet \(spine0: 64, leaf0: 64, leaf1: 256\)"):
        check_same_program(job, switches, {"spine0": (64, True), "leaf0": (64, True), "leaf1": (256, True)})


# ---- layer 2 across the fabric (controller/provision.py) ---------------------------------------


def test_each_switch_reaches_the_others_through_its_port_on_a_shortest_path() -> None:
    fab = fabric(3)
    assert next_hops(fab, "leaf0") == {"spine0": 9, "leaf1": 9, "leaf2": 9}
    assert next_hops(fab, "spine0") == {"leaf0": 1, "leaf1": 2, "leaf2": 3}


def test_broadcasts_flood_over_a_spanning_tree_so_two_spines_never_loop_them() -> None:
    one = fabric(2)
    assert flood_links(one, "spine0") == [1, 2] and flood_links(one, "leaf0") == [9]
    two = fabric(2, spines=2)  # leaf0 and leaf1 each reach spine0 (port 9) and spine1 (port 10)
    tree = {s: flood_links(two, s) for s in ("leaf0", "leaf1", "spine0", "spine1")}
    assert tree == {"leaf0": [9, 10], "leaf1": [9], "spine0": [1, 2], "spine1": [1]}
    assert sum(map(len, tree.values())) == 2 * 3  # three cables of four, each flooded at both ends
