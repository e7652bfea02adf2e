"""A rank that leaves cleanly while its peers are inside an all-reduce: they hear it at once, by name.

Without the controller's RANK_LEFT event the peers waited for the progress
timeout (10 s) and raised a generic "a peer may have died" (issue 29).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from ctl_support import Daemon, channel_to
from rel_support import record

from contracts import jobapi_pb2 as pb
from contracts.jobapi_metadata import CREDENTIAL_ENV, call_metadata
from hostlib import AllreduceAborted, Communicator

WORLD = 3
LEAVER = 1


def leave_with_the_api(d: Daemon, job: str, rank: int, comm: Communicator) -> None:
    """LeaveJob from outside the rank's communicator, as an operator's tool or a launcher would."""
    with channel_to(d) as stub:
        metadata = call_metadata(credential=os.environ[CREDENTIAL_ENV])
        stub.LeaveJob(pb.LeaveJobRequest(name=job, rank=rank), timeout=5, metadata=metadata)


def leave_with_close(d: Daemon, job: str, rank: int, comm: Communicator) -> None:
    comm.close()


@pytest.mark.parametrize("leave", [leave_with_close, leave_with_the_api], ids=["close", "LeaveJob"])
def test_peers_of_a_rank_that_leaves_mid_call_raise_within_a_second_naming_it(
    daemon: Callable[..., Daemon], leave: Callable[[Daemon, str, int, Communicator], None]
) -> None:
    d = daemon()
    job = f"leaving-{leave.__name__}"
    joined = threading.Barrier(WORLD)
    outcomes: dict[int, tuple[str, float]] = {}
    left_at: list[float] = []

    def rank(r: int) -> None:
        comm = Communicator.join(d.listen, job, r, WORLD, address=(f"127.0.0.{170 + r}", 0))
        try:
            comm.allreduce(np.ones(1000, dtype=np.int32))  # every rank in step first
            joined.wait(timeout=30)
            if r == LEAVER:
                time.sleep(0.3)  # the others are waiting inside their next call
                left_at.append(time.monotonic())
                leave(d, job, r, comm)
                return
            try:
                comm.allreduce(np.ones(1 << 16, dtype=np.int32))
                outcomes[r] = ("completed", time.monotonic())
            except AllreduceAborted as error:
                outcomes[r] = (str(error), time.monotonic())
        finally:
            comm.close()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORLD)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == [0, 2], outcomes
    for message, at in outcomes.values():
        assert message.startswith(f"rank {LEAVER} left job {job!r}"), message
        assert at - left_at[0] < 1.0, at - left_at[0]
    record(
        f"leave-{leave.__name__}",
        seconds_to_error=round(max(at for _, at in outcomes.values()) - left_at[0], 3),
    )


def test_a_watch_opened_after_a_peer_left_still_hears_it(daemon: Callable[..., Daemon]) -> None:
    """A rank's WatchJob opens after its join returns, and a peer may leave at once (CI saw it): the
    stream starts with the departures it missed, or that rank's next call would wait out its timeout."""
    d = daemon()
    job = "left-early"
    credential = os.environ[CREDENTIAL_ENV]
    with channel_to(d) as stub:
        addresses = [pb.WorkerAddress(ipv4=f"127.0.0.{190 + r}", udp_port=41000 + r) for r in range(2)]

        def join(r: int) -> None:
            request = pb.JoinJobRequest(
                name=job, rank=r, world_size=2, address=addresses[r], timeout_seconds=10
            )
            stub.JoinJob(request, timeout=20, metadata=call_metadata(credential=credential))

        joins = [threading.Thread(target=join, args=(r,)) for r in range(2)]
        for thread in joins:
            thread.start()
        for thread in joins:
            thread.join(timeout=30)
        stub.LeaveJob(pb.LeaveJobRequest(name=job, rank=1, calls_begun=4), timeout=5)
        events = stub.WatchJob(pb.WatchJobRequest(name=job, rank=0), timeout=5)
        first, second = next(events), next(events)
        events.cancel()
    assert first.kind != pb.JobEvent.RANK_LEFT  # the stream's opening event
    assert second.kind == pb.JobEvent.RANK_LEFT and second.rank == 1 and second.calls_begun == 4
    assert second.message == f"rank 1 left job {job!r}: its peers' calls cannot finish without it"
