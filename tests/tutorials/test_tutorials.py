"""p4lang/tutorials exercises, each a program written here from the exercise's description, run in
the embedded switch's executor packet by packet: what the exercise says must come out, comes out.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.runtime.pipeline import Pipeline

HERE = Path(__file__).parent
MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def load(name: str, backend: str) -> Pipeline:
    program, info = compile_program(HERE / f"{name}.p4")
    return new_pipeline(program, info, backend)


# ------------------------------------------------------------------------- calc


def calc_frame(op: bytes, a: int, b: int, magic: bytes = b"P4\x01") -> bytes:
    return MAC_B + MAC_A + b"\x12\x34" + magic + op + struct.pack(">III", a, b, 0)


@pytest.mark.parametrize(
    ("op", "a", "b", "result"),
    [
        (b"+", 7, 5, 12),
        (b"-", 7, 9, 2**32 - 2),
        (b"&", 0b1100, 0b1010, 0b1000),
        (b"|", 1, 2, 3),
        (b"^", 6, 3, 5),
    ],
)
def test_calc_answers_to_the_sender_with_the_result(
    op: bytes, a: int, b: int, result: int, backend: str
) -> None:
    ((port, frame),) = load("calc", backend).process(3, calc_frame(op, a, b))
    assert port == 3  # back out of the port it came in on
    assert frame[:12] == MAC_A + MAC_B  # addresses swapped
    assert struct.unpack(">III", frame[18:30]) == (a, b, result)


def test_calc_drops_unknown_operators_and_foreign_packets(backend: str) -> None:
    calc = load("calc", backend)
    assert calc.process(1, calc_frame(b"*", 1, 2)) == []
    assert calc.process(1, calc_frame(b"+", 1, 2, magic=b"P5\x01")) == []  # lookahead says: not calc
    assert calc.process(1, calc_frame(b"+", 1, 2)[:20]) == []  # too short to look ahead


# ---------------------------------------------------------------- source_routing

IPV4 = bytes.fromhex("450000140000000040110000") + bytes([10, 0, 1, 1, 10, 0, 2, 2])


def routed(*ports: int) -> bytes:
    hops = b"".join(
        struct.pack(">H", (1 << 15 if i == len(ports) - 1 else 0) | p) for i, p in enumerate(ports)
    )
    return MAC_B + MAC_A + b"\x12\x34" + hops + IPV4


def test_source_routing_pops_one_hop_per_switch(backend: str) -> None:
    switch = load("source_routing", backend)
    ((port, frame),) = switch.process(1, routed(4, 2, 3))
    assert port == 4
    assert frame == routed(2, 3)  # the first hop is gone, the rest intact
    ((port, frame),) = switch.process(1, frame)
    assert (port, frame) == (2, routed(3))


def test_source_routing_last_hop_restores_ipv4_and_decrements_ttl(backend: str) -> None:
    ((port, frame),) = load("source_routing", backend).process(1, routed(3))
    assert port == 3
    assert frame[12:14] == b"\x08\x00"
    assert frame[14:] == IPV4[:8] + bytes([IPV4[8] - 1]) + IPV4[9:]


def test_source_routing_drops_packets_without_a_route(backend: str) -> None:
    assert load("source_routing", backend).process(1, MAC_B + MAC_A + b"\x08\x00" + IPV4) == []


def test_source_routing_more_hops_than_the_stack_holds_is_a_parser_error_not_a_crash(backend: str) -> None:
    # Ten hops overflow the 9-entry stack: StackOutOfBounds stops the parser; ingress still runs.
    out = load("source_routing", backend).process(1, routed(*range(1, 11)))
    assert [port for port, _ in out] == [1]
