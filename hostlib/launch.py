"""Start the embedded switch, the controller daemon and workers as child processes (demo, bench, labs).

Everything binds to loopback; logs go to files so a failure can be shown
with the tail of the log that explains it. Workers inside Mininet hosts
cannot reach the controller's loopback job API, so their runner joins the
job for them and hands each its place in the job on the command line
(`worker_arguments` writes it, `add_worker_arguments` and `worker_job` read
it back).
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import CREDENTIAL_ENV
from contracts.protocol import EMBEDDED_DEFAULT_VALUES_PER_PACKET, UDP_PORT
from hostlib.communicator import JobSpec

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "p4src" / "v1model" / "p4reduce.p4"
SWITCH_MAC_PORT1 = "02:50:52:00:00:01"  # the MAC p4reduce-switch synthesizes for its port 1
# The K that p4reduce-switch runs when this module starts it on loopback (demo, bench, torch launcher):
# the program's own default on the embedded switch's target (contracts/protocol.py), i.e. the program
# exactly as `make build` compiles it. Loopback's MTU (65536) carries its 4,162-byte frames.
EMBEDDED_VALUES_PER_PACKET = EMBEDDED_DEFAULT_VALUES_PER_PACKET


class LaunchError(RuntimeError):
    """A child process did not come up; the message carries the tail of its log."""


@dataclass(frozen=True)
class Services:
    switch_grpc: str
    controller: str
    switch_address: tuple[str, int]
    logs: Path
    switch_metrics: str = ""  # HOST:PORT of /metrics, when services() was asked for metrics
    controller_metrics: str = ""
    switch_pid: int = 0  # the switch's process, for counting its CPU beside the workers' (p4reduce-bench)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_loopback_address(port: int = UDP_PORT) -> str:
    """A 127.x.y.1 address whose UDP `port` is free, so a rootless switch can serve the real DATA port
    beside another one (a quick-start switch on 127.0.0.1:20562, another checkout's demo, a test)."""
    for _ in range(200):
        address = f"127.{random.randint(64, 250)}.{random.randint(0, 255)}.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
        return address
    raise LaunchError(f"no loopback address with a free UDP port {port} for the switch")


def share_job_credential() -> str:
    """One job credential for every worker process this process starts (they inherit the environment):
    $P4REDUCE_JOB_CREDENTIAL as the user set it, or a fresh secret. The first rank's JoinJob creates the
    job with it and the others present it to join."""
    return os.environ.setdefault(CREDENTIAL_ENV, secrets.token_urlsafe(24))


def build_program(build: Path, values_per_packet: int | None = None) -> tuple[Path, Path]:
    """build/p4reduce.json and its P4Info, compiled with p4reduce-p4c when missing or stale (as `make
    build` compiles them: the embedded switch's default K); with `values_per_packet`, the program for
    that K (-DVALUES_PER_PACKET) in build/k<K>/."""
    defines = []
    if values_per_packet is not None:
        build, defines = build / f"k{values_per_packet}", [f"-DVALUES_PER_PACKET={values_per_packet}"]
        build.mkdir(parents=True, exist_ok=True)
    program, p4info = build / "p4reduce.json", build / "p4reduce.p4info.txtpb"
    sources = list((ROOT / "p4src").rglob("*.p4"))
    newest = max(p.stat().st_mtime for p in sources)
    if not (program.exists() and p4info.exists() and program.stat().st_mtime >= newest):
        command = [
            sys.executable,
            "-m",
            "softswitch.p4c",
            str(PROGRAM),
            "-I",
            str(ROOT / "p4src"),
            *defines,
            "-q",
            "-o",
            str(program),
            "--p4runtime-files",
            str(p4info),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise LaunchError(f"p4reduce-p4c failed:\n{done.stderr}")
    return program, p4info


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 120.0
) -> None:
    """Return once `process` accepts TCP connections on loopback `port`; LaunchError if it dies or stalls.

    The embedded switch compiles its program with the system compiler before it listens: seconds on an
    idle machine, over 30 s on a busy one (a bench under --hog beside a build), hence the long bound."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LaunchError(f"{what} exited with code {process.returncode}:\n{tail(log)}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise LaunchError(f"{what} did not listen on port {port} within {timeout:.0f} s:\n{tail(log)}")


# gRPC waits a second or more before it reconnects to a port that refused it (a daemon not serving yet),
# and fails every call at once meanwhile: a loop that waits for a daemon paces its tries itself.
QUICK_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
]


def wait_for_job_api(
    port: int, process: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 60.0
) -> None:
    """Return once the job API on loopback `port` answers; LaunchError if `process` dies or stalls.

    An open port is not enough: the daemon binds it before it provisions the
    switches, so only an answer proves that it got through its start-up.
    """
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=QUICK_RECONNECT) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise LaunchError(f"{what} exited with code {process.returncode}:\n{tail(log)}")
            try:
                stub.ListJobs(pb.Empty(), timeout=1.0)
                return
            except grpc.RpcError:
                time.sleep(0.1)
    raise LaunchError(f"{what} did not serve on port {port} within {timeout:.0f} s:\n{tail(log)}")


def tail(log: Path, lines: int = 15) -> str:
    """The last lines of a log file, to show why a process failed."""
    with suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_controller(
    config: Path, port: int, log: Path, extra: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`p4reduce-ctl serve` on loopback `port`, logging to `log`; returns once it answers on the job API."""
    command = [
        sys.executable,
        "-m",
        "controller",
        "serve",
        "--config",
        str(config),
        "--listen",
        f"127.0.0.1:{port}",
        *extra,
    ]
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            cwd=ROOT,
        )
    try:
        wait_for_job_api(port, process, log, "the controller (p4reduce-ctl serve)")
    except LaunchError:
        _stop(process)
        raise
    return process


