"""The scenario table is well formed and agrees with the protocol, without any switch.

Three independent readings meet here: the scenario expectations, the P4 program's names, and a
byte-level model of docs/protocol.md (tests/protocol_model.py).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from finsy.proto import p4i
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from contracts.protocol import HEADER_BYTES, UDP_PORT, MsgType, seq_of
from softswitch.p4info import build_p4info
from tests.packet_program import packet_program
from tests.protocol_model import ProtocolModel
from tests.protocol_scenarios import (
    H1,
    H2,
    JOB_A,
    PAYLOAD_BYTES,
    SCENARIOS,
    Check,
    Install,
    K,
    Scenario,
    Send,
    answer_packet,
    assert_frame,
    data_packet,
    frame_fields,
    install,
    ipv4_checksum_ok,
    run_scenario,
    standard_setup,
    vector,
)
from tests.protocol_tree_scenarios import tree_scenarios

ALL = SCENARIOS + tree_scenarios()  # one switch, and a child of an aggregation tree

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def p4info() -> p4i.P4Info:
    """The program's P4Info: its names are what every P4Runtime client (and the scenarios) must use."""
    return build_p4info(packet_program())


def declared(qualified: str, kind: str) -> bool:
    """Is `Control.name` a table, action, counter or register of the program?"""
    entities = {
        "table": p4info().tables,
        "action": p4info().actions,
        "counter": p4info().counters,
        "register": p4info().registers,
    }[kind]
    return any(entity.preamble.name == qualified for entity in entities)


def action_params(qualified: str) -> set[str]:
    action = next(a for a in p4info().actions if a.preamble.name == qualified)
    return {param.name for param in action.params}


def table_keys(qualified: str) -> set[str]:
    table = next(t for t in p4info().tables if t.preamble.name == qualified)
    return {field.name for field in table.match_fields}


def all_steps(scenario: Scenario) -> tuple[object, ...]:
    return standard_setup() + scenario.steps if scenario.standard_setup else scenario.steps


def test_scenario_names_are_unique_and_cover_the_brief() -> None:
    names = [s.name for s in ALL]
    assert len(names) == len(set(names))
    assert len(SCENARIOS) >= 18


@pytest.mark.parametrize("scenario", ALL, ids=lambda s: s.name)
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


@pytest.mark.parametrize("scenario", ALL, ids=lambda s: s.name)
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
            msg_type = bytes(pkt[UDP].payload)[0]
            carries = msg_type in (MsgType.DATA, MsgType.RESULT)  # the K values
            size = PAYLOAD_BYTES if carries else HEADER_BYTES
            known = msg_type in set(MsgType)  # an unknown type is refused before its length is looked at
            assert not known or len(bytes(pkt[UDP].payload)) == size, f"{scenario.name}: {step.note}"
        for out in step.expect:
            fields = frame_fields(out.frame)
            msg_type = fields.get("p4r.msg_type")
            sent = UDP in Ether(out.frame) and Ether(out.frame)[UDP].sport == UDP_PORT  # not forwarded at L2
            if sent and msg_type in set(MsgType):  # answers, and (in a tree) what a child sends its parent
                assert fields["ip.checksum_valid"], scenario.name
                assert fields["udp.chksum"] == 0, scenario.name
                assert fields["ip.ttl"] == 64, scenario.name
                payload = PAYLOAD_BYTES if msg_type in (MsgType.RESULT, MsgType.DATA) else HEADER_BYTES
                assert fields["length"] == 14 + 20 + 8 + payload, scenario.name
                assert fields["ip.len"] == 20 + 8 + payload and fields["udp.len"] == 8 + payload


def test_bad_checksum_frame_really_is_bad() -> None:
    frame = next(s for s in SCENARIOS if s.name == "bad_ipv4_checksum").steps[0]
    assert isinstance(frame, Send)
    assert not ipv4_checksum_ok(frame.frame[14:34])
    assert ipv4_checksum_ok(data_packet(H1, 7, 0, 0, [0] * K)[14:34])


def test_frame_comparison_names_the_differing_field() -> None:
    a = answer_packet(H1, JOB_A.job_id, 0, 0, [1] * K)
    b = answer_packet(H1, JOB_A.job_id, 0, 0, [1] * (K - 1) + [2])
    with pytest.raises(AssertionError, match="p4r.values"):
        assert_frame(a, b, "here")
    assert_frame(a, a, "here")


