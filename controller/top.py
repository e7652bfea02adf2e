"""`p4reduce-ctl top`: jobs, their ranks, goodput, questions and drops, refreshed in place.

Everything comes from the job API (ListJobs, GetCounters), so `top` sees
what its caller may see: with the admin token every job and each switch's
drops by reason, with a job's credential that job. Rates are differences
between two samples `interval` seconds apart; `--once` takes two samples
and prints one table (for scripts: `--json`).

The columns, for each job:
- `DATA/s` and `MB/s`: DATA packets and their bytes the switch aggregated
  per second (all ranks together; the bytes are whole frames);
- `results/s`: results the switch sent (one per use and rank);
- `asked`: QUERYs per DATA in the interval. Near 0 on a healthy fabric;
  it follows real loss (docs/protocol.md, *Loss recovery*);
- `MISSING`, `replays`, `aborts`: in the interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from contracts import jobapi_pb2 as pb
from controller.client import JobClient
from controller.errors import ControllerError

Counts = dict[str, tuple[int, int]]  # counter -> (packets, bytes)


@dataclass(frozen=True)
class JobSample:
    job: pb.JobDescription
    counts: Counts


@dataclass(frozen=True)
class Sample:
    """One look at the daemon: its jobs with their counters, and each switch's drops when allowed."""

    at: float
    jobs: list[JobSample]
    drops: dict[str, Counts] = field(default_factory=dict)  # switch -> "stage/REASON" -> counts
    note: str = ""  # why drops are not shown


def take(client: JobClient, clock: Callable[[], float] = time.monotonic) -> Sample:
    """Jobs and counters now. A job deleted between the calls is left out, not an error."""
    jobs = []
    for job in client.list():
        try:
            values = client.counters(job.name)
        except ControllerError:
            continue
        jobs.append(JobSample(job, {v.counter: (v.packets, v.bytes) for v in values}))
    drops: dict[str, Counts] = {}
    note = ""
    for switch in sorted({j.job.switch_name for j in jobs}):
        try:
            values = client.counters(switch=switch)
        except ControllerError as exc:
            note = f"drops by reason need the admin token ({exc})"
            break
        drops[switch] = {
            f"{v.counter.removesuffix('_drops')}/{v.label}": (v.packets, v.bytes)
            for v in values
            if v.counter.endswith("_drops")
        }
    return Sample(clock(), jobs, drops, note)


def _delta(now: Counts, before: Counts | None, name: str) -> tuple[int, int]:
    packets, octets = now.get(name, (0, 0))
    if before is None:
        return packets, octets
    old_packets, old_octets = before.get(name, (0, 0))
    return max(0, packets - old_packets), max(0, octets - old_octets)


def job_rows(previous: Sample | None, current: Sample) -> list[dict[str, Any]]:
    """One row per job: its state and its rates over the interval (totals when there is no previous)."""
    seconds = current.at - previous.at if previous is not None else 0.0
    before = {j.job.name: j.counts for j in previous.jobs} if previous is not None else {}
    rows = []
    for sample in current.jobs:
        job, old = sample.job, before.get(sample.job.name)
        data, data_bytes = _delta(sample.counts, old, "job_data_in")
        results, _ = _delta(sample.counts, old, "job_results_out")
        queries, _ = _delta(sample.counts, old, "job_queries")

        def per_second(count: int) -> float | None:
            return count / seconds if seconds > 0 else None  # None: a first look has no rates yet

        rows.append({
            "job": job.name, "switch": job.switch_name, "state": job.state,
            "ranks": f"{job.ranks_joined}/{job.world_size}", "slots": job.pool_size,
            "generation": job.generation,
            "data_per_s": per_second(data), "mb_per_s": _scaled(per_second(data_bytes), 1e-6),
            "results_per_s": per_second(results),
            "asked": queries / data if data else 0.0,
            "missing": _delta(sample.counts, old, "job_missing")[0],
            "replays": _delta(sample.counts, old, "job_replays")[0],
            "aborts": _delta(sample.counts, old, "job_aborts")[0],
        })  # fmt: skip
    return rows


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _rate(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def drop_rows(previous: Sample | None, current: Sample) -> list[dict[str, Any]]:
    """Each switch's drops by stage and reason that grew in the interval (all, with no previous)."""
    rows = []
    for switch, counts in current.drops.items():
        old = previous.drops.get(switch) if previous is not None else None
        for key in sorted(counts):
            packets, _ = _delta(counts, old, key)
            if packets:
                stage, reason = key.split("/", 1)
                rows.append({"switch": switch, "stage": stage, "reason": reason, "packets": packets})
    return rows


def render(previous: Sample | None, current: Sample, interval: float) -> Group:
    jobs = Table(title=f"p4reduce jobs (rates over {interval:g} s)", title_justify="left")
    for name, justify in (("job", "left"), ("switch", "left"), ("state", "left"), ("ranks", "right"),
                          ("slots", "right"), ("DATA/s", "right"), ("MB/s", "right"), ("results/s", "right"),
                          ("asked", "right"), ("MISSING", "right"), ("replays", "right"), ("aborts", "right"),
                          ("gen", "right")):  # fmt: skip
        jobs.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in job_rows(previous, current):
        style = "red" if r["aborts"] else "yellow" if r["asked"] > 0.02 or r["state"] != "active" else ""
        jobs.add_row(
            r["job"], r["switch"], r["state"], r["ranks"], str(r["slots"]), _rate(r["data_per_s"], 0),
            _rate(r["mb_per_s"], 1), _rate(r["results_per_s"], 0), f"{100 * r['asked']:.1f}%",
            str(r["missing"]), str(r["replays"]), str(r["aborts"]), str(r["generation"]), style=style,
        )  # fmt: skip
    if not current.jobs:
        jobs.caption = "no jobs visible (the admin token shows every job; a job's credential, that job)"
    parts: list[Any] = [jobs]
    drops = drop_rows(previous, current)
    if drops:
        table = Table(title="drops in the interval", title_justify="left")
        for name in ("switch", "stage", "reason", "packets"):
            table.add_column(name)
        for d in drops:
            table.add_row(d["switch"], d["stage"], d["reason"], str(d["packets"]))
        parts.append(table)
    elif current.note:
        parts.append(f"[dim]{current.note}[/dim]")
    return Group(*parts)


def run(client: JobClient, interval: float, console: Console, rounds: int | None = None) -> None:
    """Refresh in place every `interval` seconds until Ctrl-C (or `rounds` refreshes)."""
    previous = take(client)
    with Live(render(None, previous, interval), console=console, auto_refresh=False) as live:
        done = 0
        while rounds is None or done < rounds:
            time.sleep(interval)
            current = take(client)
            live.update(render(previous, current, interval), refresh=True)
            previous = current
            done += 1


def once(client: JobClient, interval: float) -> tuple[Sample, Sample]:
    """Two samples `interval` apart: what `--once` prints."""
    first = take(client)
    time.sleep(interval)
    return first, take(client)
