"""The topology/config file: what a valid file yields, and the one-line error for each kind of mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller import config
from controller.device_config import Target
from controller.errors import ConfigError
from controller.mastership import Policy

ROOT = Path(__file__).resolve().parents[2]


def minimal() -> dict[str, object]:
    return {
        "switches": [
            {
                "name": "s1",
                "grpc": "127.0.0.1:9559",
                "p4info": "p.txtpb",
                "device_config": "p.json",
                "aggregation": {"ipv4": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
            }
        ],
        "hosts": [{"name": "h1", "ipv4": "10.0.0.1", "mac": "02:00:00:00:00:01", "switch": "s1", "port": 1}],
    }


def test_the_shipped_examples_are_valid() -> None:
    lab = config.load(ROOT / "controller" / "examples" / "lab.yaml")
    assert [h.port for h in lab.hosts] == [1, 2, 3, 4]
    assert lab.switch().p4info == ROOT / "build" / "p4reduce.p4info.txtpb"
    assert lab.controller.lease_seconds == 30.0
    assert lab.controller.id_quarantine_seconds == 10.0  # a deleted job's id rests this long
    assert lab.controller.disconnect_grace_seconds == 0.5  # a dead rank is named after this
    assert (lab.controller.keepalive_seconds, lab.controller.keepalive_timeout_seconds) == (10.0, 5.0)
    loop = config.load(ROOT / "controller" / "examples" / "loopback.yaml")
    assert loop.switch("soft").default_host_port == 1
    assert loop.switch().agg_mac == 0x025052000001


def test_values_are_parsed_and_defaults_filled(tmp_path: Path) -> None:
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(minimal()))
    topo = config.load(path)
    sw = topo.switch("s1")
    assert (sw.agg_ipv4, sw.agg_mac, sw.agg_udp_port, sw.device_id) == (0x0A0000FE, 0x0200000000FE, 20562, 1)
    assert sw.p4info == tmp_path / "p.txtpb"  # relative to the file
    assert topo.host_by_ipv4("s1", 0x0A000001) == topo.hosts[0]
    assert topo.controller == config.ControllerSettings()
    assert (topo.controller.mastership, topo.controller.mastership_retry_seconds) == (Policy.RECLAIM, 5.0)
    yielding = config.load(write(tmp_path / "y.json", _with({"controller": {"mastership": "yield"}})))
    assert yielding.controller.mastership is Policy.YIELD
    assert sw.target is None  # any: the push confirms the device config runs
    assert config.load(write(tmp_path / "bmv2.json", _with(target="bmv2"))).switch().target == Target.BMV2


def write(path: Path, data: dict[str, object]) -> Path:
    path.write_text(json.dumps(data))
    return path


def _with(change: dict[str, object] | None = None, **switch: object) -> dict[str, object]:
    data = minimal()
    data["switches"][0].update(switch)  # type: ignore[index]
    data.update(change or {})
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "the file: missing key switches"),
        ({"switches": []}, "switches: at least one switch is needed"),
        (_with(grpc="localhost"), "switches[0].grpc: 'localhost' is not HOST:PORT"),
        (_with(aggregation={"ipv4": "10.0.0.300", "mac": "02:00:00:00:00:fe"}), "10.0.0.300' is not an IPv4"),
        (_with(aggregation={"ipv4": "10.0.0.1", "mac": "zz"}), "aggregation.mac: 'zz' is not a MAC"),
        (_with(colour="red"), "switches[0]: unknown key colour (allowed: aggregation, default_host_port"),
        (_with(device_id=-1), "switches[0].device_id: -1 is not a non-negative integer"),
        (_with(target="tofino"), "switches[0].target: 'tofino' is not a switch target (bmv2 or p4r"),
        (_with(flood_ports=[1, 600]), "switches[0].flood_ports[1]: 600 is not an integer in 0..511"),
        (
            _with({"controller": {"id_quarantine_seconds": -1}}),
            "controller.id_quarantine_seconds: -1 is not a number",
        ),
        (_with({"hosts": [{"name": "h1"}]}), "hosts[0]: missing key ipv4, mac, port, switch"),
        (
            _with(
                {
                    "hosts": [
                        {
                            "name": "h",
                            "ipv4": "10.0.0.1",
                            "mac": "02:00:00:00:00:01",
                            "switch": "s9",
                            "port": 1,
                        }
                    ]
                }
            ),
            "hosts[0].switch: unknown switch 's9'",
        ),
        (
            _with(
                {
                    "hosts": [
                        {
                            "name": "h",
                            "ipv4": "10.0.0.1",
                            "mac": "02:00:00:00:00:01",
                            "switch": "s1",
                            "port": 1,
                        }
                    ]
                    * 2
                }
            ),
            "duplicate host name 'h'",
        ),
        (_with({"controller": {"lease_seconds": 0}}), "controller.lease_seconds: 0 is not a positive number"),
        (
            _with({"controller": {"disconnect_grace_seconds": -0.5}}),
            "controller.disconnect_grace_seconds: -0.5 is not a number",
        ),
        (
            _with({"controller": {"keepalive_timeout_seconds": 0}}),
            "controller.keepalive_timeout_seconds: 0 is not a positive number",
        ),
        (
            _with({"controller": {"mastership": "grab"}}),
            "controller.mastership: 'grab' is not a policy (reclaim",
        ),
        (
            _with({"controller": {"mastership_retry_seconds": 0}}),
            "controller.mastership_retry_seconds: 0 is not a positive number",
        ),
        (
            _with({"controller": {"default_pool_size": 50000}}),
            "default_pool_size: 50000 is not an integer in 2..32768",
        ),
        (_with({"controller": {"listen": "nowhere"}}), "controller.listen"),
        (_with({"switches": [minimal()["switches"][0]] * 2}), "duplicate switch name 's1'"),  # type: ignore[index]
    ],
)
def test_mistakes_are_named_in_one_line(tmp_path: Path, data: dict[str, object], message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as error:
        config.load(path)
    text = str(error.value)
    assert text.startswith(f"{path}: ")
    assert message in text
    assert "\n" not in text


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file .*missing.yaml: No such file"):
        config.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML: "):
        config.load(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    with pytest.raises(ConfigError, match="bad.json: not valid JSON: "):
        config.load(bad_json)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="the file: expected a mapping, got int"):
        config.load(scalar)


def test_unknown_switch_lookup_names_the_configured_ones(tmp_path: Path) -> None:
    topo = config.parse(minimal(), tmp_path)
    with pytest.raises(ConfigError, match=r"unknown switch 'x' \(configured: s1\)"):
        topo.switch("x")
