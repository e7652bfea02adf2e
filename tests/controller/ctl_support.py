"""What the controller's integration tests run: a real switch, a real daemon, real workers.

A *target* is a P4Runtime switch plus the compiler that makes its artifacts:
the embedded `p4reduce-switch` (rootless UDP port, compiled by
`p4reduce-p4c`), the same switch giving bmv2's answers also where they
break the P4Runtime specification (`soft-bmv2`: `--conformance bmv2`), or
bmv2's `simple_switch_grpc` (compiled by `p4c`). Each test gets its own
switch and daemon on free ports, stopped afterwards. Switches start with
the lab's command lines (mininet/targets.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml
from finsy.proto import p4r, p4r_grpc

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import call_metadata
from contracts.protocol import HEADER_BYTES, UDP_PORT, MsgType, payload_bytes
from controller.cli import main as cli_main
from hostlib.launch import QUICK_RECONNECT, free_loopback_address
from tests.packet_program import PACKET_K, p4c_command
from tests.ports import free_tcp_port

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's switch command lines (a folder of scripts)
from targets import LAUNCHERS, SwitchSpec, p4c_bmv2  # noqa: E402

TARGETS = ("soft", "soft-bmv2", "bmv2")
BMV2_ANSWERS = ("soft-bmv2", "bmv2")  # targets that answer as bmv2 does where it breaks the specification
K = PACKET_K  # p4reduce-p4c gets -DVALUES_PER_PACKET=64; p4c's bmv2 default is 64 too
HEADER = struct.Struct("!BBHHBBIIII")  # msg_type, rank, job, set|slot, exp, flags, seq, key, call, aux
VALUES = struct.Struct(f"!{K}i")
assert HEADER.size == HEADER_BYTES and HEADER.size + VALUES.size == payload_bytes(K)
CALL = 0x10000000 | K  # the descriptor of a sum of K int32 (docs/protocol.md, *Call agreement*)
START_TIMEOUT = 30.0
CREDENTIAL = "the-suite's-job-credential"  # every test job's, unless a test says otherwise


@pytest.fixture(autouse=True)
def job_credential(monkeypatch: pytest.MonkeyPatch) -> str:
    """The credential a tenant's shell would export: every `p4reduce-ctl job ...` of a test presents it
    (autouse where a conftest imports it)."""
    monkeypatch.setenv("P4REDUCE_JOB_CREDENTIAL", CREDENTIAL)
    return CREDENTIAL


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


@dataclass(frozen=True)
class Artifacts:
    p4info: Path
    device_config: Path


@dataclass
class Switch:
    target: str
    address: str
    artifacts: Artifacts
    udp_address: str | None  # where workers send DATA (rootless targets only)
    process: subprocess.Popen[str]


def compile_soft(out: Path) -> Artifacts:
    if not (ROOT / "softswitch" / "p4c.py").exists() and not (ROOT / "softswitch" / "p4c").is_dir():
        pytest.skip("the embedded switch's compiler (softswitch/p4c) is not in this tree")
    artifacts = Artifacts(out / "p4reduce.p4info.txtpb", out / "p4reduce.json")
    command = p4c_command(artifacts.device_config, artifacts.p4info)
    result = subprocess.run(command, capture_output=True, text=True, env=environment(), timeout=300)
    assert result.returncode == 0, result.stderr
    return artifacts


def compile_bmv2(out: Path) -> Artifacts:
    missing = [tool for tool in ("p4c", "simple_switch_grpc") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"bmv2 target needs {' and '.join(missing)} on PATH")
    program, p4info = p4c_bmv2(out)
    return Artifacts(p4info, program)


def start_switch(
    target: str,
    artifacts: Artifacts,
    logs: Path,
    same_as: Switch | None = None,
    interfaces: tuple[tuple[int, str], ...] = (),
    drop_rate: float = 0.0,
) -> Switch:
    """A new switch on free ports, or (`same_as`) on the ports of one that was stopped: a restart.

    `interfaces` adds raw ports (port, Linux interface); `drop_rate` injects loss both ways.
    """
    address = same_as.address if same_as else f"127.0.0.1:{free_tcp_port()}"
    udp_address = same_as.udp_address if same_as else None if target == "bmv2" else free_loopback_address()
    spec = SwitchSpec(
        name="switch",
        grpc_address=address,
        device_id=1,
        udp_ports=() if udp_address is None else (f"1@{udp_address}:{UDP_PORT}",),
        log_dir=logs,
        conformance="bmv2" if target == "soft-bmv2" else "spec",
        interfaces=interfaces,
        drop_rate=drop_rate,
        drop_rate_out=drop_rate,
    )
    launch = LAUNCHERS["bmv2" if target == "bmv2" else "soft"](spec)
    console = launch.console_log
    with console.open("a") as sink:  # a file, not a pipe: a chatty switch must never block on a full pipe
        process = subprocess.Popen(
            launch.command, stdout=sink, stderr=subprocess.STDOUT, text=True, env=environment()
        )
    switch = Switch(target, address, artifacts, udp_address, process)
    try:
        _wait_for_grpc(address, process, console)
    except BaseException:
        stop(process)
        raise
    return switch


def _wait_for_grpc(address: str, process: subprocess.Popen[str], stderr: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with grpc.insecure_channel(address, options=QUICK_RECONNECT) as channel:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"{process.args[0]} exited: {stderr.read_text()}")
            try:
                grpc.channel_ready_future(channel).result(timeout=0.5)
                return
            except grpc.FutureTimeoutError:
                continue
    raise AssertionError(f"no gRPC server at {address} within {START_TIMEOUT} s")


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_config(
    switch: Switch, path: Path, tenants: list[dict[str, object]] | None = None, **controller: object
) -> Path:
    data: dict[str, object] = {
        "controller": {"default_pool_size": 16, "join_timeout_seconds": 10, **controller},
        "switches": [
            {
                "name": "sw1",
                "grpc": switch.address,
                "p4info": str(switch.artifacts.p4info),
                "device_config": str(switch.artifacts.device_config),
                "aggregation": {"ipv4": switch.udp_address or "10.0.0.254", "mac": "02:50:52:00:00:01"},
                "default_host_port": 1,
            }
        ],
        "hosts": [{"name": "h9", "ipv4": "10.0.0.9", "mac": "02:00:00:00:00:09", "switch": "sw1", "port": 2}],
    }
    if tenants is not None:
        data["tenants"] = tenants
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Daemon:
    """`p4reduce-ctl serve` in a subprocess."""

    config: Path
    listen: str
    log: Path
    args: tuple[str, ...] = ()
    process: subprocess.Popen[str] | None = None
    token: str = ""
    tls_ca: Path | None = None

    def start(self) -> Daemon:
        command = [sys.executable, "-m", "controller", "serve", "--config", str(self.config),
                   "--listen", self.listen, "--log-level", "info", *self.args]  # fmt: skip
        self._log = self.log.open("a")
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, text=True, env=environment()
        )
        deadline = time.monotonic() + START_TIMEOUT
        if self.tls_ca is None:
            channel = grpc.insecure_channel(self.listen)
        else:
            channel = grpc.secure_channel(self.listen, grpc.ssl_channel_credentials(self.tls_ca.read_bytes()))
        with channel:
            stub = pb_grpc.JobServiceStub(channel)
            metadata = [("authorization", f"Bearer {self.token}")] if self.token else []
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise AssertionError(f"controller exited: {self.log.read_text()}")
                try:
                    stub.ListJobs(pb.Empty(), timeout=1, metadata=metadata)
                    return self
                except grpc.RpcError:
                    time.sleep(0.1)
        raise AssertionError(f"controller did not serve within {START_TIMEOUT} s: {self.log.read_text()}")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self._log.close()
            self.process = None


@contextlib.contextmanager
def daemons(switch: Switch, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `p4reduce-ctl serve` against `switch` (one listen address): start(*extra_args, token=...,
    tls_ca=..., **controller_config); every daemon started is stopped at the end."""
    started: list[Daemon] = []
    listen = f"127.0.0.1:{free_tcp_port()}"

    def start(
        *args: str,
        token: str = "",
        tls_ca: Path | None = None,
        tenants: list[dict[str, object]] | None = None,
        **controller: object,
    ) -> Daemon:
        config = write_config(switch, tmp_path / f"lab{len(started)}.yaml", tenants, **controller)
        d = Daemon(config, listen, tmp_path / "controller.log", args, token=token, tls_ca=tls_ca)
        started.append(d)
        return d.start()

    try:
        yield start
    finally:
        for d in started:
            d.stop()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def cli(*argv: str) -> CliResult:
    """Run p4reduce-ctl in-process (as a user would type it) and capture what it prints."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return CliResult(code, out.getvalue(), err.getvalue())


@dataclass
class Worker:
    """One rank: a UDP socket on a loopback address, as hostlib would open it."""

    rank: int
    sock: socket.socket
    ip: str = field(init=False)
    port: int = field(init=False)
    key: int = 0  # from this rank's JoinJob reply

    def __post_init__(self) -> None:
        self.ip, self.port = self.sock.getsockname()

    @classmethod
    def open(cls, rank: int, ip: str) -> Worker:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((ip, 0))
        sock.settimeout(5)
        return cls(rank, sock)

    def address(self) -> pb.WorkerAddress:
        return pb.WorkerAddress(ipv4=self.ip, udp_port=self.port)

    def send(self, switch: tuple[str, int], job_id: int, slot: int, values: list[int], set_: int = 0) -> None:
        """DATA of use `slot` of call 0 on `slot`, with this rank's key."""
        header = HEADER.pack(
            MsgType.DATA, self.rank, job_id, (set_ << 15) | slot, 0, 0, slot, self.key, CALL, 0
        )
        self.sock.sendto(header + VALUES.pack(*values), switch)

    def results(self, count: int) -> dict[int, list[int]]:
        """`count` RESULT packets: slot -> values (fails on a timeout or a foreign packet)."""
        out = {}
        for _ in range(count):
            payload = self.sock.recv(2048)
            msg, _, _, set_slot, _, _, _, key, _, _ = HEADER.unpack_from(payload)
            assert msg == MsgType.RESULT and key == self.key
            out[set_slot & 0x7FFF] = list(VALUES.unpack_from(payload, HEADER.size))
        return out

    def nothing_arrives(self, seconds: float = 0.5) -> bool:
        self.sock.settimeout(seconds)
        try:
            self.sock.recv(2048)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(5)
        return False


