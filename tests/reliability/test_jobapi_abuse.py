"""The job API against hostile and careless clients: other tenants, no tokens, huge inputs, id storms.

Each test says what the service promises (docs/controller.md, "Who may do
what") and tries to break it through the real daemon.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import grpc
import pytest
from ctl_support import ROOT, Daemon, Worker, channel_to, environment, free_tcp_port, join_all
from rel_support import record, scale

from contracts import jobapi_pb2 as pb
from contracts.jobapi_metadata import call_metadata

Code = grpc.StatusCode
ALICE, BOB = "alice's-job-credential-0001", "bob's-job-credential-00002"


def code_of(call: Callable[[], object]) -> Code:
    try:
        call()
    except grpc.RpcError as error:
        return error.code()  # type: ignore[attr-defined, no-any-return]
    return Code.OK


def test_cross_tenant_calls_are_refused_and_the_admin_may_do_everything(
    daemon: Callable[..., Daemon],
) -> None:
    """Bob holds the shared access token and his own job's credential; Alice's job is out of his reach."""
    d = daemon(
        "--token", "shared-access-token", "--admin-token", "the-admins-token", token="shared-access-token"
    )
    workers = [Worker.open(rank, f"127.0.0.{110 + rank}") for rank in range(2)]
    with channel_to(d, credential=ALICE, token="shared-access-token") as alice:
        join_all(alice, "alice", workers, credential=ALICE, token="shared-access-token")
        alice.CreateJob(pb.CreateJobRequest(name="waiting", world_size=2), timeout=5)  # nobody joined yet
    intruder = pb.WorkerAddress(ipv4="127.0.0.119", udp_port=4000)
    attempts: dict[str, Callable[[object], object]] = {
        "DeleteJob": lambda s: s.DeleteJob(pb.JobRef(name="alice"), timeout=5),
        "LeaveJob of a rank": lambda s: s.LeaveJob(pb.LeaveJobRequest(name="alice", rank=1), timeout=5),
        "Heartbeat": lambda s: s.Heartbeat(pb.HeartbeatRequest(name="alice", rank=0), timeout=5),
        "GetJob": lambda s: s.GetJob(pb.JobRef(name="alice"), timeout=5),
        "GetCounters of the job": lambda s: s.GetCounters(pb.GetCountersRequest(job="alice"), timeout=5),
        "WatchJob": lambda s: next(iter(s.WatchJob(pb.WatchJobRequest(name="alice", rank=0), timeout=5))),
        "ResumeJob": lambda s: s.ResumeJob(pb.ResumeJobRequest(name="alice", rank=0), timeout=5),
        "JoinJob taking a waiting job's rank": lambda s: s.JoinJob(
            pb.JoinJobRequest(name="waiting", rank=0, world_size=2, address=intruder, timeout_seconds=1),
            timeout=5,
        ),
    }
    table = []
    for what, attempt in attempts.items():
        with channel_to(d, credential="", token="shared-access-token") as anonymous:
            without = code_of(lambda: attempt(anonymous))  # noqa: B023
        with channel_to(d, credential=BOB, token="shared-access-token") as bob:
            other = code_of(lambda: attempt(bob))  # noqa: B023
        table.append((what, without.name, other.name))
        assert (without, other) == (Code.UNAUTHENTICATED, Code.PERMISSION_DENIED), what
    with channel_to(d, credential="", token="shared-access-token") as anonymous:
        assert [j.name for j in anonymous.ListJobs(pb.Empty(), timeout=5).jobs] == []  # not Bob's to see
        assert (
            code_of(lambda: anonymous.GetCounters(pb.GetCountersRequest(), timeout=5))
            == Code.PERMISSION_DENIED
        )
    with channel_to(d, credential="", token="") as no_token:
        assert code_of(lambda: no_token.ListJobs(pb.Empty(), timeout=5)) == Code.UNAUTHENTICATED
    with channel_to(d, credential="", token="the-admins-token") as admin:
        assert {j.name for j in admin.ListJobs(pb.Empty(), timeout=5).jobs} == {"alice", "waiting"}
        assert admin.GetJob(pb.JobRef(name="alice"), timeout=5).state == "active"
        admin.DeleteJob(pb.JobRef(name="alice"), timeout=5)
    with channel_to(d, credential=ALICE, token="shared-access-token") as alice:
        assert code_of(lambda: alice.GetJob(pb.JobRef(name="alice"), timeout=5)) == Code.NOT_FOUND
    record("jobapi-cross-tenant", rows=table)
    for w in workers:
        w.sock.close()


def test_a_deleted_jobs_ranks_hear_who_deleted_it(daemon: Callable[..., Daemon]) -> None:
    d = daemon("--admin-token", "the-admins-token")
    workers = [Worker.open(rank, f"127.0.0.{120 + rank}") for rank in range(2)]
    with channel_to(d, credential=ALICE) as alice:
        join_all(alice, "watched", workers, credential=ALICE)
        events = alice.WatchJob(pb.WatchJobRequest(name="watched", rank=0), timeout=10)
        first = next(events)
        assert first.kind == pb.JobEvent.WATCHING
        with channel_to(d, credential="", token="the-admins-token") as admin:
            started = time.monotonic()
            admin.DeleteJob(pb.JobRef(name="watched"), timeout=5)
        deleted = next(events)
        heard = time.monotonic() - started
    assert deleted.kind == pb.JobEvent.DELETED
    assert deleted.message.startswith("job 'watched' was deleted by ipv4:127.0.0.1:")
    assert deleted.message.endswith("(with the admin token)")
    assert heard < 1.0
    record("jobapi-deleted-heard", seconds=round(heard, 4))
    for w in workers:
        w.sock.close()


def test_unbounded_input_is_refused_and_never_echoed(daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    with channel_to(d) as stub:
        for size in (100_000, 60_000):
            try:
                stub.CreateJob(pb.CreateJobRequest(name="x" * size, world_size=2), timeout=10)
            except grpc.RpcError as error:
                assert error.code() in (Code.INVALID_ARGUMENT, Code.RESOURCE_EXHAUSTED)  # type: ignore[attr-defined]
                assert len(error.details() or "") <= 300  # type: ignore[attr-defined]
            else:
                raise AssertionError("a huge name was accepted")
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetJob(pb.JobRef(name="y" * 50_000), timeout=10)
        assert caught.value.code() == Code.NOT_FOUND  # type: ignore[attr-defined]
        assert caught.value.details() == f"unknown job {'y' * 64!r}... (50000 characters)"  # type: ignore[attr-defined]
        weak = call_metadata(credential="short")
        with pytest.raises(grpc.RpcError) as caught:
            stub.CreateJob(pb.CreateJobRequest(name="weak", world_size=2), timeout=10, metadata=weak)
        assert caught.value.code() == Code.INVALID_ARGUMENT  # type: ignore[attr-defined]
        assert "16..256 printable characters" in caught.value.details()  # type: ignore[attr-defined]


def test_job_ids_rest_after_a_deletion_and_then_come_back(daemon: Callable[..., Daemon]) -> None:
    """Create+delete storms: never-used ids first; once all are used, a freed id only after its rest,
    and the refusal says when the next one is free (the long variant runs through all 1023)."""
    pairs = scale(40, 1100)
    quarantine = 60
    d = daemon(id_quarantine_seconds=quarantine)
    seen, refused = [], None
    started = time.monotonic()
    with channel_to(d) as stub:
        for i in range(pairs):
            try:
                job = stub.CreateJob(
                    pb.CreateJobRequest(name=f"storm-{i}", world_size=1, pool_size=2), timeout=5
                )
            except grpc.RpcError as error:
                refused = (i, error.code(), error.details())  # type: ignore[attr-defined]
                break
            seen.append(job.job_id)
            stub.DeleteJob(pb.JobRef(name=f"storm-{i}"), timeout=5)
        elapsed = time.monotonic() - started
        recycled_after = None
        if pairs > 1023:
            assert refused is not None and refused[0] == 1023 and refused[1] == Code.RESOURCE_EXHAUSTED
            prefix = "all 1023 job ids are in use or resting after a deletion; the next one is free in "
            assert refused[2].startswith(prefix)
            wait = float(refused[2][len(prefix) :].split()[0])
            assert 0 < wait <= quarantine
            time.sleep(wait + 0.5)
            again = stub.CreateJob(
                pb.CreateJobRequest(name="after-rest", world_size=1, pool_size=2), timeout=5
            )
            assert again.job_id == 1  # the longest-rested id
            recycled_after = round(time.monotonic() - started, 1)
        else:
            assert refused is None
    assert seen == list(range(1, min(pairs, 1023) + 1)), "never-used ids first, none twice"
    record("jobapi-id-storm", pairs=len(seen), seconds=round(elapsed, 2), refused_at=refused and refused[0],
           recycled_after=recycled_after, quarantine=quarantine)  # fmt: skip


def test_listening_beyond_loopback_needs_tls_and_a_token_or_says_insecure_loudly(
    daemon: Callable[..., Daemon], tmp_path: object
) -> None:
    d = daemon()  # for its config file
    command = [sys.executable, "-m", "controller", "serve", "--config", str(d.config)]
    refused = subprocess.run(
        [*command, "--listen", f"0.0.0.0:{free_tcp_port()}"], capture_output=True, text=True, timeout=60,
        env=environment(), cwd=ROOT,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.startswith("p4reduce-ctl: error: --listen 0.0.0.0:")
    assert "needs TLS and a token" in refused.stderr and refused.stderr.count("\n") == 1
    d.stop()  # the switch takes one primary at a time
    insecure = subprocess.Popen(
        [*command, "--listen", f"0.0.0.0:{free_tcp_port()}", "--insecure"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=environment(), cwd=ROOT,
    )  # fmt: skip
    try:
        lines = []
        assert insecure.stdout is not None
        for line in insecure.stdout:
            lines.append(line)
            if "job service listening" in line:
                break
        warnings = [line for line in lines if "WARNING controller.server: INSECURE:" in line]
        assert len(warnings) == 2, lines
        assert "is served without TLS and without a token (--insecure)" in warnings[0]
    finally:
        insecure.terminate()
        insecure.wait(timeout=20)


def test_a_restarted_daemon_still_knows_each_jobs_credential(
    daemon: Callable[..., Daemon], switch: object, tmp_path: object
) -> None:
    d = daemon()
    workers = [Worker.open(rank, f"127.0.0.{130 + rank}") for rank in range(2)]
    with channel_to(d, credential=ALICE) as alice:
        join_all(alice, "kept", workers, credential=ALICE)
    d.stop()
    d2 = daemon()
    with channel_to(d2, credential=BOB) as bob:
        assert code_of(lambda: bob.DeleteJob(pb.JobRef(name="kept"), timeout=5)) == Code.PERMISSION_DENIED
    with channel_to(d2, credential=ALICE) as alice:
        assert alice.GetJob(pb.JobRef(name="kept"), timeout=5).state == "active"
    for w in workers:
        w.sock.close()
