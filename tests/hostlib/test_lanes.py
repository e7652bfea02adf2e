"""Shared-memory lanes between the embedded switch and the ranks on its host (docs/softswitch.md, *Lanes*).

A lane carries the datagrams UDP would carry, so a sum through a lane is the sum through UDP. What a
lane adds is tested here against the real p4reduce-switch (native loop) and controller: ranks use lanes
when they can and UDP when they cannot (lanes off on either side, every lane taken, the lane closed
under them); a lane is its rank's alone (a request must carry the rank's own UDP socket, and each lane
is a memfd of its own); a rank that dies gives its lane back; and a rank that writes nonsense into its
rings loses its lane, counted, while every other rank's sum stays exact.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from contracts.lanes import LANES_VERSION, REPLY, REQUEST, socket_name
from contracts.protocol import UDP_PORT
from hostlib import Communicator
from hostlib.lanes import request_lane
from hostlib.launch import ROOT, Services, free_loopback_address, free_port, services
from hostlib.native import PacketEngine, _native
from hostlib.verify import check, make_input
from softswitch.dataplane.pcap import read_pcap
from tests.hostlib.test_through_switch import on_workers

SIZE = 50_000  # values per call: a few hundred datagrams each way per rank


@contextmanager
def switch(tmp_path: Path, pcap: Path | None = None) -> Iterator[tuple[Services, dict[str, int]]]:
    """A switch and controller; the dict is filled with the switch's packet counters once it stopped."""
    counters: dict[str, int] = {}
    stats = tmp_path / "stats.json"
    with services(tmp_path / "logs", ROOT / "build", pool_size=16, stats_file=stats, pcap=pcap) as svc:
        yield svc, counters
    counters.update(json.loads(stats.read_text()))


def exact_sum(comm: Communicator, rank: int, world: int) -> bool:
    ok, _, _ = check(
        comm.allreduce(make_input(rank, SIZE, "int32")), world, SIZE, "int32", k=comm.job.values_per_packet
    )
    return ok


def engine(comm: Communicator) -> PacketEngine:
    assert isinstance(comm.engine, PacketEngine), "these tests need the native engine (make native)"
    return comm.engine


class Holder:
    """A lane user that only keeps the lane's memory: a rank that asks, then writes what it likes."""

    def __init__(self) -> None:
        self.memory: mmap.mmap | None = None

    def attach_lane(self, memfd: int, lease: int) -> None:
        self.memory = mmap.mmap(memfd, _native.LANE_BYTES)

    def word(self, offset: int) -> int:
        assert self.memory is not None
        return int(struct.unpack_from("<I", self.memory, offset)[0])

    def set_word(self, offset: int, value: int) -> None:
        assert self.memory is not None
        struct.pack_into("<I", self.memory, offset, value)