def join_all(
    stub: pb_grpc.JobServiceStub,
    name: str,
    workers: list[Worker],
    credential: str = CREDENTIAL,
    token: str = "",
) -> list[pb.JobDescription]:
    """Every rank calls JoinJob at once (as separate workers would), presenting the job's credential;
    returns their answers by rank."""
    answers: list[pb.JobDescription | Exception | None] = [None] * len(workers)

    def join(w: Worker) -> None:
        request = pb.JoinJobRequest(name=name, rank=w.rank, world_size=len(workers), address=w.address(),
                                    timeout_seconds=10)  # fmt: skip
        try:
            answers[w.rank] = stub.JoinJob(request, timeout=15, metadata=call_metadata(token, credential))
        except Exception as exc:  # reported below, in the test's thread
            answers[w.rank] = exc

    threads = [threading.Thread(target=join, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    for answer in answers:
        if not isinstance(answer, pb.JobDescription):
            raise AssertionError(f"JoinJob failed: {answer}")
    for w in workers:
        w.key = answers[w.rank].key  # type: ignore[union-attr]
    return answers  # type: ignore[return-value]


def read_keys(switch: Switch, table: str) -> list[tuple[int, ...]]:
    """The exact-match keys of every entry of `table`, read with a plain P4Runtime Read (no arbitration)."""
    schema = fy.P4Schema(switch.artifacts.p4info)
    info = schema.tables[table]
    request = p4r.ReadRequest(
        device_id=1, entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=info.id))]
    )
    keys = []
    with grpc.insecure_channel(switch.address) as channel:
        for reply in p4r_grpc.P4RuntimeStub(channel).Read(request, timeout=10):
            for entity in reply.entities:
                fields = sorted(entity.table_entry.match, key=lambda m: m.field_id)
                keys.append(tuple(int.from_bytes(m.exact.value, "big") for m in fields))
    return sorted(keys)