@pytest.mark.parametrize("scenario", ALL, ids=lambda s: s.name)
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
    """The hex dump in docs/protocol.md's worked example (the IPv4 checksum shown as `..`)."""
    text = (ROOT / "docs" / "protocol.md").read_text()
    block = text.split("```\nEthernet", 1)[1].split("```", 1)[0]
    data = bytearray()
    for line in ("Ethernet" + block).splitlines():
        tokens = line.split()
        if tokens and not re.fullmatch(r"[0-9a-f]{2}|\.\.", tokens[0]):
            tokens = tokens[1:]  # the layer name
        for token in tokens:  # hex bytes until the first comment word
            if token == "..":
                data.append(0)
            elif re.fullmatch(r"[0-9a-f]{2}", token):
                data.append(int(token, 16))
            else:
                break
    return bytes(data)


EXAMPLE_KEYS = (0x0A0A0A0A, 0x0B0B0B0B, 0x0C0C0C0C)
EXAMPLE_SEQ = seq_of(3, 5)
EXAMPLE_CALL = 0x20000060


def test_worked_example_bytes_are_what_a_worker_sends() -> None:
    values = vector(5, -3, 2**31 - 1)
    frame = bytearray(
        data_packet(
            H2, 7, 1, 1, values, set_bit=1, exp=130, seq=EXAMPLE_SEQ, key=EXAMPLE_KEYS[1], call=EXAMPLE_CALL
        )
    )
    documented = _worked_example_bytes()
    assert len(documented) == 14 + 20 + 8 + HEADER_BYTES + 12
    frame[24:26] = b"\0\0"  # the checksum the document leaves out
    assert bytes(frame[: len(documented)]) == documented
    assert len(frame) == 14 + 20 + 8 + HEADER_BYTES + 4 * K == 322


def test_worked_example_outcome() -> None:
    """The sums, exponent, replay, MISSING and abort that docs/protocol.md's worked example narrates."""
    model = ProtocolModel()
    for step in standard_setup():
        install(model, step)
    contributions = [vector(1, -5, 1, seed=1), vector(5, -3, 2**31 - 1), vector(0, 8, 0, seed=3)]
    exps = [128, 130, 129]

    def send(rank: int, call: int = EXAMPLE_CALL) -> list[tuple[int, bytes]]:
        host = JOB_A.workers[rank]
        frame = data_packet(
            host, 7, rank, 1, contributions[rank], set_bit=1, exp=exps[rank], seq=EXAMPLE_SEQ,
            key=EXAMPLE_KEYS[rank], call=call,
        )  # fmt: skip
        return model.send(host.port, frame)

    assert JOB_A.keys == EXAMPLE_KEYS and JOB_A.base == 100 and JOB_A.epoch == 0x5EED0007
    assert send(0) == [] and send(1) == []
    outputs = send(2)
    assert sorted(port for port, _ in outputs) == [1, 2, 3]
    for port, frame in outputs:
        fields = frame_fields(frame)
        assert fields["p4r.values"][:3] == [6, 0, -(2**31)]
        assert fields["p4r.exp"] == 130 and fields["p4r.rank"] == 2
        assert fields["p4r.key"] == EXAMPLE_KEYS[port - 1]
    assert model.register("MyIngress.bitmap", 2048 + 101) == 0b111
    assert send(1) == [], "a second DATA is a duplicate"
    asked = data_packet(
        H2, 7, 1, 1, None, set_bit=1, seq=EXAMPLE_SEQ, key=EXAMPLE_KEYS[1], msg_type=MsgType.QUERY
    )
    replay = model.send(2, asked)
    assert [port for port, _ in replay] == [2]
    assert frame_fields(replay[0][1])["ip.dst"] == H2.ip

    fresh = ProtocolModel()
    for step in standard_setup():
        install(fresh, step)
    model = fresh
    send(0)
    send(1)
    aborted = send(2, call=0x20000061)
    assert {frame_fields(f)["p4r.msg_type"] for _, f in aborted} == {MsgType.ABORT}
    assert {frame_fields(f)["p4r.aux"] for _, f in aborted} == {EXAMPLE_CALL}
