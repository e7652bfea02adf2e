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

from contracts.protocol import EMBEDDED_DEFAULT_VALUES_PER_PACKET

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "mininet" / "lab.py"

needs_mininet = pytest.mark.skipif(
    os.geteuid() != 0 or importlib.util.find_spec("mininet") is None or shutil.which("mn") is None,
    reason="the Mininet lab needs root and Debian's mininet package",
)

needs_bmv2 = pytest.mark.skipif(
    shutil.which("simple_switch_grpc") is None or shutil.which("p4c") is None,
    reason="bmv2 (simple_switch_grpc) and p4c are not installed here",
)


def run_lab(*args: str) -> tuple[subprocess.CompletedProcess[str], dict, list[str]]:
    """mininet/lab.py with its logs, pcaps, results and state file in a temporary folder (never the
    checkout's, where a lab of the user's may be running)."""
    with tempfile.TemporaryDirectory(prefix="p4reduce-lab-") as out:
        env = dict(os.environ, P4REDUCE_LAB_STATE=str(Path(out) / "lab-state.json"))
        try:
            done = subprocess.run(
                [sys.executable, str(LAB), "--out", out, *args], capture_output=True, text=True, timeout=240,
                cwd=ROOT, env=env,
            )  # fmt: skip
        finally:
            subprocess.run([sys.executable, str(LAB), "--clean"], capture_output=True, timeout=60, env=env)
        new = sorted((Path(out) / "results").glob("lab-*.json"))
        errors = [
            f"{log.name}: {line}"
            for log in sorted((Path(out) / "logs").glob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if " ERROR " in line
        ]
        return done, json.loads(new[-1].read_text()) if new else {}, errors


@needs_mininet
@pytest.mark.root
def test_star_lab_with_four_workers_verifies_every_sum() -> None:
    done, results, errors = run_lab("--workers", "4", "--size", "4096")
    assert done.returncode == 0, done.stdout + done.stderr
    assert errors == [], "a clean run and teardown log no errors"
    assert "*** PASS" in done.stdout
    assert results["ok"] and results["workers"] == 4 and results["ping_loss"] == 0
    assert all(r["ok"] for report in results["reports"] for r in report["results"])
    counted = {c["counter"]: c["packets"] for c in results["counters"]}
    # the lab runs the program as p4reduce-p4c compiles it by default, K = 1024, over links of the
    # 9000-byte MTU its P4Info asks for: a 1500-byte link would carry none of these DATA whole
    chunks = -(-4096 // EMBEDDED_DEFAULT_VALUES_PER_PACKET)
    assert (
        counted["job_results_out"] >= 2 * chunks
    )  # float32 (plus priming) and int32 went through the switch


@needs_mininet
@pytest.mark.root
def test_a_lab_of_jumbo_packets_gives_its_links_the_mtu_they_need() -> None:
    """K = 1024: 4148-byte DATA cross the lab whole, over links the lab set to a 9000-byte MTU."""
    done, results, errors = run_lab(
        "--workers",
        "2",
        "--size",
        "8192",
        "--dtype",
        "int32",
        "--values-per-packet",
        "1024",
        "--switch-log",
        "off",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert errors == [] and results["ok"], done.stdout
    counted = {c["counter"]: c["packets"] for c in results["counters"]}
    assert counted["job_results_out"] == 8192 // 1024, "one packet per 1024 values: no fragment, no loss"


@needs_mininet
@pytest.mark.root
def test_line_lab_crosses_two_switches() -> None:
    """Hosts on the second switch reach the aggregator over the L2 path: pings and sums both work."""
    done, results, _ = run_lab(
        "--topology", "line", "--workers", "4", "--size", "2048", "--dtype", "int32", "--aggregate-at", "s1"
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"] and results["ping_loss"] == 0 and results["aggregate_at"] == "s1"


LEAFSPINE8 = str(ROOT / "mininet" / "topos" / "leafspine8.json")


@needs_mininet
@pytest.mark.root
def test_leaf_spine_lab_aggregates_in_a_tree_of_leaves_and_spine() -> None:
    """`make lab TOPO=mininet/topos/leafspine8.json`: each leaf aggregates its four hosts, the spine the
    two leaves; every rank's description is its own leaf's, and every sum is right."""
    done, results, errors = run_lab("--topo", LEAFSPINE8, "--size", "4096", "--switch-log", "info")
    assert done.returncode == 0, done.stdout + done.stderr
    assert errors == [], "a clean run and teardown log no errors"
    assert "*** PASS" in done.stdout and results["aggregate_at"] == "tree"
    assert results["ok"] and results["workers"] == 8 and results["ping_loss"] == 0
    assert "10.0.0.253:20562, ranks 0..3" in done.stdout and "10.0.0.252:20562, ranks 4..7" in done.stdout
    assert "leaf1: for spine via port 5" in done.stdout and "spine: root" in done.stdout
    data_in = {c["switch"]: c["packets"] for c in results["counters"] if c["counter"] == "job_data_in"}
    # each leaf takes one DATA per rank, the spine one partial per leaf: the leaves did aggregate
    assert data_in["leaf1"] == data_in["leaf2"] == 2 * data_in["spine"] > 0, data_in


@needs_mininet
@pytest.mark.root
def test_leaf_spine_lab_aggregating_only_at_the_spine_bridges_at_the_leaves() -> None:
    """--aggregate-at root: the spine aggregates all eight hosts, the leaves forward (the baseline)."""
    done, results, errors = run_lab(
        "--topo", LEAFSPINE8, "--aggregate-at", "root", "--size", "4096", "--dtype", "int32"
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert errors == [] and results["ok"] and results["aggregate_at"] == "spine"
    assert "switch 10.0.0.254:20562" in done.stdout  # every rank sends to the spine's address
    assert "L2 entries over 2 switch link(s); aggregation at spine only" in done.stdout


@needs_mininet
@pytest.mark.root
def test_three_leaf_lab_aggregates_twelve_workers() -> None:
    done, results, _ = run_lab(
        "--topo", str(ROOT / "mininet" / "topos" / "leafspine12.json"), "--size", "2048", "--dtype", "int32",
        "--switch-log", "off",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"] and results["workers"] == 12


@needs_mininet
@pytest.mark.root
def test_bad_topology_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "topo.json"
    bad.write_text('{"switches": [], "hosts": []}')
    done, _, _ = run_lab("--topo", str(bad))
    assert done.returncode == 1
    assert done.stderr.strip().startswith("lab:") and "Traceback" not in done.stderr


@needs_bmv2
@needs_mininet
@pytest.mark.root
def test_star_lab_on_bmv2() -> None:
    done, results, _ = run_lab("--switch", "bmv2", "--workers", "4", "--size", "4096")
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"]


@needs_bmv2
@needs_mininet
@pytest.mark.root
def test_leaf_spine_lab_on_bmv2() -> None:
    """The same tree of three bmv2 switches: the program's child and parent roles on p4c's build."""
    done, results, _ = run_lab("--switch", "bmv2", "--topo", LEAFSPINE8, "--size", "4096")
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["ok"] and results["aggregate_at"] == "tree"


@needs_mininet
@pytest.mark.root
def test_clean_removes_what_this_checkouts_labs_recorded_and_nothing_else(tmp_path: Path) -> None:
    """`make stop` reads the state file of its checkout's runs: it ends their recorded processes and
    deletes their recorded links, and leaves alone look-alikes it did not start (another checkout's
    lab, another user's Mininet shell, links that merely look like Mininet's)."""
    sys.path.insert(0, str(ROOT / "mininet"))
    from lab_state import Record, command_line, save

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen([*sleeper, "controller", "serve", "--config", "lab.yaml"])
    theirs = subprocess.Popen([*sleeper, "bash", "mininet:h1"])  # looks like a lab, was not recorded
    for a, b in (("h97-eth0", "s97-eth3"), ("h98-eth0", "s98-eth3")):
        subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    state = tmp_path / "lab-state.json"
    line = command_line(ours.pid)
    assert line is not None
    save([Record(owner=ours.pid, processes={ours.pid: line}, links=["s97-eth3"])], state)
    env = dict(os.environ, P4REDUCE_LAB_STATE=str(state))
    with tempfile.NamedTemporaryFile(dir="/tmp", suffix=".log") as someone_elses_log:
        try:
            done = subprocess.run(
                [sys.executable, str(LAB), "--clean"], capture_output=True, text=True, timeout=60, env=env
            )
            assert done.returncode == 0, done.stderr
            assert f"killed {ours.pid}" in done.stdout and "deleted link s97-eth3" in done.stdout
            links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
            assert "h97-eth0" not in links and "s97-eth3" not in links  # a veth pair goes as one
            assert "h98-eth0" in links and "s98-eth3" in links
            assert ours.wait(timeout=10) != 0  # killed
            assert theirs.poll() is None
            assert Path(someone_elses_log.name).exists() and not state.exists()
            again = subprocess.run(
                [sys.executable, str(LAB), "--clean"], capture_output=True, text=True, env=env
            )
            assert "nothing of this checkout's labs was left to remove" in again.stdout
        finally:
            for name in ("h97-eth0", "h98-eth0"):
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            for process in (ours, theirs):
                process.kill()
                process.wait()
