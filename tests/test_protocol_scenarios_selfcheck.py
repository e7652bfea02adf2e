"""The scenario table is well formed and agrees with the protocol, without any switch.

Three independent readings meet here: the scenario expectations, the P4 program's names, and a
byte-level model of docs/protocol.md (tests/protocol_model.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from contracts.protocol import PAYLOAD_BYTES, UDP_PORT, MsgType
from tests.protocol_model import ProtocolModel
from tests.protocol_scenarios import (
    H1,
    H2,
    JOB_A,
    SCENARIOS,
    Check,
    Install,
    Scenario,
    Send,
    assert_frame,
    data_packet,
    frame_fields,
    install,
    ipv4_checksum_ok,
    result_packet,
    run_scenario,
    standard_setup,
    vector,
)

P4_SOURCE = (Path(__file__).resolve().parents[1] / "p4src" / "v1model" / "p4reduce.p4").read_text()


def control_body(control: str) -> str:
    """Text of `control <name>(...) { ... }` in the v1model program, by brace matching."""
    start = P4_SOURCE.index(f"control {control}(")
    depth, i = 0, P4_SOURCE.index("{", start)
    for j in range(i, len(P4_SOURCE)):
        depth += {"{": 1, "}": -1}.get(P4_SOURCE[j], 0)
        if depth == 0:
            return P4_SOURCE[i : j + 1]
    raise AssertionError(f"control {control} is not closed")


def declared(qualified: str, kind: str) -> bool:
    """Is `Control.name` declared as a table, action, counter or register inside that control?"""
    control, name = qualified.split(".", 1)
    body = control_body(control)
    patterns = {
        "table": rf"\btable\s+{name}\s*\{{",
        "action": rf"\baction\s+{name}\s*\(",
        "counter": rf"\bcounter\([^;]*\)\s+{name}\s*;",
        "register": rf"\bregister<[^;]*>\([^;]*\)\s+{name}\s*;",
    }
    return re.search(patterns[kind], body) is not None


def action_params(qualified: str) -> set[str]:
    control, name = qualified.split(".", 1)
    signature = re.search(rf"\baction\s+{name}\s*\(([^)]*)\)", control_body(control))
    assert signature is not None, f"{qualified} not found"
    return {p.split()[-1] for p in signature.group(1).split(",") if p.strip()}


def table_keys(qualified: str) -> set[str]:
    control, name = qualified.split(".", 1)
    table = re.search(rf"\btable\s+{name}\s*\{{\s*key\s*=\s*\{{([^}}]*)\}}", control_body(control))
    assert table is not None, f"{qualified} has no key"
    return {k.split(":")[0].strip() for k in table.group(1).split(";") if k.strip()}


def all_steps(scenario: Scenario) -> tuple[object, ...]:
    return standard_setup() + scenario.steps if scenario.standard_setup else scenario.steps


def test_scenario_names_are_unique_and_cover_the_brief() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))
    assert len(SCENARIOS) >= 18


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_names_exist_in_the_p4_program(scenario: Scenario) -> None:
    for step in all_steps(scenario):
        if isinstance(step, Install):
            for entry in step.entries:
                assert declared(entry.table, "table"), entry.table
                assert declared(entry.action, "action"), entry.action
                assert set(entry.params) == action_params(entry.action), entry.action
                assert set(entry.match) == table_keys(entry.table), entry.table
        elif isinstance(step, Check):
            for name, _ in step.counters:
                assert declared(name, "counter"), name
            for name, _ in step.registers:
                assert declared(name, "register"), name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_frames_are_well_formed(scenario: Scenario) -> None:
    for step in scenario.steps:
        if not isinstance(step, Send):
            continue
        pkt = Ether(step.frame)
        if (
            UDP in pkt
            and pkt[UDP].dport == UDP_PORT
            and "truncat" not in scenario.name
            and "length" not in scenario.name
        ):
            assert len(bytes(pkt[UDP].payload)) == PAYLOAD_BYTES, f"{scenario.name}: {step.note}"
        for out in step.expect:
            fields = frame_fields(out.frame)
            if fields.get("p4r.msg_type") == MsgType.RESULT:
                assert fields["ip.checksum_valid"], scenario.name
                assert fields["udp.chksum"] == 0, scenario.name
                assert fields["ip.ttl"] == 64, scenario.name
                assert fields["length"] == 14 + 20 + 8 + PAYLOAD_BYTES


def test_bad_checksum_frame_really_is_bad() -> None:
    frame = next(s for s in SCENARIOS if s.name == "bad_ipv4_checksum").steps[0]
    assert isinstance(frame, Send)
    assert not ipv4_checksum_ok(frame.frame[14:34])
    assert ipv4_checksum_ok(data_packet(H1, 7, 0, 0, [0] * 32)[14:34])


def test_frame_comparison_names_the_differing_field() -> None:
    a = result_packet(H1, JOB_A.job_id, 0, 0, [1] * 32)
    b = result_packet(H1, JOB_A.job_id, 0, 0, [1] * 31 + [2])
    with pytest.raises(AssertionError, match="p4r.values"):
        assert_frame(a, b, "here")
    assert_frame(a, a, "here")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_agrees_with_the_protocol_model(scenario: Scenario) -> None:
    run_scenario(ProtocolModel(), scenario)


def test_model_disagrees_with_a_wrong_expectation() -> None:
    """run_scenario can fail: a result expected on the wrong port is reported."""
    first = next(s for s in SCENARIOS if s.name == "first_middle_last")
    broken_steps = list(first.steps)
    last = broken_steps[4]
    assert isinstance(last, Send) and last.expect
    broken_steps[4] = Send(last.port, last.frame, last.expect[1:], last.note)
    broken = Scenario(first.name, first.doc, tuple(broken_steps))
    with pytest.raises(AssertionError, match="frames left on ports"):
        run_scenario(ProtocolModel(), broken)
    assert IP in Ether(last.frame)


def _worked_example_bytes() -> bytes:
    """The hex dump in docs/protocol.md's worked example."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text()
    block = text.split("```\nEthernet", 1)[1].split("```", 1)[0]
    data = bytearray()
    for line in ("Ethernet" + block).splitlines():
        for token in line.split()[1:]:  # after the layer name, hex bytes until the first comment word
            if not re.fullmatch(r"[0-9a-f]{2}", token):
                break
            data.append(int(token, 16))
    return bytes(data)


