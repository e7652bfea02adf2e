"""digest (v1model, bmv2 semantics) on both backends, with tests/executor/digests.p4: each message
leaves the pipeline at the end of ingress as a "frame" to port DIGEST_PORT_BASE + the digest's P4Info
index, its data each member big-endian in whole bytes, before the packet's own frames.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.p4info import build_p4info
from softswitch.runtime.pipeline import DIGEST_PORT_BASE, Pipeline

PROGRAM = Path(__file__).with_name("digests.p4")
SRC = bytes.fromhex("020000000001")
LEARN, NOTE = DIGEST_PORT_BASE, DIGEST_PORT_BASE + 1


def switch(backend: str) -> Pipeline:
    program, info = compile_program(PROGRAM)
    return new_pipeline(program, info, backend)


def frame(op: int) -> bytes:
    return bytes(6) + SRC + b"\x88\x88" + bytes([op])


def learned(src: bytes = SRC, port: int = 3) -> tuple[int, bytes]:
    return (LEARN, src + port.to_bytes(2, "big"))  # bit<48> in 6 bytes, bit<9> in 2


def test_the_p4info_lists_one_digest_per_struct_type_in_order_of_first_call() -> None:
    program, _ = compile_program(PROGRAM)
    info = build_p4info(program)
    assert [d.preamble.name for d in info.digests] == ["learn_t", "note_t"]
    assert [d.preamble.id >> 24 for d in info.digests] == [0x17, 0x17]


def test_a_digest_comes_out_before_the_packet(backend: str) -> None:
    assert switch(backend).process(3, frame(1)) == [learned(), (2, frame(1))]


def test_the_last_digest_call_of_a_pass_wins(backend: str) -> None:
    out = switch(backend).process(3, frame(2))
    assert out == [learned(bytes.fromhex("0000000000ab"), 7), (2, frame(2))]


def test_the_data_is_taken_when_digest_is_called(backend: str) -> None:
    out = switch(backend).process(3, frame(3))
    assert out == [learned(), (2, bytes(12) + b"\x88\x88\x03")]


def test_a_dropped_packet_still_sends_its_digest(backend: str) -> None:
    assert switch(backend).process(3, frame(4)) == [learned()]


def test_signed_members_go_as_their_bit_pattern(backend: str) -> None:
    out = switch(backend).process(3, frame(5))
    assert out == [(NOTE, b"\xfe" + b"\x88\x88" + b"\x01"), (2, frame(5))]


def test_a_digest_asked_for_in_egress_is_ignored_as_bmv2_does(backend: str) -> None:
    assert switch(backend).process(3, frame(6)) == [(2, frame(6))]
