"""Lab topology files and the controller config the lab writes for them, without Mininet or root.

A leaf–spine file must give each leaf's hosts ports 1..4 and its spine
link the next port, and the lab's controller config must say, for the
default tree, that every host is a host of its own leaf and that the
switch links are `links:` with those ports; for --aggregate-at root, that
the spine (the tree's root) has every host at its port towards that
host's leaf and the leaves only bridge. What the controller reads is
checked by the controller's own parser, so a format drift fails here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from controller.config import parse as parse_controller_config
from controller.fabric import tree_for

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts)
from lab_config import aggregation_choice, controller_config  # noqa: E402
from topology import TopologyError, generate, load, parse  # noqa: E402

TOPOS = ROOT / "mininet" / "topos"


def config_for(topo_file: str, aggregate_at: str = "tree"):  # noqa: ANN201 (controller.config.Topology)
    topo = load(TOPOS / topo_file)
    ports = {name: 9559 + i for i, name in enumerate(topo.names)}
    text = controller_config(
        topo, ports, Path("p.json"), Path("p.txtpb"), aggregate_at=aggregation_choice(topo, aggregate_at)
    )
    return parse_controller_config(yaml.safe_load(text), ROOT)


@pytest.mark.parametrize(("topo_file", "leaves"), [("leafspine8.json", 2), ("leafspine12.json", 3)])
def test_a_leaf_spine_file_puts_four_hosts_on_each_leaf_and_links_every_leaf_to_the_spine(
    topo_file: str, leaves: int
) -> None:
    topo = load(TOPOS / topo_file)
    assert topo.names == ["spine", *(f"leaf{i + 1}" for i in range(leaves))]
    for i in range(leaves):
        on_leaf = topo.hosts_of(f"leaf{i + 1}")
        assert [h.name for h in on_leaf] == [f"h{4 * i + j + 1}" for j in range(4)]
        assert [h.port for h in on_leaf] == [1, 2, 3, 4]
    assert topo.links == tuple((f"leaf{i + 1}", 5, "spine", i + 1) for i in range(leaves))


@pytest.mark.parametrize(("topo_file", "leaves"), [("leafspine8.json", 2), ("leafspine12.json", 3)])
def test_by_default_every_host_is_a_host_of_its_leaf_and_the_links_carry_their_ports(
    topo_file: str, leaves: int
) -> None:
    config = config_for(topo_file)
    assert {(h.name, h.switch, h.port) for h in config.hosts} == {
        (f"h{4 * i + j + 1}", f"leaf{i + 1}", j + 1) for i in range(leaves) for j in range(4)
    }
    assert {(link.a, link.a_port, link.b, link.b_port) for link in config.links} == {
        (f"leaf{i + 1}", 5, "spine", i + 1) for i in range(leaves)
    }
    floods = {s.name: s.flood_ports for s in config.switches}
    assert floods == {"spine": tuple(range(1, leaves + 1)), **{f"leaf{i + 1}": (5,) for i in range(leaves)}}
    tree = tree_for(config, {h.switch for h in config.hosts})
    assert tree.root == "spine" and sorted(tree.uplinks) == [f"leaf{i + 1}" for i in range(leaves)]


def test_aggregating_at_the_root_puts_every_host_on_the_spine_behind_its_leaf_and_the_leaves_bridge() -> None:
    config = config_for("leafspine8.json", "root")
    assert {(h.name, h.switch, h.port) for h in config.hosts} == {
        (f"h{n}", "spine", 1 if n <= 4 else 2) for n in range(1, 9)
    }
    assert config.links == ()  # one aggregating switch: the controller places the job there alone
    floods = {s.name: s.flood_ports for s in config.switches}
    assert floods == {"spine": (), "leaf1": (1, 2, 3, 4, 5), "leaf2": (1, 2, 3, 4, 5)}
    assert aggregation_choice(load(TOPOS / "leafspine8.json"), "leaf2") == "leaf2"
    with pytest.raises(TopologyError, match="unknown switch 'leaf9'.*spine, leaf1, leaf2"):
        aggregation_choice(load(TOPOS / "leafspine8.json"), "leaf9")


def test_a_single_switch_star_is_configured_as_before_whatever_the_choice() -> None:
    topo = load(TOPOS / "star4.json")
    texts = {
        choice: controller_config(
            topo, {"s1": 9559}, Path("p"), Path("i"), aggregate_at=aggregation_choice(topo, choice)
        )
        for choice in ("tree", "root", "s1")
    }
    assert (
        len(set(texts.values())) == 1 and "links:" not in texts["tree"] and "flood_ports" not in texts["tree"]
    )


def test_every_switch_reaches_every_host_and_aggregation_address_over_the_fabric() -> None:
    topo = load(TOPOS / "leafspine8.json")
    leaf1 = dict(topo.l2_entries("leaf1"))
    assert [leaf1[f"02:00:00:00:00:0{n}"] for n in range(1, 9)] == [1, 2, 3, 4, 5, 5, 5, 5]
    assert leaf1["02:00:00:00:00:fe"] == 5 and leaf1["02:00:00:00:00:fc"] == 5  # spine, leaf2
    spine = dict(topo.l2_entries("spine"))
    assert [spine[f"02:00:00:00:00:0{n}"] for n in range(1, 9)] == [1] * 4 + [2] * 4
    assert "02:00:00:00:00:fe" not in spine  # its own address is the controller's (agg_addresses)
    three = load(TOPOS / "leafspine12.json")
    assert three.next_hop("leaf1", "leaf3") == 5 and three.next_hop("spine", "leaf3") == 3


def test_the_line_topology_keeps_its_ports() -> None:
    line = generate("line", 4)
    assert [(h.switch, h.port) for h in line.hosts] == [("s1", 1), ("s1", 2), ("s2", 1), ("s2", 2)]
    assert line.links == (("s1", 3, "s2", 3),)


SWITCH = {"name": "s1", "aggregation": {"ipv4": "10.0.0.254", "mac": "02:00:00:00:00:fe"}}


def host(n: int, switch: str = "s1", **override: object) -> dict:
    return {
        "name": f"h{n}",
        "ipv4": f"10.0.0.{n}",
        "mac": f"02:00:00:00:00:0{n}",
        "switch": switch,
        **override,
    }


def switch(n: int) -> dict:
    return {"name": f"s{n}", "aggregation": {"ipv4": f"10.0.0.{250 + n}", "mac": f"02:00:00:00:00:f{n}"}}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"switches": [SWITCH], "hosts": [host(1)], "switchlinks": []}, "unknown key 'switchlinks'"),
        ({"switches": [SWITCH], "hosts": []}, "no hosts"),
        ({"switches": [], "hosts": [host(1)]}, "switches must be non-empty"),
        ({"switches": [SWITCH], "hosts": [host(1, "s9")]}, "hosts[0]: host h1 hangs off unknown switch 's9'"),
        ({"switches": [SWITCH], "hosts": [host(1, mac="zz")]}, "hosts[0]: 'zz' is not a MAC address"),
        ({"switches": [SWITCH], "hosts": [host(1, ipv4="10.0.0")]}, "'10.0.0' is not an IPv4 address"),
        ({"switches": [SWITCH], "hosts": [host(1, port=3)]}, "hosts[0]: unknown field 'port'"),
        ({"switches": [SWITCH], "hosts": [host(1), host(1)]}, "node name h1 is used twice"),
        (
            {"switches": [SWITCH], "hosts": [host(1), host(2, ipv4="10.0.0.1")]},
            "IPv4 address 10.0.0.1 is used twice",
        ),
        (
            {"switches": [switch(1), switch(2)], "hosts": [host(1)], "switch_links": [["s1", "s3"]]},
            "switch_links[0]: ['s1', 's3'] is not a pair of known switches",
        ),
        ({"switches": [switch(1), switch(2)], "hosts": [host(1)]}, "switch s2 is not connected to s1"),
        (
            {
                "switches": [switch(1), switch(2), switch(3)],
                "hosts": [host(1)],
                "switch_links": [["s1", "s2"], ["s2", "s3"], ["s3", "s1"]],
            },
            "the switch links form a loop",
        ),  # fmt: skip
        (
            {"switches": [dict(SWITCH, name="spine-1")], "hosts": [host(1)]},
            "name 'spine-1' is not 1-10 letters",
        ),
    ],
)
def test_a_malformed_topology_is_one_line_naming_what_is_wrong(doc: dict, message: str) -> None:
    with pytest.raises(TopologyError) as caught:
        parse(doc, "t.json")
    assert message in str(caught.value) and "\n" not in str(caught.value)
