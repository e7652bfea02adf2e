"""p4reduce-ctl's command line: consistent help, and one clear stderr line for every user mistake."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import main, parser

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_python_dash_m_runs_the_cli_and_lists_every_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for command in ("serve", "provision", "pipeline", "job", "fwd", "counters", "top", "shell"):
        assert command in result.stdout


Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def _leaves(top: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every runnable command's parser, by its words (`job show`)."""
    subparsers = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, top
        return
    for name, child in subparsers[0].choices.items():
        yield from _leaves(child, (*path, name))


def test_every_command_says_in_its_help_what_it_does() -> None:
    leaves = dict(_leaves(parser()))
    assert ("job", "show") in leaves and ("top",) in leaves
    for words, command in leaves.items():
        assert command.description and len(command.description) > 40, f"{' '.join(words)}: no description"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["serve", "--help"],
            [
                "--config",
                "--listen",
                "--lease",
                "--token",
                "--admin-token",
                "--tls-cert",
                "--tls-key",
                "--insecure",
            ],
        ),  # fmt: skip
        (["pipeline", "push", "--help"], ["--switch", "--p4info", "--config", "--force", "--election-id"]),
        (
            ["job", "create", "--help"],
            [
                "--world-size",
                "--pool-size",
                "--controller",
                "--json",
                "--credential",
                "job name: 1-64 letters",
            ],
        ),  # fmt: skip
        (["job", "list", "--help"], ["--controller", "--token", "--json"]),
        (["job", "delete", "--help"], ["the job", "--credential"]),
        (["fwd", "add", "--help"], ["destination MAC", "switch port (0..511)", "--switch"]),
        (["counters", "--help"], ["--job", "--watch", "--json", "$P4REDUCE_JOB_CREDENTIAL"]),
        (["top", "--help"], ["--once", "--interval", "--json", "--credential"]),
        (["serve", "--help"], ["--metrics"]),
        (["provision", "--help"], ["--config", "--force-push"]),
        (["shell", "--help"], ["--switch", "--venv"]),
    ],
)
def test_every_command_documents_its_options(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0
    for option in expected:
        assert option in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["job", "create", "x"], "the following arguments are required: --world-size"),
        (["fwd", "list", "--switch", "nohost"], "'nohost' is not HOST:PORT"),
        (["counters", "--watch", "-1"], "'-1' must be a positive number"),
        (["job", "create", "x", "--world-size", "-1"], "argument --world-size: -1 is outside 1..32"),
        (["job", "create", "x", "--world-size", "99999999999"], "99999999999 is outside 1..32"),
        (["job", "create", "x", "--world-size", "2", "--pool-size", "-3"], "-3 is outside 2..32768"),
        (["job", "create", "x", "--world-size", "2", "--pool-size", "0"], "0 is outside 2..32768"),
        (["job", "create", "x", "--world-size", "two"], "'two' is not an integer"),
        (["provision", "--config", "x", "--election-id", "0"], f"0 is outside 1..{2**128 - 1}"),
        (["job", "frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_command_line_mistakes_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_count_without_watch_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "counters", "--count", "3")
    assert (code, err) == (
        1,
        "p4reduce-ctl: error: --count N needs --watch SECONDS (without --watch there is one round)\n",
    )


def test_unreachable_switch_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, _, err = run(capsys, "fwd", "list", "--switch", address)
    assert (code, err) == (1, f"p4reduce-ctl: error: switch {address} is unreachable "
                              "(is the switch running?)\n")  # fmt: skip


def test_unreachable_daemon_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, _, err = run(capsys, "job", "show", "nope", "--controller", address)
    assert code == 1
    assert (
        err
        == f"p4reduce-ctl: error: controller at {address} is unreachable (is `p4reduce-ctl serve` running?)\n"
    )


def test_bad_values_are_refused_before_any_switch_is_contacted(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, _, err = run(capsys, "fwd", "add", "02:00:00:00:00:zz", "1", "--switch", address)
    expected = (
        "p4reduce-ctl: error: MAC address: '02:00:00:00:00:zz' is not a MAC address like 02:00:00:00:00:01\n"
    )
    assert (code, err) == (1, expected)
    code, _, err = run(capsys, "fwd", "add", "02:00:00:00:00:01", "512", "--switch", address)
    assert (code, err) == (1, "p4reduce-ctl: error: port: 512 is not an integer in 0..511\n")


def test_bad_config_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "lab.yaml"
    bad.write_text("switches: {}\n")
    for command in ("provision", "serve"):
        code, _, err = run(capsys, command, "--config", str(bad))
        assert (code, err) == (1, f"p4reduce-ctl: error: {bad}: switches: expected a list, got dict\n")


def test_missing_pipeline_files_name_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    address = f"127.0.0.1:{closed_port()}"
    p4info, program = str(tmp_path / "p.txtpb"), str(tmp_path / "p.json")
    code, _, err = run(
        capsys, "pipeline", "push", "--switch", address, "--p4info", p4info, "--config", program
    )
    assert code == 1
    assert err == f"p4reduce-ctl: error: P4Info file {p4info} not found (build it first, e.g. `make build`)\n"


def test_a_malformed_p4info_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p4info, program = tmp_path / "p.txtpb", tmp_path / "p.json"
    p4info.write_text("tables { bogus: 1 }\n")
    program.write_text("{}")
    address = f"127.0.0.1:{closed_port()}"
    code, _, err = run(capsys, "pipeline", "push", "--switch", address,
                       "--p4info", str(p4info), "--config", str(program))  # fmt: skip
    assert code == 1
    assert err.startswith(f"p4reduce-ctl: error: P4Info file {p4info} is not a P4Info text protobuf: 1:")
    assert err.count("\n") == 1


def test_shell_without_its_venv_says_which_command_creates_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "shell", "--venv", str(tmp_path / "none"))
    assert code == 1
    script = ROOT / "scripts" / "p4runtime-shell.sh"
    venv = tmp_path / "none"
    assert err == f"p4reduce-ctl: error: p4runtime-shell venv {venv} is missing; create it with: {script}\n"


def test_serve_on_a_taken_address_fails_before_touching_a_switch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "lab.yaml"
    switch = f"127.0.0.1:{closed_port()}"
    config.write_text(
        f"switches: [{{name: s1, grpc: '{switch}', p4info: p, device_config: d,"
        " aggregation: {ipv4: 10.0.0.254, mac: '02:00:00:00:00:fe'}}]\n"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        code, _, err = run(capsys, "serve", "--config", str(config), "--listen", address)
    assert (code, err) == (
        1,
        f"p4reduce-ctl: error: cannot listen on {address} (address in use, or not an address of this host)\n",
    )
