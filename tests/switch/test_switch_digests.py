"""Digests over P4Runtime, as PI (simple_switch_grpc) serves them: DigestEntry writes and reads,
DigestList messages to the primary, DigestListAck, the cache of unacknowledged samples, list size
and timeouts. The program is tests/executor/digests.p4 (digest `learn_t` = source MAC + ingress
port); `Digests` is driven with a clock the test sets, the server with real time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4i, p4r
from switch_support import DEVICE_ID, Server, StreamClient, become_primary, start_server, stop_server

from softswitch import program as program_file
from softswitch.backends.loader import load_pipeline
from softswitch.p4c import compile_program
from softswitch.p4runtime.arbitration import uint128
from softswitch.p4runtime.digests import Digests
from softswitch.p4runtime.errors import P4RuntimeError

PROGRAM = Path(__file__).resolve().parents[1] / "executor/digests.p4"
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
SECOND = 1_000_000_000


@pytest.fixture(scope="module")
def compiled() -> tuple[bytes, p4i.P4Info]:
    checked, info = compile_program(PROGRAM)
    return program_file.dumps(checked), info


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def digests(info: p4i.P4Info) -> tuple[Digests, Clock, int]:
    clock = Clock()
    return Digests(info, clock), clock, info.digests[0].preamble.id


def entry(
    digest_id: int, max_timeout_ns: int = 0, max_list_size: int = 1, ack_timeout_ns: int = 0
) -> p4r.DigestEntry:
    config = p4r.DigestEntry.Config(
        max_timeout_ns=max_timeout_ns, max_list_size=max_list_size, ack_timeout_ns=ack_timeout_ns
    )
    return p4r.DigestEntry(digest_id=digest_id, config=config)


def sample(n: int) -> bytes:
    return bytes(5) + bytes([n]) + b"\x00\x03"  # learn_t: src 00..0n, port 3


def listed(messages: list[p4r.DigestList]) -> list[tuple[int, list[bytes]]]:
    """(list id, each sample's source address) per message."""
    return [(m.list_id, [d.struct.members[0].bitstring for d in m.data]) for m in messages]


# ------------------------------------------------------------------------------ configuration


def code_of(call: object) -> grpc.StatusCode:
    with pytest.raises(P4RuntimeError) as error:
        call()  # type: ignore[operator]
    return error.value.code


def test_entries_are_inserted_modified_and_deleted_as_pi_answers(compiled: tuple[bytes, p4i.P4Info]) -> None:
    d, _, learn = digests(compiled[1])
    assert code_of(lambda: d.write(INSERT, entry(12345))) == grpc.StatusCode.NOT_FOUND  # not a digest id
    assert code_of(lambda: d.write(MODIFY, entry(learn))) == grpc.StatusCode.NOT_FOUND  # not configured
    assert code_of(lambda: d.write(DELETE, entry(learn))) == grpc.StatusCode.NOT_FOUND
    d.write(INSERT, entry(learn, max_list_size=4))
    assert code_of(lambda: d.write(INSERT, entry(learn))) == grpc.StatusCode.ALREADY_EXISTS
    assert (
        code_of(lambda: d.write(MODIFY, entry(learn, max_timeout_ns=-1))) == grpc.StatusCode.INVALID_ARGUMENT
    )
    d.write(MODIFY, entry(learn, max_list_size=2))
    assert list(d.read(p4r.DigestEntry(digest_id=learn))) == [entry(learn, max_list_size=2)]
    assert list(d.read(p4r.DigestEntry())) == [entry(learn, max_list_size=2)]  # id 0: every configured one
    d.write(DELETE, entry(learn))
    assert code_of(lambda: list(d.read(p4r.DigestEntry(digest_id=learn)))) == grpc.StatusCode.NOT_FOUND
    assert list(d.read(p4r.DigestEntry())) == []


def test_a_digest_type_a_server_cannot_deliver_is_refused_at_pipeline_push(
    compiled: tuple[bytes, p4i.P4Info],
) -> None:
    info = p4i.P4Info()
    info.CopyFrom(compiled[1])
    info.type_info.structs["learn_t"].members[0].type_spec.bool.SetInParent()
    assert code_of(lambda: Digests(info)) == grpc.StatusCode.UNIMPLEMENTED
    info.digests[0].type_spec.struct.name = "missing_t"
    assert code_of(lambda: Digests(info)) == grpc.StatusCode.INVALID_ARGUMENT


# ----------------------------------------------------------------------------------- messages


def test_nothing_is_sent_for_a_digest_nobody_configured(compiled: tuple[bytes, p4i.P4Info]) -> None:
    d, _, _ = digests(compiled[1])
    assert d.learn(0, sample(1)) == []


def test_without_buffering_each_sample_is_a_list_numbered_from_one(
    compiled: tuple[bytes, p4i.P4Info],
) -> None:
    d, clock, learn = digests(compiled[1])
    d.write(INSERT, entry(learn))
    clock.now = 42
    (first,) = d.learn(0, sample(1))
    assert (first.digest_id, first.list_id, first.timestamp) == (learn, 1, 42)
    assert [m.bitstring for m in first.data[0].struct.members] == [b"\x01", b"\x03"]  # canonical
    assert listed(d.learn(0, sample(1)) + d.learn(0, sample(2))) == [(2, [b"\x01"]), (3, [b"\x02"])]


def test_a_sample_not_yet_acknowledged_is_not_sent_again(compiled: tuple[bytes, p4i.P4Info]) -> None:
    d, _, learn = digests(compiled[1])
    d.write(INSERT, entry(learn, ack_timeout_ns=SECOND))
    assert listed(d.learn(0, sample(1))) == [(1, [b"\x01"])]
    assert d.learn(0, sample(1)) == []
    assert listed(d.learn(0, sample(2))) == [(2, [b"\x02"])]
    d.ack(learn, 1)
    d.ack(learn, 99)  # an unknown list: ignored
    assert listed(d.learn(0, sample(1))) == [(3, [b"\x01"])]
    assert d.learn(0, sample(2)) == []


def test_an_unacknowledged_list_expires_after_ack_timeout(compiled: tuple[bytes, p4i.P4Info]) -> None:
    d, clock, learn = digests(compiled[1])
    d.write(INSERT, entry(learn, ack_timeout_ns=SECOND))
    d.learn(0, sample(1))
    clock.now = SECOND - 1
    assert d.sweep() == [] and d.learn(0, sample(1)) == []
    clock.now = SECOND
    assert d.sweep() == []
    assert listed(d.learn(0, sample(1))) == [(2, [b"\x01"])]


def test_samples_gather_until_the_list_is_full_or_max_timeout_passes(
    compiled: tuple[bytes, p4i.P4Info],
) -> None:
    d, clock, learn = digests(compiled[1])
    d.write(INSERT, entry(learn, max_timeout_ns=SECOND, max_list_size=3))
    assert d.learn(0, sample(1)) == [] and d.learn(0, sample(2)) == []
    assert listed(d.learn(0, sample(3))) == [(1, [b"\x01", b"\x02", b"\x03"])]
    clock.now = 10
    d.learn(0, sample(4))
    clock.now = 10 + SECOND - 1
    assert d.sweep() == []
    clock.now = 10 + SECOND
    assert listed(d.sweep()) == [(2, [b"\x04"])]
    assert d.sweep() == []


def test_deleting_the_entry_forgets_the_cache(compiled: tuple[bytes, p4i.P4Info]) -> None:
    d, _, learn = digests(compiled[1])
    d.write(INSERT, entry(learn, ack_timeout_ns=SECOND))
    d.learn(0, sample(1))
    d.write(DELETE, entry(learn))
    assert d.learn(0, sample(1)) == []  # not configured any more
    d.write(INSERT, entry(learn, ack_timeout_ns=SECOND))
    assert listed(d.learn(0, sample(1))) == [(2, [b"\x01"])]  # sent again; list ids go on


# ------------------------------------------------------------------------- through the server


@pytest.fixture
def served(
    compiled: tuple[bytes, p4i.P4Info], dataplane_class: type
) -> Iterator[tuple[Server, StreamClient]]:
    """A server running digests.p4 on the default backend and either packet loop, with a primary client."""
    server = start_server(dataplane_class([], cpu_port=None), loader=load_pipeline)
    stop = threading.Event()
    loop = threading.Thread(target=server.dataplane.run, args=(stop,), daemon=True)
    loop.start()
    client = become_primary(server.stub, 10)
    device_config, info = compiled
    server.stub.SetForwardingPipelineConfig(
        p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID,
            election_id=uint128(10),
            config=p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
    )
    yield server, client
    client.close()
    stop.set()
    loop.join(timeout=5)
    stop_server(server)


def write(server: Server, kind: int, digest_entry: p4r.DigestEntry) -> None:
    update = p4r.Update(type=kind, entity=p4r.Entity(digest_entry=digest_entry))
    server.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=uint128(10), updates=[update]))


