"""Self-healing: the switch restarts under a running daemon and its jobs work again, without a restart.

The embedded switch is killed (SIGKILL: it loses pipeline, tables and
registers) and started again on the same P4Runtime and UDP ports. The daemon
notices the lost stream, reconnects, pushes the pipeline again and
reinstalls every job; ranks joined through hostlib hear SWITCH_RESTARTED,
their call in flight fails with "switch restarted", and their next call is
exact. Only the rootless embedded targets can carry DATA from the test.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from ctl_support import (
    Daemon,
    Switch,
    channel_to,
    cli,
    read_keys,
    start_switch,
    stop,
    wait_until,
)

from contracts import jobapi_pb2 as pb
from hostlib import AllreduceAborted, Communicator

WORLD = 2


def kill(switch: Switch) -> None:
    os.kill(switch.process.pid, signal.SIGKILL)
    switch.process.wait(timeout=10)


def generation(d: Daemon, job: str) -> int:
    with channel_to(d) as stub:
        return stub.GetJob(pb.JobRef(name=job), timeout=5).generation


def on_ranks(d: Daemon, job: str, first_ip: int, work: Callable[[Communicator, int], object]) -> list[object]:
    def rank(r: int) -> object:
        address = (f"127.0.0.{first_ip + r}", 0)
        with Communicator.join(d.listen, job, r, WORLD, address=address, join_timeout=20) as comm:
            return work(comm, r)

    with ThreadPoolExecutor(WORLD) as pool:
        return list(pool.map(rank, range(WORLD)))


def inputs(rank: int, size: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * (rank + 3) % 100_003).astype(np.int32)


def exact(result: np.ndarray, size: int) -> bool:
    return bool(
        np.array_equal(result, sum(inputs(r, size).astype(np.int64) for r in range(WORLD)).astype(np.int32))
    )


def test_an_idle_job_is_exact_again_after_a_switch_restart(
    switch: Switch, daemon: Callable[..., Daemon], data_plane: tuple[str, int], tmp_path: Path
) -> None:
    d = daemon()
    restarted: list[Switch] = []
    both_called = threading.Barrier(WORLD, timeout=60)

    def work(comm: Communicator, rank: int) -> tuple[bool, bool]:
        before = exact(comm.allreduce(inputs(rank, 5000)), 5000)
        both_called.wait()
        if rank == 0:
            kill(switch)
            restarted.append(start_switch(switch.target, switch.artifacts, tmp_path, same_as=switch))
            assert wait_until(lambda: generation(d, "healing") == 1, timeout=30), d.log.read_text()
        both_called.wait()
        return before, exact(comm.allreduce(inputs(rank, 5000)), 5000)

    try:
        assert on_ranks(d, "healing", 60, work) == [(True, True)] * WORLD
        listed = cli("job", "list", "--controller", d.listen, "--json")
        assert '"name": "healing"' not in listed.out, "the last rank out deleted the job"
        # Provisioning came back too: the aggregation address answers again.
        assert read_keys(restarted[0], "MyIngress.agg_addresses")
    finally:
        for sw in restarted:
            stop(sw.process)


def test_a_call_in_flight_fails_with_switch_restarted_and_the_next_call_is_exact(
    switch: Switch, daemon: Callable[..., Daemon], data_plane: tuple[str, int], tmp_path: Path
) -> None:
    d = daemon()
    restarted: list[Switch] = []
    size = 6_000_000  # about 0.5 s through the native paths: long enough to be cut in the middle

    def work(comm: Communicator, rank: int) -> tuple[str, float, bool]:
        handle = comm.allreduce_async(inputs(rank, size))
        if rank == 0:
            time.sleep(0.05)  # the call is under way
            kill(switch)
            restarted.append(start_switch(switch.target, switch.artifacts, tmp_path, same_as=switch))
        try:
            handle.wait()
            outcome, failed_at = "completed", time.monotonic()
        except AllreduceAborted as error:
            outcome, failed_at = str(error), time.monotonic()
        return outcome, failed_at, exact(comm.allreduce(inputs(rank, 20_000)), 20_000)

    try:
        results = on_ranks(d, "cut", 70, work)
        healed = d.log.read_text()
        assert "reinstalled as generation 1" in healed, healed
        for outcome, _, next_exact in results:  # type: ignore[misc]
            assert outcome.startswith(
                "switch restarted: switch sw1 restarted and lost the state of job 'cut'"
            )
            assert next_exact
    finally:
        for sw in restarted:
            stop(sw.process)


def test_the_daemon_says_why_jobs_fail_while_the_switch_is_down(
    switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    d = daemon()
    kill(switch)
    time.sleep(0.5)
    result = cli("job", "create", "meanwhile", "--world-size", "2", "--controller", d.listen)
    assert result.code == 1
    assert "the P4Runtime connection was lost" in result.err and result.err.count("\n") == 1
