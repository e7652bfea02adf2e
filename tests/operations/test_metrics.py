"""Prometheus metrics of a running controller and switch: what an operator scrapes after a job ran.

A real p4reduce-switch and controller daemon (hostlib.launch.services with
`metrics=True`) carry one small job of three ranks; then /metrics of both
is read over HTTP and compared with what `p4reduce-ctl counters` says and
with the traffic the ranks sent. A real Prometheus (Debian's `prometheus`)
scrapes both and is asked the same through its query API; that test skips
where the binary is absent (`make install` installs it as root).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from controller.cli import main as cli_main
from controller.tables.counters import JOB_COUNTERS
from hostlib.launch import ROOT, Services, free_port
from tests.operations.conftest import CALLS, CREDENTIAL, JOB, SIZE, WORLD

DASHBOARD = ROOT / "docs" / "grafana" / "p4reduce.json"

# Every family the two daemons export (docs/controller.md, docs/softswitch.md), as Prometheus names them.
CONTROLLER_FAMILIES = {
    "p4reduce_job_state",
    "p4reduce_job_world_size",
    "p4reduce_job_ranks_joined",
    "p4reduce_job_slots",
    "p4reduce_job_generation",
    *(f"p4reduce_{name}_{unit}_total" for name in JOB_COUNTERS for unit in ("packets", "bytes")),
    "p4reduce_switch_up",
    "p4reduce_switch_slots",
    "p4reduce_switch_slots_used",
    "p4reduce_switch_slots_free",
    "p4reduce_switch_jobs",
    "p4reduce_switch_reconnects_total",
    "p4reduce_switch_primary",
    "p4reduce_switch_p4runtime_writes_total",
    "p4reduce_switch_p4runtime_write_errors_total",
    "p4reduce_switch_mastership_lost_total",
    "p4reduce_switch_drops_packets_total",
    "p4reduce_switch_drops_bytes_total",
}
SWITCH_FAMILIES = {
    "p4reduce_port_frames_total",
    "p4reduce_port_bytes_total",
    "p4reduce_dataplane_frames_received_total",
    "p4reduce_dataplane_frames_sent_total",
    "p4reduce_dataplane_frames_consumed_total",
    "p4reduce_dataplane_packet_ins_total",
    "p4reduce_dataplane_digests_total",
    "p4reduce_dataplane_lane_frames_received_total",
    "p4reduce_dataplane_lane_frames_sent_total",
    "p4reduce_dataplane_lane_full_total",
    "p4reduce_dataplane_lanes_corrupt_total",
    "p4reduce_dataplane_frames_dropped_total",
    "p4reduce_dataplane_pipeline_loaded",
    "p4reduce_p4_counter_packets_total",
    "p4reduce_p4_counter_bytes_total",
}


def scrape(address: str) -> list[Sample]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    [found] = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    return found


def counters_command(svc: Services, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[int, int]]:
    """`p4reduce-ctl counters --job watched --json`: counter -> (packets, bytes)."""
    capsys.readouterr()
    command = ["counters", "--controller", svc.controller, "--job", JOB, "--credential", CREDENTIAL, "--json"]
    assert cli_main(command) == 0
    return {row["counter"]: (row["packets"], row["bytes"]) for row in json.loads(capsys.readouterr().out)}


def test_the_controllers_job_metrics_equal_the_counters_command(
    ran: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = scrape(ran.controller_metrics)
    expected = counters_command(ran, capsys)
    for name in JOB_COUNTERS:
        packets = value(samples, f"p4reduce_{name}_packets_total", job_name=JOB, switch="soft")
        octets = value(samples, f"p4reduce_{name}_bytes_total", job_name=JOB, switch="soft")
        assert (packets, octets) == expected[name], name
    assert expected["job_data_in"][0] > 0 and expected["job_results_out"][0] > 0
    assert value(samples, "p4reduce_job_world_size", job_name=JOB) == WORLD
    assert value(samples, "p4reduce_job_ranks_joined", job_name=JOB) == WORLD
    assert value(samples, "p4reduce_job_slots", job_name=JOB) == 16
    states = {s.labels["state"]: s.value for s in samples if s.name == "p4reduce_job_state"}
    assert states == {"active": 1, "waiting": 0}
    assert value(samples, "p4reduce_switch_up", switch="soft") == 1
    slots, used = value(samples, "p4reduce_switch_slots"), value(samples, "p4reduce_switch_slots_used")
    assert used == 16 and value(samples, "p4reduce_switch_slots_free") == slots - used
    assert value(samples, "p4reduce_switch_jobs") == 1
    assert value(samples, "p4reduce_switch_primary") == 1
    assert value(samples, "p4reduce_switch_reconnects_total") == 0
    assert value(samples, "p4reduce_switch_p4runtime_writes_total") > 0
    assert {s.name for s in samples} >= CONTROLLER_FAMILIES


def test_the_switchs_metrics_count_the_jobs_frames_on_its_port(
    ran: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = scrape(ran.switch_metrics)
    counters = counters_command(ran, capsys)
    [data_in] = [
        s.value
        for s in samples
        if s.name == "p4reduce_p4_counter_packets_total" and s.labels["counter"] == "MyIngress.job_data_in"
    ]  # fmt: skip (one job ran)
    assert data_in == counters["job_data_in"][0]
    frames_in = value(samples, "p4reduce_port_frames_total", port="1", direction="in")
    frames_out = value(samples, "p4reduce_port_frames_total", port="1", direction="out")
    # Every DATA came in on port 1 and every result went out of it, one copy per rank.
    assert frames_in >= data_in and frames_out >= counters["job_results_out"][0]
    assert value(samples, "p4reduce_dataplane_frames_received_total") == frames_in
    assert value(samples, "p4reduce_dataplane_frames_sent_total") == frames_out
    # The ranks share the switch's host: every frame came through their shared-memory lanes, and went
    # back through them unless a lane's ring was full.
    assert value(samples, "p4reduce_dataplane_lane_frames_received_total") == frames_in
    lane_out = value(samples, "p4reduce_dataplane_lane_frames_sent_total")
    assert lane_out > 0 and lane_out + value(samples, "p4reduce_dataplane_lane_full_total") == frames_out
    assert value(samples, "p4reduce_port_bytes_total", port="1", direction="in") > 4 * SIZE * WORLD * CALLS
    assert value(samples, "p4reduce_dataplane_pipeline_loaded") == 1
    assert {s.name for s in samples} >= SWITCH_FAMILIES


def test_the_dashboard_uses_only_metrics_that_exist() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    used = {word for expr in exprs for word in _metric_names(expr)}
    exported = CONTROLLER_FAMILIES | SWITCH_FAMILIES
    assert used <= exported, f"not exported: {sorted(used - exported)}"
    assert len(used) >= 10


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bp4reduce_[a-z0-9_]+", expr))


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(PROMETHEUS is None, reason="Prometheus is not installed (apt-get install prometheus)")
def test_a_real_prometheus_scrapes_both_daemons_and_agrees_with_the_counters(
    ran: Services, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n"
        f"  - job_name: controller\n    static_configs:\n      - targets: ['{ran.controller_metrics}']\n"
        f"  - job_name: switch\n    static_configs:\n      - targets: ['{ran.switch_metrics}']\n"
    )
    command = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]  # fmt: skip
    expected = counters_command(ran, capsys)
    with (tmp_path / "prometheus.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        log = tmp_path / "prometheus.log"
        up = _poll(port, "up", lambda result: len(result) == 2 and all(r["value"][1] == "1" for r in result),
                   server, log)  # fmt: skip
        assert {r["metric"]["job"] for r in up} == {"controller", "switch"}
        query = f'p4reduce_job_data_in_packets_total{{job_name="{JOB}"}}'
        answer = _poll(port, query, lambda result: len(result) == 1, server, log)
        assert float(answer[0]["value"][1]) == expected["job_data_in"][0]
        assert answer[0]["metric"]["instance"] == ran.controller_metrics
        families = CONTROLLER_FAMILIES | SWITCH_FAMILIES
        deadline = time.monotonic() + 30  # each target's first scrape lands in the TSDB in its own time
        names = "label/__name__/values"
        while (missing := families - set(_api(port, names))) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert missing == set()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _api(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}", timeout=5) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    return body["data"]


def _poll(
    port: int, query: str, done: Callable[[list[Any]], bool], server: subprocess.Popen[bytes], log: Path
) -> list[Any]:
    deadline = time.monotonic() + 60
    result: list[Any] = []
    while time.monotonic() < deadline:
        assert server.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
        try:
            result = _api(port, "query?query=" + urllib.parse.quote(query))["result"]
            if done(result):
                return result
        except OSError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(f"{query}: still {result} after 60 s; log: {log.read_text()[-2000:]}")


def test_a_bad_metrics_address_is_one_line_naming_the_flag_or_key(tmp_path: Path) -> None:
    from controller import config as cfg
    from controller.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^controller.metrics: 'here' is not HOST:PORT"):
        cfg._controller({"metrics": "here"})
    assert cfg._controller({"metrics": 9100}).metrics == ("127.0.0.1", 9100)  # a bare port: loopback
    assert cfg._controller({}).metrics is None  # off unless asked for
    result = subprocess.run(
        [sys.executable, "-m", "softswitch.daemon", "--no-p4", "--metrics", "70000"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "p4reduce-switch: error: --metrics '70000' is not HOST:PORT or PORT (PORT 1..65535)"
    ]