def next_digest(client: StreamClient, timeout: float = 5.0) -> p4r.DigestList:
    while True:
        reply = client.recv(timeout)
        if reply.HasField("digest"):
            return reply.digest


def frame(src: int) -> bytes:
    return bytes(6) + bytes(5) + bytes([src]) + b"\x88\x88\x01"  # op 1: digest of src and port


def test_the_primary_receives_digest_lists_and_acks_them(
    served: tuple[Server, StreamClient], compiled: tuple[bytes, p4i.P4Info]
) -> None:
    server, client = served
    learn = compiled[1].digests[0].preamble.id
    write(server, INSERT, entry(learn, ack_timeout_ns=60 * SECOND))
    reply = server.stub.Read(
        p4r.ReadRequest(
            device_id=DEVICE_ID, entities=[p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=learn))]
        )
    )
    assert [e.digest_entry for r in reply for e in r.entities] == [entry(learn, ack_timeout_ns=60 * SECOND)]
    server.dataplane.inject(3, frame(1))
    message = next_digest(client)
    assert (message.digest_id, message.list_id) == (learn, 1)
    assert [m.bitstring for m in message.data[0].struct.members] == [b"\x01", b"\x03"]
    server.dataplane.inject(3, frame(1))  # the same sample, not acknowledged: not sent again
    server.dataplane.inject(3, frame(2))
    assert next_digest(client).list_id == 2
    client.send(p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(digest_id=learn, list_id=1)))
    time.sleep(0.2)  # the ack travels on the stream
    server.dataplane.inject(3, frame(1))
    message = next_digest(client)
    assert (message.list_id, message.data[0].struct.members[0].bitstring) == (3, b"\x01")


def test_a_list_gathered_for_max_timeout_is_sent_by_the_server_on_its_own(
    served: tuple[Server, StreamClient], compiled: tuple[bytes, p4i.P4Info]
) -> None:
    server, client = served
    learn = compiled[1].digests[0].preamble.id
    # Two seconds: on a loaded 2-core CI machine, with the Python backend, the second frame once came
    # after a half-second timer had sent the list with the first alone.
    write(server, INSERT, entry(learn, max_timeout_ns=2 * SECOND, max_list_size=100))
    server.dataplane.inject(3, frame(1))
    server.dataplane.inject(3, frame(2))
    message = next_digest(client)
    assert [d.struct.members[0].bitstring for d in message.data] == [b"\x01", b"\x02"]


def test_digests_without_a_primary_are_counted_not_sent(
    served: tuple[Server, StreamClient], compiled: tuple[bytes, p4i.P4Info]
) -> None:
    server, client = served
    write(server, INSERT, entry(compiled[1].digests[0].preamble.id))
    client.close()
    deadline = time.monotonic() + 5
    while server.service.arbitration.primary() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    server.dataplane.inject(3, frame(1))
    assert server.dataplane.stats["dropped_digest_no_primary"] == 1