def test_worked_example_bytes_are_what_a_worker_sends() -> None:
    values = vector(5, -3, 2**31 - 1)
    frame = data_packet(H2, 7, 1, 3, values, set_bit=1, exp=130, chunk=42)
    documented = _worked_example_bytes()
    assert len(documented) == 66
    assert frame[:66] == documented


def test_worked_example_outcome() -> None:
    """The sums, exponent and replay that docs/protocol.md's worked example narrates."""
    model = ProtocolModel()
    for step in standard_setup():
        install(model, step)
    contributions = [vector(1, -5, 1, seed=1), vector(5, -3, 2**31 - 1), vector(0, 8, 0, seed=3)]
    exps = [128, 130, 129]
    outputs: list[tuple[int, bytes]] = []
    for rank, (values, exp) in enumerate(zip(contributions, exps, strict=True)):
        host = JOB_A.workers[rank]
        frame = data_packet(host, 7, rank, 3, values, set_bit=1, exp=exp, chunk=42)
        outputs = model.send(host.port, frame)
    assert sorted(port for port, _ in outputs) == [1, 2, 3]
    fields = frame_fields(outputs[0][1])
    assert fields["p4r.values"][:3] == [6, 0, -(2**31)]
    assert fields["p4r.exp"] == 130 and fields["p4r.rank"] == 2
    assert model.register("MyIngress.bitmap", 2048 + 103) == 0b111
    replay = model.send(2, data_packet(H2, 7, 1, 3, contributions[1], set_bit=1, exp=130, chunk=42))
    assert [port for port, _ in replay] == [2]
    assert frame_fields(replay[0][1])["ip.dst"] == H2.ip
