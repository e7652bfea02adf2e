"""The p4reduce-switch command line: flags, errors, signals, captures."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from switch_support import free_tcp_port

from hostlib.launch import QUICK_RECONNECT
from softswitch.dataplane.pcap import read_pcap
from tests.ports import free_udp_port

ROOT = Path(__file__).resolve().parents[2]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "softswitch.daemon", *args]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=30, env=environment())


def wait_for_grpc(address: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    with grpc.insecure_channel(address, options=QUICK_RECONNECT) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"daemon exited: {process.communicate()[1]}")
            try:
                stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1)
                return
            except grpc.RpcError:
                time.sleep(0.1)
    raise AssertionError("daemon did not start serving")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, int, Path]]:
    """A --no-p4 daemon with one UDP port and pcaps; stopped by the test or at teardown."""
    address = f"127.0.0.1:{free_tcp_port()}"
    udp = free_udp_port()
    pcaps = tmp_path / "pcaps"
    pcaps.mkdir()
    process = subprocess.Popen(
        command(
            "--no-p4",
            "--device-id",
            "1",
            "--grpc-server-addr",
            address,
            "--udp-port",
            f"1@127.0.0.1:{udp}",
            "--pcap",
            str(pcaps),
            "--log-console",
            "--log-level",
            "debug",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    try:
        wait_for_grpc(address, process)
        yield process, address, udp, pcaps
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def test_help_explains_every_flag() -> None:
    result = run("--help")
    assert result.returncode == 0
    for flag in (
        "-i",
        "--udp-port",
        "--device-id",
        "--grpc-server-addr",
        "--cpu-port",
        "--no-p4",
        "--p4info",
        "--log-console",
        "--log-level",
        "--log-file",
        "--pcap",
        "--drop-rate",
        "--drop-rate-out",
        "--drop-ports",
        "--seed",
        "--conformance",
        "--max-streams",
        "--error-details",
        "--backend",
    ):
        assert flag in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-p4", "--udp-port", "1@127.0.0.1"], "expected PORT@ADDR:UDPPORT"),
        (["--no-p4", "--udp-port", "x@127.0.0.1:5"], "expected PORT@"),
        (["--no-p4", "--udp-port", "1@no.such.host.invalid:5000"], "cannot bind"),
        (["--no-p4", "-i", "1@no-such-if0"], "no-such-if0"),
        (["--no-p4", "--drop-rate", "1.5"], "between 0 and 1"),
        (["--no-p4", "--drop-rate", "0.1", "--drop-ports", "5,x"], "'5,x' is not a list of port numbers"),
        (["--no-p4", "--cpu-port", "1", "--udp-port", "1@127.0.0.1:5"], "used twice"),
        (["/no/such/program.json"], "cannot read"),
        ([], "--no-p4"),
        (["--no-p4", "--grpc-server-addr", "256.1.1.1:1"], "cannot listen"),
        (["--no-p4", "--bogus"], "unrecognized arguments"),
        (["--no-p4", "--log-level", "loud"], "invalid choice"),
        (["--no-p4", "--pcap", "/no/such/folder"], "directory does not exist"),  # as bmv2
        (["--no-p4", "--conformance", "pi"], "invalid choice"),
        (["--no-p4", "--max-streams", "0"], "--max-streams must be at least 1"),
        (["--no-p4", "--error-details", "some"], "--error-details must be 'all' or a number of bytes"),
        (["--no-p4", "--error-details", "10"], "--error-details must be 'all' or a number of bytes >= 64"),
        (["--no-p4", "--backend", "rust"], "invalid choice"),
    ],
)
def test_user_mistakes_give_one_error_line_and_a_nonzero_exit(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("p4reduce-switch: error:"), (
        result.stderr
    )


def test_without_a_c_compiler_backend_c_is_one_error_line(tmp_path: Path) -> None:
    env = environment() | {"CC": str(tmp_path / "no-cc"), "PATH": str(tmp_path)}
    result = subprocess.run(
        command("--no-p4", "--backend", "c"), capture_output=True, text=True, timeout=30, env=env
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "p4reduce-switch: error: --backend c: no C compiler found "
        "(install build-essential, or --backend python)"
    )


def test_without_a_c_compiler_the_default_says_so_in_one_line_and_runs_python(tmp_path: Path) -> None:
    env = environment() | {"CC": str(tmp_path / "no-cc"), "PATH": str(tmp_path)}
    env.pop("P4REDUCE_SWITCH_BACKEND", None)
    address = f"127.0.0.1:{free_tcp_port()}"
    process = subprocess.Popen(
        command("--no-p4", "--grpc-server-addr", address), stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        wait_for_grpc(address, process)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    notices = [line for line in stderr.splitlines() if "notice" in line]
    assert process.returncode == 0
    assert notices == [
        "p4reduce-switch: notice: no C compiler found (cc): running the Python backend, tens of times slower "
        "(install build-essential)"
    ]


def test_a_busy_udp_port_is_a_clear_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        result = run("--no-p4", "--udp-port", f"1@127.0.0.1:{taken.getsockname()[1]}")
    assert result.returncode == 1
    assert "cannot bind" in result.stderr and "in use" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly_and_flush_captures(
    daemon: tuple[subprocess.Popen[str], str, int, Path], signum: int
) -> None:
    process, address, udp, pcaps = daemon
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.sendto(b"no pipeline yet", ("127.0.0.1", udp))
    time.sleep(0.3)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
    assert "dropped, no pipeline" in stderr  # per-packet debug logging
    [ready] = stdout.splitlines()  # the one line that says it serves, as simple_switch_grpc prints one
    assert ready.startswith(f"p4reduce-switch ready: P4Runtime on {address}, device id 1; ports 1 (udp ")
    assert ready.endswith("no pipeline yet (a controller pushes one)")
    [frame] = read_pcap(pcaps / "1_in.pcap")
    assert frame.endswith(b"no pipeline yet")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
        again.bind(("127.0.0.1", udp))  # the daemon closed its socket


def test_a_burst_of_signals_still_stops_it(daemon: tuple[subprocess.Popen[str], str, int, Path]) -> None:
    """`kill` of a process group sends each process a SIGTERM, and an operator may send more: the switch
    once hung for ever when a signal landed while its main thread held the stop event's lock."""
    process, _, _, _ = daemon
    time.sleep(0.3)
    for _ in range(5000):  # as fast as they go: a handler is still running when the next arrives
        os.kill(process.pid, signal.SIGTERM)
    process.communicate(timeout=15)
    assert process.returncode == 0


def test_a_second_daemon_on_the_same_grpc_address_fails(
    daemon: tuple[subprocess.Popen[str], str, int, Path],
) -> None:
    _, address, _, _ = daemon
    result = run("--no-p4", "--grpc-server-addr", address)
    assert result.returncode == 1 and "cannot listen" in result.stderr


def test_error_details_is_all_or_a_number_of_bytes() -> None:
    """--error-details: unset leaves the conformance mode's default (None), `all` sends every error (0)."""
    from softswitch.daemon import error_details

    assert (error_details(None), error_details("all"), error_details("8192")) == (None, 0, 8192)