def hold_lane(svc: Services) -> tuple[socket.socket, socket.socket | None, Holder]:
    """A UDP socket of its own on loopback, and the lane it was granted (None: none free)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.99", 0))
    sock.connect(svc.switch_address)
    holder = Holder()
    return sock, request_lane(sock, svc.switch_address, holder), holder


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------------------------------------------------------------ the lanes


def test_ranks_on_the_switchs_host_send_every_datagram_through_their_lanes_and_the_sum_is_exact(
    tmp_path: Path,
) -> None:
    def work(comm: Communicator, rank: int) -> tuple[bool, bool, dict[str, int]]:
        ok = exact_sum(comm, rank, 3) and exact_sum(comm, rank, 3)
        return ok, engine(comm).lane_attached, engine(comm).transport_counters()

    with switch(tmp_path) as (svc, counters):
        results = on_workers(svc, "lanes", 3, work)
    for ok, attached, carried in results:  # type: ignore[misc]
        assert ok and attached
        assert carried["lane_sent"] > 0 and carried["lane_received"] > 0
        assert carried["udp_sent"] == carried["udp_received"] == 0, carried
    assert counters["lane_rx"] == counters["rx"] > 0 and counters["lane_tx"] > 0
    assert counters.get("lane_corrupt", 0) == 0


@pytest.mark.parametrize("side", ["rank", "switch"])
def test_with_lanes_off_on_either_side_the_same_sum_goes_by_udp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    def work(comm: Communicator, rank: int) -> tuple[bool, bool, dict[str, int]]:
        return exact_sum(comm, rank, 2), engine(comm).lane_attached, engine(comm).transport_counters()

    if side == "switch":  # the switch serves no lanes: a rank's request is refused at once
        monkeypatch.setenv("P4REDUCE_LANES", "0")
    with switch(tmp_path) as (svc, counters):
        monkeypatch.setenv("P4REDUCE_LANES", "0" if side == "rank" else "1")
        results = on_workers(svc, "udp", 2, work)
    for ok, attached, carried in results:  # type: ignore[misc]
        assert ok and not attached
        assert carried["lane_sent"] == 0 and carried["udp_sent"] > 0
    assert counters.get("lane_rx", 0) == 0 and counters["rx"] > 0


def test_when_every_lane_is_taken_ranks_use_udp_and_a_lane_given_back_is_granted_again(
    tmp_path: Path,
) -> None:
    with switch(tmp_path) as (svc, _):
        held = [hold_lane(svc) for _ in range(_native.LANES)]
        assert all(lease is not None for _, lease, _ in held)
        assert hold_lane(svc)[1] is None  # one more: none free

        def work(comm: Communicator, rank: int) -> tuple[bool, bool]:
            return exact_sum(comm, rank, 2), engine(comm).lane_attached

        assert on_workers(svc, "full", 2, work) == [(True, False)] * 2
        sock, lease, _ = held.pop()
        assert lease is not None
        lease.close()
        assert wait_for(lambda: hold_lane(svc)[1] is not None)


@pytest.mark.parametrize("forked", [False, True], ids=["alone", "with-a-forked-child-alive"])
def test_the_lane_of_a_rank_killed_with_sigkill_is_free_again_at_once(tmp_path: Path, forked: bool) -> None:
    """With a forked child of the rank still alive too (a DataLoader worker, say): the child let go of
    its copy of the lease when it was forked."""
    with switch(tmp_path) as (svc, _):
        held = [hold_lane(svc) for _ in range(_native.LANES - 1)]
        child = subprocess.Popen(
            [sys.executable, "-c", HOLDING_CHILD, *map(str, svc.switch_address), str(int(forked))],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        grandchild = 0
        try:
            assert child.stdout is not None
            answer, grandchild = child.stdout.readline().split()
            assert answer == "held"
            assert hold_lane(svc)[1] is None  # every lane taken, the last by the child
            child.kill()
            child.wait(timeout=10)
            assert wait_for(lambda: hold_lane(svc)[1] is not None, timeout=2.0)
        finally:
            child.kill()
            if int(grandchild):
                os.kill(int(grandchild), 9)
        del held


HOLDING_CHILD = """
import os, socket, sys, time
from hostlib.lanes import request_lane
class Keep:
    def attach_lane(self, memfd, lease): pass
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.98", 0))
switch = (sys.argv[1], int(sys.argv[2]))
sock.connect(switch)
lease = request_lane(sock, switch, Keep())
forked = os.fork() if sys.argv[3] == "1" else 0
if sys.argv[3] == "1" and forked == 0:
    time.sleep(60)
    os._exit(0)
print("held" if lease is not None else "none", forked, flush=True)
time.sleep(60)
"""


# ------------------------------------------------------------------------------------------ hostile ranks


@pytest.mark.parametrize(
    "request_fds",
    [
        pytest.param(lambda: [], id="no-socket"),
        pytest.param(lambda: [socket.socket(socket.AF_INET, socket.SOCK_STREAM)], id="a-tcp-socket"),
        pytest.param(lambda: [socket.socket(socket.AF_INET, socket.SOCK_DGRAM)], id="an-unbound-udp-socket"),
    ],
)
def test_a_lane_request_without_the_ranks_own_udp_socket_is_refused(
    tmp_path: Path, request_fds: Callable[[], list[socket.socket]]
) -> None:
    """The address a lane serves is read from the socket a rank passes, so none can claim another's."""
    with switch(tmp_path) as (svc, _):
        passed = request_fds()
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
            connection.settimeout(5)
            connection.connect(socket_name(*svc.switch_address))
            socket.send_fds(connection, [REQUEST.pack(LANES_VERSION)], [s.fileno() for s in passed])
            assert connection.recv(REPLY.size) == b""  # closed without an answer
        for s in passed:
            s.close()
        assert hold_lane(svc)[1] is not None  # and the switch serves the next rank


