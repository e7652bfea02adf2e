"""`p4reduce-ctl top`: a live view of jobs computed from two looks at the daemon.

The rates are differences between samples, so they are specified on
samples made by hand; the command itself runs against the real daemons of
tests/operations/conftest.py while the job's ranks all-reduce.
"""

from __future__ import annotations

import json
import threading

import pytest
from rich.console import Console

from contracts import jobapi_pb2 as pb
from controller import top
from controller.cli import main as cli_main
from tests.operations.conftest import CREDENTIAL, JOB, WORLD, Watched


def sample(at: float, data: int, queries: int = 0, aborts: int = 0, drops: int = 0) -> top.Sample:
    job = pb.JobDescription(name="train", switch_name="sw1", state="active", world_size=4, ranks_joined=4,
                            pool_size=256)  # fmt: skip
    counts = {"job_data_in": (data, data * 1000), "job_results_out": (data, data * 1000),
              "job_queries": (queries, 0), "job_aborts": (aborts, 0)}  # fmt: skip
    return top.Sample(at, [top.JobSample(job, counts)], {"sw1": {"ingress/BAD_KEY": (drops, 0)}})


def test_rates_are_over_the_interval_between_two_looks() -> None:
    [row] = top.job_rows(sample(10.0, 1000, queries=5), sample(12.0, 5000, queries=25, aborts=1))
    assert row["data_per_s"] == 2000 and row["mb_per_s"] == 2.0 and row["results_per_s"] == 2000
    assert row["asked"] == 20 / 4000 and row["aborts"] == 1 and row["ranks"] == "4/4"


def test_a_first_look_has_no_rates_and_only_grown_drops_are_listed() -> None:
    [row] = top.job_rows(None, sample(1.0, 100))
    assert row["data_per_s"] is None and row["mb_per_s"] is None
    assert top.drop_rows(sample(1.0, 0, drops=7), sample(2.0, 0, drops=7)) == []
    assert top.drop_rows(sample(1.0, 0, drops=7), sample(2.0, 0, drops=9)) == [
        {"switch": "sw1", "stage": "ingress", "reason": "BAD_KEY", "packets": 2}
    ]


def test_the_table_names_every_job_and_marks_aborts() -> None:
    console = Console(record=True, width=160)
    console.print(top.render(sample(1.0, 10), sample(2.0, 20, aborts=3, drops=2), 1.0))
    text = console.export_text()
    assert "train" in text and "sw1" in text and "4/4" in text and "BAD_KEY" in text
    console = Console(record=True, width=160)
    console.print(top.render(None, top.Sample(0.0, []), 1.0))
    assert "no jobs visible" in console.export_text()


def test_top_once_shows_the_running_jobs_goodput(
    watched: Watched, capsys: pytest.CaptureFixture[str]
) -> None:
    traffic = threading.Thread(target=watched.allreduce, kwargs={"calls": 40, "size": 20_000})
    traffic.start()
    try:
        capsys.readouterr()
        command = ["top", "--once", "--json", "--interval", "1", "--controller", watched.services.controller,
                   "--credential", CREDENTIAL]  # fmt: skip
        assert cli_main(command) == 0
    finally:
        traffic.join()
    shown = json.loads(capsys.readouterr().out)
    [row] = shown["jobs"]
    assert row["job"] == JOB and row["ranks"] == f"{WORLD}/{WORLD}" and row["state"] == "active"
    assert row["data_per_s"] > 0 and row["results_per_s"] > 0 and row["aborts"] == 0
    # A daemon without an admin token treats every caller as its operator: drops are readable.
    assert shown["note"] == "" and isinstance(shown["drops"], list)


def test_top_live_needs_a_terminal_for_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["top", "--json", "--controller", "127.0.0.1:1"]) == 1
    assert "--json needs --once" in capsys.readouterr().err
