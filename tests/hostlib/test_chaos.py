"""Every result exact, and no stall, through a proxy that duplicates, delays or reorders packets.

Four workers, the real p4reduce-switch and controller, and tests/hostlib/chaos_proxy.py on every
packet both ways: 0.1 %, 1 % and 5 % of packets duplicated (the copy 2..50 ms later), delayed
(2..50 ms) or reordered (held until the next packet of the flow has overtaken it). Protocol version
1 added late duplicates to later uses of a slot (silently wrong sums) and stalled under delay;
version 2 must give every rank the exact int32 sum and the bounded float32 sum, every time.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import CREDENTIAL_ENV, call_metadata
from hostlib import Communicator, JobSpec
from hostlib.launch import ROOT, Services, services
from hostlib.verify import check, make_input
from tests.hostlib.chaos_proxy import ChaosProxy, Faults
from tests.packet_program import PACKET_K

WORLD = 4
SIZE = 12_000  # elements: 188 packets of K = 64 per rank and call


@pytest.fixture(scope="module")
def switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # K = 64 (tests/packet_program.py), not the embedded switch's default of 1024: 188 packets per call,
    # not 12, for the faults to fall on
    with services(
        tmp_path_factory.mktemp("chaos"),
        ROOT / "build",
        switch_ip="127.0.3.1",
        pool_size=32,
        values_per_packet=PACKET_K,
    ) as svc:
        yield svc


def join_behind(proxy: ChaosProxy, controller: str, job: str) -> list[JobSpec]:
    """Every rank joins with the proxy's back address as its own; its packets go to its front socket."""
    replies: list[pb.JobDescription | None] = [None] * WORLD
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)

        def join(rank: int) -> None:
            ip, port = proxy.back_addresses[rank]
            request = pb.JoinJobRequest(
                name=job, rank=rank, world_size=WORLD, address=pb.WorkerAddress(ipv4=ip, udp_port=port),
                timeout_seconds=20,
            )  # fmt: skip
            metadata = call_metadata(credential=os.environ[CREDENTIAL_ENV])
            replies[rank] = stub.JoinJob(request, timeout=30, metadata=metadata)

        threads = [threading.Thread(target=join, args=(rank,)) for rank in range(WORLD)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    specs = []
    for rank, reply in enumerate(replies):
        assert reply is not None, f"rank {rank} did not join"
        specs.append(
            dataclasses.replace(JobSpec.from_description(reply), switch_address=proxy.front_addresses[rank])
        )
    return specs


def leave(controller: str, job: str) -> None:
    with grpc.insecure_channel(controller) as channel:
        metadata = call_metadata(credential=os.environ[CREDENTIAL_ENV])
        pb_grpc.JobServiceStub(channel).DeleteJob(pb.JobRef(name=job), timeout=10, metadata=metadata)


@pytest.mark.parametrize("rate", [0.001, 0.01, 0.05], ids=["0.1%", "1%", "5%"])
@pytest.mark.parametrize("kind", ["duplicate", "delay", "reorder"])
def test_every_result_is_exact_under(switch: Services, kind: str, rate: float) -> None:
    net = random.Random(f"{kind}{rate}").randrange(10, 250)
    fronts = [f"127.{net}.1.{r + 1}" for r in range(WORLD)]
    backs = [f"127.{net}.2.{r + 1}" for r in range(WORLD)]
    job = f"chaos-{kind}-{rate}"
    with ChaosProxy(switch.switch_address, fronts, backs, Faults(kind, rate, seed=net)) as proxy:
        specs = join_behind(proxy, switch.controller, job)

        def worker(rank: int) -> list[bool]:
            local = (f"127.{net}.3.{rank + 1}", 0)
            with Communicator(specs[rank], rank, local, progress_timeout=20.0) as comm:
                k = comm.job.values_per_packet
                outcomes = []
                for iteration in range(2):
                    for dtype in ("int32", "float32"):
                        result = comm.allreduce(make_input(rank, SIZE, dtype, iteration))
                        outcomes.append(check(result, WORLD, SIZE, dtype, iteration, k=k)[0])
                return outcomes

        with ThreadPoolExecutor(WORLD) as pool:
            outcomes = list(pool.map(worker, range(WORLD)))
        counts = proxy.counts
    leave(switch.controller, job)
    assert all(all(per_rank) for per_rank in outcomes), outcomes
    sent = WORLD * 4 * 2 * (SIZE // PACKET_K)
    assert counts.forwarded >= sent, "4 calls, every DATA up and its RESULT down"
    if rate >= 0.01:
        assert counts.affected > 0, "the proxy must actually have done something"


def test_the_proxy_does_what_it_says(tmp_path: Path) -> None:
    """A duplicating proxy delivers more than it receives, a delaying one later, a dropping one less."""
    import socket
    import time

    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.9.9", 0))
    sink.settimeout(0.3)
    try:
        for kind, expect in (("duplicate", 20), ("drop", 0)):
            with ChaosProxy(sink.getsockname(), ["127.0.9.1"], ["127.0.9.2"], Faults(kind, 1.0)) as proxy:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
                    worker.bind(("127.0.9.3", 0))
                    for i in range(10):
                        worker.sendto(bytes([i]), proxy.front_addresses[0])
                    got = []
                    deadline = time.monotonic() + 1.0
                    while time.monotonic() < deadline:
                        try:
                            got.append(sink.recv(16))
                        except TimeoutError:
                            break
            assert len(got) == expect, (kind, got)
    finally:
        sink.close()