@contextmanager
def services(
    logs: Path,
    build: Path,
    switch_ip: str | None = None,
    drop_rate: float = 0.0,
    drop_rate_out: float = 0.0,
    seed: int = 1,
    pool_size: int = 128,
    stats_file: Path | None = None,
    pcap: Path | None = None,
    values_per_packet: int | None = None,
    metrics: bool = False,
) -> Iterator[Services]:
    """A rootless p4reduce-switch (one UDP port) and a controller daemon provisioning it.

    The switch serves DATA on `switch_ip`:20562, by default a loopback address whose port 20562 is free.

    With `stats_file`, the switch writes its packet counters there (JSON) when it stops, at the end
    of the `with` block: e.g. how many frames its fault injection dropped. With `pcap` (a directory,
    created if need be), it captures every frame in and out with its time (`--pcap`). The switch runs
    the program compiled for `values_per_packet` (None: build/p4reduce.json, the program's own default,
    EMBEDDED_VALUES_PER_PACKET, as `make build` compiles it). With `metrics`,
    both serve Prometheus metrics on free loopback ports (`Services.switch_metrics`, `.controller_metrics`).
    """
    logs.mkdir(parents=True, exist_ok=True)
    switch_ip = switch_ip or free_loopback_address()
    program, p4info = build_program(build, values_per_packet)
    grpc_port, job_port = free_port(), free_port()
    switch_log, controller_log = logs / "switch.log", logs / "controller.log"
    switch_cmd = [
        sys.executable,
        "-m",
        "softswitch.daemon",
        str(program),
        "--p4info",
        str(p4info),
        "--device-id",
        "1",
        "--grpc-server-addr",
        f"127.0.0.1:{grpc_port}",
        "--udp-port",
        f"1@{switch_ip}:{UDP_PORT}",
        "--log-file",
        str(switch_log),
        "--log-level",
        "warn",
    ]
    switch_metrics = controller_metrics = ""
    if metrics:
        switch_metrics, controller_metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        switch_cmd += ["--metrics", switch_metrics]
    if stats_file is not None:
        switch_cmd += ["--stats-file", str(stats_file)]
    if pcap is not None:
        pcap.mkdir(parents=True, exist_ok=True)
        switch_cmd += ["--pcap", str(pcap)]
    if drop_rate or drop_rate_out:
        switch_cmd += [
            "--drop-rate",
            str(drop_rate),
            "--drop-rate-out",
            str(drop_rate_out),
            "--seed",
            str(seed),
        ]
    config = logs / "controller.yaml"
    config.write_text(
        "controller:\n"
        f"  default_pool_size: {pool_size}\n"
        "  lease_seconds: 30\n"
        "switches:\n"
        "  - name: soft\n"
        f"    grpc: 127.0.0.1:{grpc_port}\n"
        "    device_id: 1\n"
        f"    p4info: {p4info}\n"
        f"    device_config: {program}\n"
        "    aggregation:\n"
        f"      ipv4: {switch_ip}\n"
        f"      mac: {SWITCH_MAC_PORT1}\n"
        f"      udp_port: {UDP_PORT}\n"
        "    default_host_port: 1\n"
    )
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with open(switch_log, "ab") as out:
            switch = subprocess.Popen(switch_cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        processes.append(switch)
        wait_for_port(grpc_port, switch, switch_log, "p4reduce-switch")
        extra = ["--metrics", controller_metrics] if metrics else []
        processes.append(start_controller(config, job_port, controller_log, extra))
        yield Services(
            f"127.0.0.1:{grpc_port}",
            f"127.0.0.1:{job_port}",
            (switch_ip, UDP_PORT),
            logs,
            switch_metrics,
            controller_metrics,
            switch.pid,
        )
    finally:
        for process in reversed(processes):
            _stop(process)


def worker_arguments(job: JobSpec, rank: int, bind: tuple[str, int]) -> list[str]:
    """A worker's place in a job as command-line options (mininet/worker.py, experiments/agent.py)."""
    (switch_ip, switch_port), (ip, port) = job.switch_address, bind
    return [
        f"--job-id={job.job_id}",
        f"--world={job.world_size}",
        f"--pool={job.pool_size}",
        f"--values-per-packet={job.values_per_packet}",
        f"--key={job.key}",
        f"--switch={switch_ip}:{switch_port}",
        f"--rank={rank}",
        f"--bind={ip}:{port}",
    ]


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `worker_arguments` writes."""
    parser.add_argument("--job-id", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--pool", type=int, required=True)
    parser.add_argument("--values-per-packet", type=int, required=True, help="K of the switch's pipeline")
    parser.add_argument("--key", type=int, required=True, help="this rank's key (from its JoinJob reply)")
    parser.add_argument("--switch", required=True, help="aggregation address IP:PORT")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--bind", required=True, help="this worker's IP:PORT")


def worker_job(args: argparse.Namespace) -> tuple[JobSpec, int, tuple[str, int]]:
    """(job, rank, local address) from options added by `add_worker_arguments`."""
    switch_ip, switch_port = args.switch.rsplit(":", 1)
    ip, port = args.bind.rsplit(":", 1)
    job = JobSpec(
        args.job_id, args.world, args.pool, (switch_ip, int(switch_port)), args.values_per_packet, args.key
    )
    return job, args.rank, (ip, int(port))