@pytest.mark.parametrize("spoil", ["an-impossible-tail", "a-slot-longer-than-its-room"])
def test_a_rank_that_spoils_its_ring_loses_its_lane_and_every_other_sum_stays_exact(
    tmp_path: Path, spoil: str
) -> None:
    with switch(tmp_path) as (svc, counters):
        sock, lease, hostile = hold_lane(svc)
        assert lease is not None
        if spoil == "an-impossible-tail":
            hostile.set_word(_native.LANE_UP_TAIL, 10 * _native.LANE_SLOTS)
        else:
            hostile.set_word(_native.LANE_UP_SLOTS, _native.LANE_SLOT_BYTES)  # slot 0's length
            hostile.set_word(_native.LANE_UP_TAIL, 1)
        sock.send(b"")  # its doorbell
        assert wait_for(lambda: hostile.word(_native.LANE_CLOSED) == 1)

        def work(comm: Communicator, rank: int) -> tuple[bool, bool]:
            return exact_sum(comm, rank, 2), engine(comm).lane_attached

        assert on_workers(svc, "beside", 2, work) == [(True, True)] * 2
    assert counters["lane_corrupt"] == 1


def test_a_consumer_index_spoiled_mid_job_closes_the_lane_and_the_results_go_by_udp(tmp_path: Path) -> None:
    """The switch writes results into a ring whose head (the rank's index) says the impossible: it
    closes that lane in the middle of its turn, safely, and the rank's results go by UDP."""

    def work(comm: Communicator, rank: int) -> tuple[bool, int]:
        first = exact_sum(comm, rank, 2)
        lease = None
        if rank == 0:  # a lane for rank 0's own socket, whose results ring then says the impossible
            hostile = Holder()
            lease = request_lane(comm.sock, comm.job.switch_address, hostile)
            assert lease is not None
            hostile.set_word(_native.LANE_DOWN_HEAD, 7 * _native.LANE_SLOTS)
        later = all(exact_sum(comm, rank, 2) for _ in range(3))
        if lease is not None:
            lease.close()
        return first and later, engine(comm).transport_counters()["udp_received"]

    with switch(tmp_path) as (svc, counters):
        (ok0, udp0), (ok1, _) = on_workers(svc, "spoiled", 2, work)  # type: ignore[misc]
    assert ok0 and ok1 and udp0 > 0
    assert counters["lane_corrupt"] == 1


def test_a_rank_whose_lane_the_switch_closed_goes_on_by_udp_and_its_sum_is_exact(tmp_path: Path) -> None:
    """Here the lane is taken from under the rank by a second request for its own socket (what a new
    engine on the same socket does): the switch marks the old lane closed, and the rank lets it go."""

    def work(comm: Communicator, rank: int) -> tuple[bool, bool, bool, dict[str, int]]:
        first = exact_sum(comm, rank, 2)
        attached = engine(comm).lane_attached
        if rank == 0:  # asked, then given back at once: neither lane carries rank 0's datagrams any more
            lease = request_lane(comm.sock, comm.job.switch_address, Holder())
            assert lease is not None
            lease.close()
        second = exact_sum(comm, rank, 2) and exact_sum(comm, rank, 2)
        return (
            first and second,
            attached,
            engine(comm).engine.lane_attached,
            engine(comm).transport_counters(),
        )

    with switch(tmp_path) as (svc, _):
        results = on_workers(svc, "taken", 2, work)
    (ok0, before0, after0, carried0), (ok1, before1, after1, _) = results  # type: ignore[misc]
    assert ok0 and ok1 and before0 and before1
    assert not after0 and after1  # rank 0 let its closed lane go; rank 1 kept its own
    assert carried0["udp_sent"] > 0