def read_entries(switch: Switch, table: str) -> list[tuple[int, int]]:
    """(first exact key, first action parameter) of every entry of `table`: e.g. l2_forward's MAC -> port."""
    schema = fy.P4Schema(switch.artifacts.p4info)
    request = p4r.ReadRequest(
        device_id=1, entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=schema.tables[table].id))]
    )
    entries = []
    with grpc.insecure_channel(switch.address) as channel:
        for reply in p4r_grpc.P4RuntimeStub(channel).Read(request, timeout=10):
            for entity in reply.entities:
                key = min(entity.table_entry.match, key=lambda m: m.field_id).exact.value
                param = entity.table_entry.action.action.params[0].value
                entries.append((int.from_bytes(key, "big"), int.from_bytes(param, "big")))
    return sorted(entries)


def read_groups(switch: Switch) -> dict[int, list[tuple[int, int]]]:
    entry = p4r.PacketReplicationEngineEntry(multicast_group_entry=p4r.MulticastGroupEntry())
    request = p4r.ReadRequest(device_id=1, entities=[p4r.Entity(packet_replication_engine_entry=entry)])
    groups = {}
    with grpc.insecure_channel(switch.address) as channel:
        for reply in p4r_grpc.P4RuntimeStub(channel).Read(request, timeout=10):
            for entity in reply.entities:
                group = entity.packet_replication_engine_entry.multicast_group_entry
                groups[group.multicast_group_id] = sorted(
                    (int.from_bytes(r.port, "big") if r.port else r.egress_port, r.instance)
                    for r in group.replicas
                )
    return groups


def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


class _Presenting(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds metadata (a token, a credential) to every call that does not bring its own."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self.metadata = metadata

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        if details.metadata:
            return details
        return details._replace(metadata=self.metadata)  # type: ignore[attr-defined]

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), request)


@contextlib.contextmanager
def channel_to(
    daemon: Daemon, credential: str = CREDENTIAL, token: str = ""
) -> Iterator[pb_grpc.JobServiceStub]:
    """A stub whose calls present `credential` (and `token`) unless they carry metadata of their own."""
    with grpc.insecure_channel(daemon.listen) as channel:
        presenting = grpc.intercept_channel(channel, _Presenting(call_metadata(token, credential)))
        yield pb_grpc.JobServiceStub(presenting)
