"""The README's CLI and Python API sections, run as written: what a newcomer types, in that order.

The two long-running commands (terminal 1: `make switch`, terminal 2: the
daemon) start in the background; terminal 3's lines run in one bash, then
the Python API section's loop of four ranks. They use the README's fixed
ports (9559, 20562, 50051, 9100): the test skips when another process
holds one, rather than fight it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PORTS = {"tcp": (9559, 50051, 9100), "udp": (20562,)}


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.index("\n## ", start + 1)
    return README[start:end]


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:python)?\n(.*?)```", text, re.S)


def commands(block: str) -> list[str]:
    """The block's command lines, without their comments (a # that starts a comment follows spaces)."""
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def ports_free() -> bool:
    for kind, numbers in PORTS.items():
        for port in numbers:
            family = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
            with socket.socket(socket.AF_INET, family) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is free
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    return False
    return True


def wait_for(port: int, process: subprocess.Popen[bytes], log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited early: {log.read_text()[-3000:]}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port} after {seconds} s: {log.read_text()[-3000:]}")


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[Path]:
    """Terminals 1 and 2 of the CLI section, running; yields the folder of their logs."""
    if not ports_free():
        pytest.skip(f"a README port ({PORTS}) is in use by another process")
    background = commands(code_blocks(section("The CLI"))[0])
    assert [line.split()[0] for line in background] == ["make", ".venv/bin/p4reduce-ctl"]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for number, (line, port) in enumerate(zip(background, (9559, 50051), strict=True), start=1):
            log = tmp_path / f"terminal{number}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    ["bash", "-c", line],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            processes.append(process)
            wait_for(port, processes[-1], log)
        yield tmp_path
    finally:
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def primary_again(daemon_log: Path, seconds: float) -> bool:
    """The daemon says it holds the switch again (after the README's `fwd add --election-id 20`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        log = daemon_log.read_text()
        if "mastership lost" in log and "primary again" in log.split("mastership lost")[-1]:
            return True
        time.sleep(0.2)
    return False


def test_the_python_api_section_shows_examples_allreduce_py_as_it_is() -> None:
    blocks = code_blocks(section("The Python API"))
    source = (ROOT / "examples" / "allreduce.py").read_text()
    docstring = source[: len(source) - len(blocks[1])].strip()
    assert source.endswith(blocks[1]) and docstring.startswith('"""') and docstring.count('"""') == 2


def test_the_cli_and_python_api_sections_work_as_written(terminals: Path) -> None:
    script = ["set -euo pipefail", *commands(code_blocks(section("The CLI"))[1])]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("P4REDUCE")}  # a newcomer's shell
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=clean
    )
    logs = "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(terminals.glob("*.log")))
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}{logs}"
    assert "train" in result.stdout and "p4reduce_job_slots{" in result.stdout
    assert "deleted job train" in result.stdout
    # As the README says, the daemon takes the switch back 5 s after `fwd add --election-id 20` left.
    assert primary_again(terminals / "terminal2.log", seconds=30), f"the daemon kept backup{logs}"
    [loop] = commands(code_blocks(section("The Python API"))[0])
    # A newcomer's shell: the credential terminal 3 exported, and Python's default (block) buffering, so
    # that each rank's line leaves in one write (the suite's PYTHONUNBUFFERED would split it in two).
    environment = dict(clean, P4REDUCE_JOB_CREDENTIAL="team-a-secret-0123")
    environment.pop("PYTHONUNBUFFERED", None)
    ranks = subprocess.run(["bash", "-c", loop], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=environment)  # fmt: skip
    lines = sorted(line for line in ranks.stdout.splitlines() if line.startswith("rank "))
    ranks_said = f"the ranks' stdout: {ranks.stdout!r}, stderr: {ranks.stderr!r}{logs}"
    assert [line.split(":")[0] for line in lines] == [f"rank {r}" for r in range(4)], ranks_said
    assert all("4 calls" in line for line in lines), lines