def test_results_for_a_lane_whose_ring_is_full_go_by_udp_each_counted_and_captured_once(
    tmp_path: Path,
) -> None:
    """Rank 0's socket is given a second lane whose results ring stays full (its reader never reads):
    the switch sends each of rank 0's results by UDP instead, so the sums stay exact, and every frame
    out is counted and captured once, whichever way it went."""

    def work(comm: Communicator, rank: int) -> tuple[bool, int]:
        lease = None
        if rank == 0:
            stalled = Holder()
            lease = request_lane(comm.sock, comm.job.switch_address, stalled)
            assert lease is not None
            stalled.set_word(_native.LANE_DOWN_HEAD, (1 << 32) - _native.LANE_SLOTS)  # full, yet consistent
        ok = all(exact_sum(comm, rank, 2) for _ in range(3))
        if lease is not None:
            lease.close()
        return ok, engine(comm).transport_counters()["udp_received"]

    with switch(tmp_path, pcap=tmp_path / "pcap") as (svc, counters):
        (ok0, udp0), (ok1, udp1) = on_workers(svc, "full-ring", 2, work)  # type: ignore[misc]
    assert ok0 and ok1
    assert udp0 > 0 and udp1 == 0  # rank 1's results still went through its own lane
    assert counters["lane_full"] >= udp0 and counters.get("lane_corrupt", 0) == 0
    captured = read_pcap(next((tmp_path / "pcap").glob("*_out.pcap")))
    assert len(captured) == counters["tx"] and counters.get("dropped_capture", 0) == 0


def test_a_process_holding_the_lanes_socket_name_first_keeps_the_switch_from_starting() -> None:
    """It would be handed the ranks' datagrams and could answer them: the switch refuses, naming it."""
    address = free_loopback_address()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as squatter:
        squatter.bind(socket_name(address, UDP_PORT))
        squatter.listen(1)
        done = subprocess.run(
            switch_command("--udp-port", f"1@{address}:{UDP_PORT}"),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
    assert done.returncode == 1
    assert "another process holds the shared-memory lanes' socket" in done.stderr, done.stderr


@pytest.mark.parametrize("why", ["python-loop", "lanes-off"])
def test_a_switch_serving_no_lanes_still_holds_their_name_and_refuses_every_rank(why: str) -> None:
    address = free_loopback_address()
    extra = ("--backend", "python") if why == "python-loop" else ()
    env = {**os.environ, "P4REDUCE_LANES": "0"} if why == "lanes-off" else None
    switch = subprocess.Popen(
        switch_command("--udp-port", f"1@{address}:{UDP_PORT}", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert switch.stdout is not None and "p4reduce-switch ready" in switch.stdout.readline()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.99", 0))
            assert request_lane(sock, (address, UDP_PORT), Holder()) is None  # refused: UDP
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as squatter, pytest.raises(OSError):
            squatter.bind(socket_name(address, UDP_PORT))
    finally:
        switch.terminate()
        switch.wait(timeout=30)


def switch_command(*args: str) -> list[str]:
    """p4reduce-switch with no program, on a free P4Runtime port."""
    grpc = f"127.0.0.1:{free_port()}"
    return [sys.executable, "-m", "softswitch.daemon", "--no-p4", "--grpc-server-addr", grpc, *args]


def test_the_lane_layout_the_tests_write_is_the_one_the_engine_was_built_with() -> None:
    assert _native.LANE_SLOTS & (_native.LANE_SLOTS - 1) == 0
    assert _native.LANE_UP_TAIL < _native.LANE_UP_HEAD < _native.LANE_UP_SLOTS < _native.LANE_DOWN_TAIL
    assert _native.LANE_BYTES >= _native.LANE_DOWN_HEAD + _native.LANE_SLOTS * _native.LANE_SLOT_BYTES
