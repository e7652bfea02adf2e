"""A daemon pair with one job whose three ranks stay joined: what operators watch (metrics, top)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest

from hostlib import Communicator
from hostlib.launch import ROOT, Services, services

JOB, WORLD, SIZE, CALLS = "watched", 3, 5000, 2
CREDENTIAL = "the-watched-job's-credential"


@dataclass
class Watched:
    services: Services
    comms: list[Communicator]

    def allreduce(self, calls: int = CALLS, size: int = SIZE) -> bool:
        """Every rank makes `calls` int32 all-reduces of `size` values; True when all were exact."""

        def calls_of(rank: int) -> bool:
            data = np.arange(size, dtype=np.int32) * (rank + 1)
            want = np.arange(size, dtype=np.int32) * sum(range(1, WORLD + 1))
            return all(np.array_equal(self.comms[rank].allreduce(data), want) for _ in range(calls))

        with ThreadPoolExecutor(WORLD) as pool:
            return all(pool.map(calls_of, range(WORLD)))


@pytest.fixture(scope="package")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    """Both daemons (metrics on) and job 'watched' after its three ranks made two exact all-reduces.

    The ranks stay joined until the package's tests end: a job its last rank left is gone.
    """
    with services(
        tmp_path_factory.mktemp("logs"), ROOT / "build", switch_ip="127.0.1.7", pool_size=16, metrics=True
    ) as svc:

        def join(rank: int) -> Communicator:
            address = (f"127.0.0.{60 + rank}", 0)
            return Communicator.join(
                svc.controller, JOB, rank, WORLD, address=address, join_timeout=20, credential=CREDENTIAL
            )

        with ThreadPoolExecutor(WORLD) as pool:
            comms = list(pool.map(join, range(WORLD)))
        try:
            watched = Watched(svc, comms)
            assert watched.allreduce()
            yield watched
        finally:
            for comm in comms:
                comm.close()


@pytest.fixture
def ran(watched: Watched) -> Services:
    return watched.services
