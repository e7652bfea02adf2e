"""The Mininet lab end to end: hosts, P4 switches, controller, workers, verified sums.

Runs `mininet/lab.py` as `make lab` does (root; Debian's Mininet), with small
tensors, and checks what a lab user would read: the PASS line, the results
file, and the counters that prove the switch aggregated.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from contracts.protocol import DEFAULT_VALUES_PER_PACKET

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "mininet" / "lab.py"

needs_mininet = pytest.mark.skipif(
    os.geteuid() != 0 or importlib.util.find_spec("mininet") is None or shutil.which("mn") is None,
    reason="the Mininet lab needs root and Debian's mininet package",
)


def run_lab(*args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    before = set((ROOT / "results").glob("lab-*.json")) if (ROOT / "results").exists() else set()
    try:
        done = subprocess.run(
            [sys.executable, str(LAB), *args], capture_output=True, text=True, timeout=240, cwd=ROOT
        )
    finally:
        subprocess.run([sys.executable, str(LAB), "--clean"], capture_output=True, timeout=60)
    new = sorted(set((ROOT / "results").glob("lab-*.json")) - before)
    return done, json.loads(new[-1].read_text()) if new else {}


@needs_mininet
@pytest.mark.root
def test_star_lab_with_four_workers_verifies_every_sum() -> None:
    done, results = run_lab("--workers", "4", "--size", "4096")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "*** PASS" in done.stdout
    assert results["ok"] and results["workers"] == 4 and results["ping_loss"] == 0
    assert all(r["ok"] for report in results["reports"] for r in report["results"])
    counted = {c["counter"]: c["packets"] for c in results["counters"]}
    chunks = -(-4096 // DEFAULT_VALUES_PER_PACKET)  # the lab runs the program as compiled by default
    assert (
        counted["job_results_out"] >= 2 * chunks
    )  # float32 (plus priming) and int32 went through the switch


@needs_mininet
@pytest.mark.root
def test_line_lab_crosses_two_switches() -> None:
    """Hosts on the second switch reach the aggregator over the L2 path: pings and sums both work."""
    done, results = run_lab("--topology", "line", "--workers", "4", "--size", "2048", "--dtype", "int32")
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"] and results["ping_loss"] == 0


@needs_mininet
@pytest.mark.root
def test_bad_topology_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "topo.json"
    bad.write_text('{"switches": [], "hosts": []}')
    done, _ = run_lab("--topo", str(bad))
    assert done.returncode == 1
    assert done.stderr.strip().startswith("lab:") and "Traceback" not in done.stderr


@pytest.mark.skipif(
    shutil.which("simple_switch_grpc") is None or shutil.which("p4c") is None,
    reason="bmv2 (simple_switch_grpc) and p4c are not installed here",
)
@needs_mininet
@pytest.mark.root
def test_star_lab_on_bmv2() -> None:
    done, results = run_lab("--switch", "bmv2", "--workers", "4", "--size", "4096")
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"]


@needs_mininet
@pytest.mark.root
def test_clean_removes_a_labs_leftovers_and_keeps_what_is_not_ours() -> None:
    # An interrupted lab leaves links named like Mininet's and daemons started with files under logs/;
    # `mn -c` would also delete every /tmp/*.log, which the user's and other programs' may be.
    subprocess.run(["ip", "link", "add", "h97-eth0", "type", "veth", "peer", "name", "s97-eth3"], check=True)
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "controller",
            "serve",
            "--config",
            f"{ROOT}/logs/x",
        ]
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "controller", "serve"])
    with tempfile.NamedTemporaryFile(dir="/tmp", suffix=".log") as someone_elses_log:
        try:
            done = subprocess.run(
                [sys.executable, str(LAB), "--clean"], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
            links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
            assert "h97-eth0" not in links and "s97-eth3" not in links
            assert daemon.wait(timeout=10) != 0  # killed
            assert bystander.poll() is None  # a controller not started by a lab is left alone
            assert Path(someone_elses_log.name).exists()
        finally:
            subprocess.run(["ip", "link", "del", "h97-eth0"], capture_output=True)
            for process in (daemon, bystander):
                process.kill()
                process.wait()
