"""resubmit and recirculate (v1model), on both backends, with tests/executor/passes.p4: a frame's
first byte after Ethernet asks for one resubmit (1), one recirculation (2) or an endless loop (3);
ingress writes into the frame how many passes it counted (a metadata field kept by field lists 1
and 2), the instance type it saw, and two fields that must start fresh on every pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program
from softswitch.runtime.pipeline import Pipeline

ETHERNET = bytes(12) + b"\x88\x88"
PAYLOAD = b"payload"
NORMAL, RECIRCULATED, RESUBMITTED = 0, 4, 6


def switch(backend: str) -> Pipeline:
    program, info = compile_program(Path(__file__).with_name("passes.p4"))
    return new_pipeline(program, info, backend)


def seen(op: int, passes: int = 0, instance_type: int = 0) -> bytes:
    """The frame with its `seen` header: op, passes, instance type, unkept field, other list's field."""
    return ETHERNET + bytes([op, passes, instance_type, 0, 0]) + PAYLOAD


def test_one_pass_without_a_request(backend: str) -> None:
    assert switch(backend).process(1, seen(0)) == [(2, seen(0, 1, NORMAL))]


def test_resubmit_runs_ingress_again_on_the_frame_as_received_keeping_the_field_list(backend: str) -> None:
    # Port 3 (what the first pass chose after resubmitting) is never used: the resubmitted pass decides.
    # Its header writes are gone (it parses the received frame); the counter field is kept (list 1);
    # the other fields start fresh although the first pass set them.
    assert switch(backend).process(1, seen(1)) == [(2, seen(1, 2, RESUBMITTED))]


def test_recirculate_sends_the_deparsed_frame_through_again_instead_of_out(backend: str) -> None:
    # Egress rewrote op to 0 before recirculating: the second pass parses that frame.
    assert switch(backend).process(1, seen(2)) == [(2, seen(0, 2, RECIRCULATED))]


def test_a_packet_that_loops_for_ever_fails_after_sixteen_passes(backend: str) -> None:
    with pytest.raises(Exception, match="more than 16 passes"):
        switch(backend).process(1, seen(3))
    assert switch(backend).process(1, seen(0)) == [(2, seen(0, 1, NORMAL))]  # and the switch goes on
