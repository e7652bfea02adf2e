"""A runner hands each worker its place in the job on the command line; the worker reads the same job."""

from __future__ import annotations

import argparse

import pytest

from contracts import jobapi_pb2 as pb
from contracts.protocol import UDP_PORT
from hostlib import JobSpec, JoinError
from hostlib.launch import add_worker_arguments, worker_arguments, worker_job


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_worker_arguments(p)
    return p


def test_the_job_a_runner_writes_is_the_job_its_worker_reads() -> None:
    reply = pb.JobDescription(
        job_id=7, world_size=4, pool_size=8, switch_ipv4="10.0.0.254", values_per_packet=128, key=0xFEEDBEEF
    )
    job = JobSpec.from_description(reply)
    assert job.switch_address == ("10.0.0.254", UDP_PORT)  # unset port: the protocol's default
    args = parser().parse_args(worker_arguments(job, 2, ("10.0.0.3", 40002)))
    read, rank, bind = worker_job(args)
    assert read == job and (read.values_per_packet, read.key) == (128, 0xFEEDBEEF)
    assert (rank, bind) == (2, ("10.0.0.3", 40002))


def test_a_description_from_another_protocol_version_is_refused() -> None:
    reply = pb.JobDescription(job_id=7, world_size=4, pool_size=8, values_per_packet=64, protocol_version=1)
    with pytest.raises(JoinError, match="protocol version 1"):
        JobSpec.from_description(reply)


def test_a_worker_started_without_its_job_says_which_option_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--job-id=1", "--world=2", "--pool=8", "--rank=0", "--bind=10.0.0.1:1"])
    assert "--switch" in capsys.readouterr().err
