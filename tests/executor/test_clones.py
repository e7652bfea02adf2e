"""clone and clone_preserving_field_list (v1model, bmv2 semantics) on both backends, with
tests/executor/clones.p4: a frame's first byte after Ethernet asks for a clone at ingress (1, 2 with
field list 1, 5 while dropping the packet itself) or at egress (3, 4 for ever); egress writes into
each copy what it saw. Clone session 5 has two replicas (port 3 rid 1, port 4 rid 2), session 6 one
(port 7 rid 9).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from softswitch.runtime.pipeline import Pipeline

ETHERNET = bytes(12) + b"\x88\x88"
PAYLOAD = b"payload"
NORMAL, INGRESS_CLONE, EGRESS_CLONE = 0, 1, 2
UNMARKED, INGRESS_MARK, EGRESS_MARK = 0, 0xEE, 0xE0


def switch(backend: str, sessions: bool = True) -> Pipeline:
    program, info = compile_program(Path(__file__).with_name("clones.p4"))
    pipeline = new_pipeline(program, info, backend)
    if sessions:
        pipeline.state.pre.clone_sessions[5] = (st.Replica(3, 1), st.Replica(4, 2))
        pipeline.state.pre.clone_sessions[6] = (st.Replica(7, 9),)
    return pipeline


def seen(
    op: int,
    mark: int = 0,
    instance_type: int = 0,
    rid: int = 0,
    port: int = 0,
    kept: int = 0,
    unkept: int = 0,
) -> bytes:
    return ETHERNET + bytes([op, mark, instance_type, rid, port, kept, unkept]) + PAYLOAD


def original(op: int, mark: int = INGRESS_MARK, kept: int = 0) -> tuple[int, bytes]:
    return (2, seen(op, mark, NORMAL, 0, 2, kept, 0xAA))


def test_clone_at_ingress_sends_the_packet_as_it_came_in_to_every_replica_of_the_session(
    backend: str,
) -> None:
    # The clones come first, each with its replica's port and rid; they were parsed again from the
    # received frame (no ingress mark) and start with fresh metadata (unkept is 0, not 0xAA).
    assert switch(backend).process(1, seen(1)) == [
        (3, seen(1, UNMARKED, INGRESS_CLONE, 1, 3)),
        (4, seen(1, UNMARKED, INGRESS_CLONE, 2, 4)),
        original(1),
    ]


def test_clone_preserving_field_list_keeps_the_fields_values_at_the_end_of_ingress(backend: str) -> None:
    assert switch(backend).process(1, seen(2)) == [
        (3, seen(2, UNMARKED, INGRESS_CLONE, 1, 3, kept=0x77)),
        (4, seen(2, UNMARKED, INGRESS_CLONE, 2, 4, kept=0x77)),
        original(2, kept=0x77),
    ]


def test_clone_at_egress_copies_the_headers_as_egress_left_them(backend: str) -> None:
    # The E2E clone goes before the packet itself is deparsed; it has egress's mark and the field
    # list's value at the end of egress, and runs egress again as instance type 2.
    assert switch(backend).process(1, seen(3)) == [
        (7, seen(3, EGRESS_MARK, EGRESS_CLONE, 9, 7, kept=0x33)),
        original(3, mark=EGRESS_MARK),
    ]


def test_a_clone_goes_out_although_the_packet_itself_is_dropped(backend: str) -> None:
    assert switch(backend).process(1, seen(5)) == [
        (3, seen(5, UNMARKED, INGRESS_CLONE, 1, 3)),
        (4, seen(5, UNMARKED, INGRESS_CLONE, 2, 4)),
    ]


def test_a_session_nobody_configured_clones_nothing(backend: str) -> None:
    assert switch(backend, sessions=False).process(1, seen(1)) == [original(1)]


def test_clone_sessions_written_later_take_effect_at_once(backend: str) -> None:
    pipeline = switch(backend, sessions=False)
    pipeline.state.pre.clone_sessions[5] = (st.Replica(9, 4),)
    assert pipeline.process(1, seen(1)) == [(9, seen(1, UNMARKED, INGRESS_CLONE, 4, 9)), original(1)]
    del pipeline.state.pre.clone_sessions[5]
    assert pipeline.process(1, seen(1)) == [original(1)]


def test_egress_clones_of_egress_clones_fail_the_packet_after_sixteen_passes(backend: str) -> None:
    pipeline = switch(backend)
    with pytest.raises(Exception, match="more than 16 passes"):
        pipeline.process(1, seen(4))
    assert pipeline.process(1, seen(1))[-1] == original(1)  # and the switch goes on
