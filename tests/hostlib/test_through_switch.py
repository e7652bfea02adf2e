"""All-reduce through the real p4reduce-switch and controller daemon: exact ints, bounded floats, loss.

Workers are threads with their own Communicator and their own 127.0.0.x
address, joined through the controller's job API, exactly as processes
would be.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from hostlib import AllreduceTimeout, Communicator, JoinError
from hostlib.launch import ROOT, Services, services
from hostlib.verify import check, make_input


@pytest.fixture(scope="module")
def lossless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with services(
        tmp_path_factory.mktemp("logs"), ROOT / "build", switch_ip="127.0.1.1", pool_size=16
    ) as svc:
        yield svc


def on_workers(
    svc: Services, job: str, world: int, work: Callable[[Communicator, int], object], first: int = 20
) -> list[object]:
    def worker(rank: int) -> object:
        with Communicator.join(
            svc.controller, job, rank, world, address=(f"127.0.0.{first + rank}", 0), join_timeout=20
        ) as comm:
            return work(comm, rank)

    with ThreadPoolExecutor(world) as pool:
        return list(pool.map(worker, range(world)))


def test_int32_is_exact_and_float32_within_the_bound(lossless: Services) -> None:
    size, world = 10_000, 3

    def work(comm: Communicator, rank: int) -> list[tuple[bool, float, float]]:
        return [
            check(comm.allreduce(make_input(rank, size, dtype)), world, size, dtype)
            for dtype in ("int32", "float32", "int32")
        ]

    for per_worker in on_workers(lossless, "exact", world, work):
        assert all(ok for ok, _, _ in per_worker), per_worker


def test_a_missing_peer_gives_a_timeout_not_a_hang(lossless: Services) -> None:
    joined = threading.Barrier(2)

    def work(comm: Communicator, rank: int) -> str:
        joined.wait()
        if rank == 1:
            return "stayed silent"
        comm.engine.progress_timeout = 1.0
        with pytest.raises(AllreduceTimeout, match="a peer may have died"):
            comm.allreduce(np.ones(1000, dtype=np.int32))
        return "timed out"

    assert on_workers(lossless, "silent-peer", 2, work, first=30) == ["timed out", "stayed silent"]


def test_the_controller_refuses_a_join_with_the_wrong_world_size(lossless: Services) -> None:
    def work(comm: Communicator, rank: int) -> None:
        with pytest.raises(JoinError, match="world"):
            Communicator.join(lossless.controller, "sized", 1, 5, address=("127.0.0.45", 0), join_timeout=2)

    on_workers(lossless, "sized", 1, work, first=40)


def test_results_stay_correct_with_five_percent_loss(tmp_path: Path) -> None:
    size, world = 20_000, 2
    with services(
        tmp_path, ROOT / "build", switch_ip="127.0.2.1", pool_size=16, drop_rate=0.05, drop_rate_out=0.05
    ) as svc:

        def work(comm: Communicator, rank: int) -> tuple[bool, bool, int]:
            int_ok = check(comm.allreduce(make_input(rank, size, "int32")), world, size, "int32")[0]
            float_ok = check(comm.allreduce(make_input(rank, size, "float32")), world, size, "float32")[0]
            return int_ok, float_ok, comm.stats().retransmissions

        reports = on_workers(svc, "lossy", world, work, first=50)
    assert all(int_ok and float_ok for int_ok, float_ok, _ in reports)
    assert sum(retx for _, _, retx in reports) > 0
