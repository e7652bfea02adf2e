"""P4Runtime abuse, as a table for docs/reliability.md: each case, the code returned, the spec's code.

The cases and the expectations are tests/switch/test_switch_hardening.py's;
this module runs them in both conformance modes, checks them again, and
records what was answered, with the cost of starving attempts.
"""

from __future__ import annotations

import queue
import sys
import time
from pathlib import Path

import grpc
from finsy.proto import p4r
from rel_support import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "switch"))
from switch_support import StreamClient, become_primary, stop_server  # noqa: E402
from test_switch_hardening import CASES, attempt, push, started  # noqa: E402

from softswitch.p4runtime.conformance import Conformance  # noqa: E402


def test_every_case_answers_as_the_table_says_in_both_modes() -> None:
    rows = []
    for conformance in Conformance:
        for case, (spec, bmv2) in CASES.items():
            server = started(conformance)
            try:
                primary = become_primary(server.stub, 10)
                push(server)
                got = attempt(case, server)
                primary.close()
            finally:
                stop_server(server)
            expected = bmv2 if conformance.bmv2 and bmv2 is not None else spec
            assert got == expected, (case, conformance)
            rows.append((case, conformance.value, got.name, spec.name))
    record("p4runtime-codes", rows=rows)


def test_idle_streams_cannot_starve_the_switch() -> None:
    server = started()
    clients: list[StreamClient] = []
    try:
        clients.append(become_primary(server.stub, 10))
        push(server)
        clients += [StreamClient(server.stub) for _ in range(40)]
        refused = 0
        for client in clients[1:]:
            try:
                refused += client.recv_error(timeout=0.5).code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            except queue.Empty:
                continue
        started_at = time.monotonic()
        server.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=2)
        capabilities = time.monotonic() - started_at
        request = p4r.ReadRequest(device_id=1, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
        started_at = time.monotonic()
        list(server.stub.Read(request, timeout=2))
        read = time.monotonic() - started_at
    finally:
        for client in clients:
            client.close()
        stop_server(server)
    assert refused == 25 and capabilities < 1 and read < 1
    latency = {"capabilities_ms": round(capabilities * 1000, 1), "read_ms": round(read * 1000, 1)}
    record("p4runtime-streams", idle_streams=40, refused=refused, **latency)
