"""Command lines of the two P4Runtime switches the lab runs: p4reduce-switch and bmv2's simple_switch_grpc.

One place knows how each target is started, so the lab, the experiments
and the tests that start bmv2 run it the same way: no program (`--no-p4`,
the controller pushes one), one `-i PORT@IFACE` per interface, captures in
an existing folder (bmv2 does not create it), and the switch log chosen
with `--switch-log` (docs/lab.md has the table):

- `trace`: every packet (p4reduce-switch `-L trace`, with hex dumps;
  bmv2 `-L trace --log-flush`, every header and table hit, as p4lang's tutorials);
- `info`: start-up, pipeline pushes and refused writes;
- `off`: p4reduce-switch warnings and errors only, bmv2 nothing (a failure
  at start still reaches its console log).

bmv2 writes its `--log-file BASE` to `BASE.txt`; what either switch prints
on its console goes to `<name>.log`. bmv2 builds without Thrift do not
know `--thrift-port`; `simple_switch_grpc --help` says whether this one does.
No module here imports Mininet, so tests can use it without Mininet.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hostlib.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "p4src" / "v1model" / "p4reduce.p4"
BMV2 = "simple_switch_grpc"
SWITCH_LOGS = ("trace", "info", "off")
_SOFT_LEVELS = {"trace": "trace", "info": "info", "off": "warn"}


class TargetError(RuntimeError):
    """A switch cannot be started as asked (missing binary, an option it does not have)."""


@dataclass(frozen=True)
class SwitchLaunch:
    """What to start and where its output goes."""

    command: list[str]
    console_log: Path  # stdout and stderr of the process: the lines that explain a failed start
    trace_log: Path  # the switch's own log file (the same file for p4reduce-switch)


@dataclass(frozen=True)
class SwitchSpec:
    """A switch as the lab describes it, independent of the target that runs it."""

    name: str
    grpc_address: str
    device_id: int
    interfaces: tuple[tuple[int, str], ...] = ()  # (port number, Linux interface)
    udp_ports: tuple[str, ...] = ()  # p4reduce-switch only: PORT@ADDR:UDPPORT
    cpu_port: int | None = None
    log_dir: Path = Path("logs")
    pcap_dir: Path | None = None  # must exist: bmv2 refuses a missing one, and so does p4reduce-switch
    switch_log: str = "info"
    drop_rate: float = 0.0
    drop_rate_out: float = 0.0
    drop_ports: tuple[int, ...] = ()  # p4reduce-switch only: the drop rates apply to these ports (none: all)
    conformance: str = "spec"  # p4reduce-switch only: "bmv2" reproduces bmv2's answers everywhere


def soft_launch(spec: SwitchSpec) -> SwitchLaunch:
    """p4reduce-switch, the embedded switch (runs with this Python)."""
    _check_log(spec.switch_log)
    log = spec.log_dir / f"{spec.name}.log"
    command = [sys.executable, "-m", "softswitch.daemon", "--no-p4"]
    command += [arg for port, intf in spec.interfaces for arg in ("-i", f"{port}@{intf}")]
    command += [arg for udp in spec.udp_ports for arg in ("--udp-port", udp)]
    command += ["--device-id", str(spec.device_id), "--grpc-server-addr", spec.grpc_address]
    command += ["--log-file", str(log), "--log-level", _SOFT_LEVELS[spec.switch_log]]
    if spec.conformance != "spec":
        command += ["--conformance", spec.conformance]
    if spec.cpu_port is not None:
        command += ["--cpu-port", str(spec.cpu_port)]
    if spec.pcap_dir is not None:
        command += ["--pcap", str(spec.pcap_dir)]
    if spec.drop_rate or spec.drop_rate_out:
        command += [
            "--drop-rate",
            str(spec.drop_rate),
            "--drop-rate-out",
            str(spec.drop_rate_out),
            "--seed",
            "1",
        ]
        if spec.drop_ports:
            command += ["--drop-ports", ",".join(map(str, spec.drop_ports))]
    return SwitchLaunch(command, log, log)


def bmv2_launch(spec: SwitchSpec) -> SwitchLaunch:
    """bmv2's simple_switch_grpc (must be on PATH)."""
    _check_log(spec.switch_log)
    if shutil.which(BMV2) is None:
        raise TargetError(f"{BMV2} is not on PATH (see docs/lab.md, running on bmv2)")
    if spec.drop_rate or spec.drop_rate_out:
        raise TargetError(f"{BMV2} has no loss injection; use the embedded switch (soft) for a drop rate")
    if spec.udp_ports or spec.conformance != "spec":
        raise TargetError(f"{BMV2} has neither rootless UDP ports nor a conformance choice")
    base = spec.log_dir / spec.name
    command = [BMV2, "--no-p4"]
    command += [arg for port, intf in spec.interfaces for arg in ("-i", f"{port}@{intf}")]
    command += ["--device-id", str(spec.device_id)]
    if bmv2_knows_thrift():  # each switch its own port: two on the default 9090 would collide
        command += ["--thrift-port", str(free_port())]
    command += ["--log-file", str(base), "-L", spec.switch_log]
    if spec.switch_log == "trace":
        command.append("--log-flush")
    if spec.pcap_dir is not None:
        command += ["--pcap", str(spec.pcap_dir)]
    command += ["--", "--grpc-server-addr", spec.grpc_address]
    if spec.cpu_port is not None:
        command += ["--cpu-port", str(spec.cpu_port)]
    return SwitchLaunch(command, spec.log_dir / f"{spec.name}.log", base.with_name(f"{spec.name}.txt"))


LAUNCHERS = {"soft": soft_launch, "bmv2": bmv2_launch}


def p4c_bmv2(out: Path) -> tuple[Path, Path]:
    """p4c's bmv2 JSON and P4Info of p4reduce.p4, written to `out` (p4c must be on PATH)."""
    if shutil.which("p4c") is None:
        raise TargetError("p4c is not on PATH (see docs/lab.md, running on bmv2)")
    out.mkdir(parents=True, exist_ok=True)
    program, p4info = out / "p4reduce.json", out / "p4reduce.p4info.txtpb"
    command = ["p4c", "--target", "bmv2", "--arch", "v1model", "-I", str(ROOT / "p4src"), "-o", str(out),
               "--p4runtime-files", str(p4info), str(PROGRAM)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise TargetError(f"p4c failed on {PROGRAM}:\n{done.stderr.strip()}")
    return program, p4info


@functools.cache
def bmv2_knows_thrift(binary: str = BMV2) -> bool:
    """Whether this simple_switch_grpc was built with Thrift (it then accepts --thrift-port)."""
    try:
        done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TargetError(f"cannot run `{binary} --help`: {error}") from None
    return "--thrift-port" in done.stdout + done.stderr


def _check_log(choice: str) -> None:
    if choice not in SWITCH_LOGS:
        raise TargetError(f"switch log {choice!r}: choose one of {', '.join(SWITCH_LOGS)}")
