"""A Mininet network of N workers around P4 switches, driven one all-reduce at a time.

`Cluster` builds the lab's network for a topology (mininet/lab.py: hosts,
the switches, links optionally limited with htb, the controller
provisioning the switches over P4Runtime, one job joined for every host;
in a fabric of several switches, aggregated by a tree of them or at one
switch, --aggregate-at as in the lab), starts one agent per host
(experiments/agent.py: a p4reduce communicator and, if asked, a Gloo
process group over the same links) and then runs steps. A step sends the
same order to every agent at once and is bracketed by two readings of
every switch port's counters and of the switch processes' CPU time, so
each result carries the bytes each worker put on and took off the wire,
what crossed every switch port (`last_ports`) and how busy the switches
were. `StarCluster` is the star of N workers around one switch that most
experiments use. Needs root and Debian's mininet, like the lab.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self

import grpc
from mininet.log import setLogLevel

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.jobapi_metadata import call_metadata
from experiments.step import Step
from hostlib import JobSpec
from hostlib.launch import ROOT, LaunchError, build_program, free_port, start_controller, worker_arguments
from hostlib.verify import ITEMSIZE

sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts, not a package)

from lab import (  # noqa: E402
    LINK_BURST_KB,
    WORKER_PORT,
    build_bmv2,
    build_network,
    check_running,
    configure_hosts,
    heartbeat,
    join_all,
    link_mtu,
    new_credential,
    program_values_per_packet,
    record_network,
    stop_network,
)
from lab_config import TREE, aggregation_choice, controller_config, provision_fabric  # noqa: E402
from lab_state import LabState  # noqa: E402
from topology import Topology, generate  # noqa: E402

GLOO_PORT = 29500
SYSTEMS = ("p4reduce", "gloo")


class ExperimentError(RuntimeError):
    """A step could not be run (an agent died or stalled); the message carries the tail of its log."""


@dataclass
class _Agent:
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


class MininetRun:
    """A Mininet network, the controller over it, and this run's record of both (.lab-state.json).

    Entering starts them (`_start`, the subclass's); leaving tears them down, also when starting fails
    half way, so that an interrupted run leaves nothing for `make stop` beyond what it recorded.
    """

    def __init__(self) -> None:
        self._controller: subprocess.Popen[bytes] | None = None
        self.net = None
        self._state = LabState()

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self._controller is not None:
            self._controller.terminate()
            self._controller.wait(timeout=10)
            self._controller = None
        if self.net is not None:
            stop_network(self.net)
            self.net = None
        self._state.done()


class Cluster(MininetRun):
    def __init__(
        self,
        topo: Topology,
        *,
        aggregate_at: str = TREE,
        switch_link_bw: float | None = None,
        switch_link_loss: float = 0.0,
        switch: str = "soft",
        bw: float | None = None,
        drop_rate: float = 0.0,
        queue: int | None = None,
        burst: int | None = None,
        gloo: bool = True,
        pool_size: int = 64,
        logs: Path = ROOT / "logs" / "experiments",
        step_timeout: float = 900.0,
        switch_log: str = "off",
        values_per_packet: int | None = None,
        ecn_ms: float = 0.0,
        pcaps: Path | None = None,
    ) -> None:
        if os.geteuid() != 0:
            raise ExperimentError("experiments run in Mininet, which needs root: use sudo")
        self.topo, self.workers = topo, len(topo.hosts)
        self.aggregate_at = aggregation_choice(topo, aggregate_at)  # `root` -> the switch's name
        self.switch_link_bw, self.switch_link_loss = switch_link_bw, switch_link_loss
        self.switch_kind, self.bw, self.drop_rate = switch, bw, drop_rate
        self.queue, self.burst = queue, LINK_BURST_KB if burst is None else burst
        self.ecn_ms = ecn_ms  # > 0: limited links mark CE above this many ms of queue (mininet/lab_ecn.py)
        self.switch_log = switch_log  # off: bmv2's trace log would cost it a factor of 1.6 (docs/lab.md)
        self.gloo, self.pool_size, self.logs, self.step_timeout = gloo, pool_size, logs, step_timeout
        self.pcaps = pcaps  # DIR/<switch>/<port>_{in,out}.pcap; None: none (a run moves hundreds of MB)
        # the K asked for (None: the program's own); once started, the K the program has (its P4Info)
        self.values_per_packet = values_per_packet
        self.link_mtu = 0  # once started: the links' MTU, which follows that K (link_mtu)
        self.last_ports: dict[str, tuple[int, int]] = {}  # the last step's (rx, tx) bytes per switch port
        self._agents: list[_Agent] = []
        self._stop = threading.Event()
        super().__init__()

    # ----------------------------------------------------------- life cycle
    def _start(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)  # `kill` must still tear Mininet down
        setLogLevel("warning")
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.switch_kind == "bmv2":
            program, p4info = build_bmv2()
        else:
            program, p4info = build_program(ROOT / "build", self.values_per_packet)
        self.values_per_packet = program_values_per_packet(p4info)  # the reports' wire efficiency uses it
        self.link_mtu = link_mtu(self.values_per_packet)
        grpc_ports = {s.name: free_port() for s in self.topo.switches}
        config = self.logs / "controller.yaml"
        config.write_text(
            controller_config(
                self.topo, grpc_ports, program, p4info, self.pool_size, self.switch_kind, self.aggregate_at
            )
        )
        self.net = net = build_network(
            self.topo,
            self.switch_kind,
            grpc_ports,
            self.bw,
            self.drop_rate,
            self.drop_rate,
            self.queue,
            switch_log=self.switch_log,
            burst=self.burst,
            values_per_packet=self.values_per_packet,
            switch_link_bw=self.switch_link_bw,
            switch_link_loss=self.switch_link_loss,
            ecn_ms=self.ecn_ms,
        )
        for switch in net.switches:
            switch.log_dir, switch.pcap_dir = self.logs, self.pcaps
        net.start()
        record_network(self._state, net)
        configure_hosts(net, self.topo)
        if len(self.topo.switches) > 1:
            provision_fabric(config, self.topo)
        job_port = free_port()
        self._controller = start_controller(config, job_port, self.logs / "controller.log")
        self._state.add([self._controller.pid])
        check_running(net, self._controller, self.logs / "controller.log")
        controller = f"127.0.0.1:{job_port}"
        # The first round may lose a ping (docs/lab.md); under injected loss some always do.
        tolerated = 0.0 if not (self.drop_rate or self.switch_link_loss) else 50.0
        for _ in range(3):
            if (dropped := net.pingAll(timeout=1)) <= tolerated:
                break
        else:
            raise ExperimentError(f"hosts cannot reach each other ({dropped:.0f}% of pings lost)")
        credential = new_credential()
        descs = join_all(controller, self.topo, credential)
        threading.Thread(
            target=heartbeat, args=(controller, self.workers, 60.0, self._stop, credential), daemon=True
        ).start()
        first = self.topo.hosts[0].ipv4
        for rank, host in enumerate(self.topo.hosts):
            job = JobSpec.from_description(descs[rank])
            command = [
                sys.executable,
                "-m",
                "experiments.agent",
                *worker_arguments(job, rank, (host.ipv4, WORKER_PORT + rank)),
            ]
            if self.gloo:
                command.append(f"--gloo={first}:{GLOO_PORT}")
            env = dict(os.environ, PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME=f"{host.name}-eth0")
            log_path = self.logs / f"agent-{host.name}.log"
            log = open(log_path, "wb")  # noqa: SIM115 (closed in close())
            process = net.get(host.name).popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT
            )
            self._agents.append(_Agent(process, log, log_path))
        for agent in self._agents:
            self._read(agent, 180.0)  # {"ready": true}

    def close(self) -> None:
        for agent in self._agents:
            if agent.process.stdin:
                agent.process.stdin.close()
        for agent in self._agents:
            try:
                agent.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                agent.process.kill()
            agent.log.close()
        self._agents.clear()
        self._stop.set()
        super().close()

    # ----------------------------------------------------------------- steps
    def run(self, system: str, elements: int, dtype: str = "float32", iteration: int = 0) -> Step:
        """One all-reduce of `elements` by every worker at once; the switch's view of it."""
        if system not in SYSTEMS or (system == "gloo" and not self.gloo):
            raise ValueError(f"system {system!r} is not available in this cluster")
        order = json.dumps(
            {"system": system, "elements": elements, "dtype": dtype, "iteration": iteration}
        ).encode()
        ports_before = self._all_ports()
        before, cpu_before, wall_before = self._port_counters(), self._switch_cpu(), time.monotonic()
        for agent in self._agents:
            assert agent.process.stdin is not None
            agent.process.stdin.write(order + b"\n")
            agent.process.stdin.flush()
        replies = [self._read(agent, self.step_timeout) for agent in self._agents]
        wall = time.monotonic() - wall_before
        after, cpu = self._port_counters(), self._switch_cpu() - cpu_before
        ports_after = self._all_ports()
        self.last_ports = {
            name: (rx - ports_before[name][0], tx - ports_before[name][1])
            for name, (rx, tx) in ports_after.items()
        }
        delta = [[a - b for a, b in zip(x, y)] for x, y in zip(after, before)]
        return Step(
            system=system,
            workers=self.workers,
            elements=elements,
            dtype=dtype,
            iteration=iteration,
            tensor_bytes=elements * ITEMSIZE[dtype],
            seconds=max(r["seconds"] for r in replies),
            ok=all(r["ok"] for r in replies),
            retransmissions=sum(r.get("retransmissions", 0) for r in replies),
            queries=sum(r.get("queries", 0) for r in replies),
            up_bytes=sum(d[0] for d in delta) / self.workers,
            down_bytes=sum(d[1] for d in delta) / self.workers,
            switch_packets=sum(d[2] for d in delta),
            switch_cpu=cpu / wall if wall else 0.0,
            error="; ".join(sorted({r["error"] for r in replies if r.get("error")})),
        )

    def _read(self, agent: _Agent, timeout: float) -> dict:
        assert agent.process.stdout is not None
        ready, _, _ = select.select([agent.process.stdout], [], [], timeout)
        line = agent.process.stdout.readline() if ready else b""
        if not line:
            state = "exited" if agent.process.poll() is not None else f"stalled for {timeout:.0f} s"
            agent.log.flush()
            tail = "\n".join(agent.log_path.read_text(errors="replace").splitlines()[-15:])
            raise ExperimentError(f"agent {agent.log_path.stem} {state}:\n{tail}")
        return json.loads(line)

    def _port_counters(self) -> list[tuple[int, int, int]]:
        """(rx bytes, tx bytes, rx packets) of the switch port facing each worker, from the kernel."""
        readings = []
        for host in self.topo.hosts:
            stats = Path(f"/sys/class/net/{host.switch}-eth{host.port}/statistics")
            readings.append(
                tuple(int((stats / name).read_text()) for name in ("rx_bytes", "tx_bytes", "rx_packets"))
            )
        return readings  # type: ignore[return-value]

    def _all_ports(self) -> dict[str, tuple[int, int]]:
        """(rx bytes, tx bytes) of every switch port, by interface name (`spine-eth1`), from the kernel.

        rx is what the switch received on the port, tx what it sent: for a
        spine link, the spine port's rx is the leaf's traffic up, its tx the
        traffic down. A frame a lossy link drops is dropped by the switch that
        would send it, before the kernel counts it as sent (tx) or received (rx).
        """
        readings = {}
        for switch in self.topo.switches:
            for port in self.topo.ports(switch.name):
                stats = Path(f"/sys/class/net/{switch.name}-eth{port}/statistics")
                rx, tx = (int((stats / name).read_text()) for name in ("rx_bytes", "tx_bytes"))
                readings[f"{switch.name}-eth{port}"] = (rx, tx)
        return readings

    def _switch_cpu(self) -> float:
        """CPU seconds (user + system, all threads) the switch processes have used so far, together."""
        assert self.net is not None
        total = 0.0
        for switch in self.topo.switches:
            process = self.net.get(switch.name).process
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


class StarCluster(Cluster):
    """N workers on one switch: the star most experiments measure."""

    def __init__(self, workers: int, **options: Any) -> None:
        super().__init__(generate("star", workers), **options)


def join_job(
    controller: str, name: str, members: list[tuple[str, int]], credential: str
) -> list[pb.JobDescription]:
    """JoinJob for every member (IP, UDP port) of job `name` at once; each rank's reply (its own key).

    The lab's join_all joins its one job for every host of the topology; experiments that place
    several jobs on chosen hosts, or several ranks on one host, name the members themselves.
    """
    replies: dict[int, pb.JobDescription] = {}
    errors: list[str] = []
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)

        def join(rank: int, ip: str, port: int) -> None:
            request = pb.JoinJobRequest(name=name, rank=rank, world_size=len(members), timeout_seconds=30,
                                        address=pb.WorkerAddress(ipv4=ip, udp_port=port))  # fmt: skip
            try:
                metadata = call_metadata(credential=credential)
                replies[rank] = stub.JoinJob(request, timeout=40, metadata=metadata)
            except grpc.RpcError as error:
                errors.append(f"{name} rank {rank}: {error.details()}")

        with ThreadPoolExecutor(len(members)) as pool:  # the rendezvous holds every JoinJob until all came
            list(pool.map(join, range(len(members)), *zip(*members)))
    if errors:
        raise ExperimentError("JoinJob failed: " + "; ".join(errors))
    return [replies[rank] for rank in range(len(members))]


def keep_alive(controller: str, jobs: list[tuple[str, int]], stop: threading.Event, credential: str) -> None:
    """Heartbeat every rank of every (job, world size) until `stop` is set: ranks on the static path
    (a description from the runner's JoinJob) do not heartbeat themselves."""
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        while not stop.wait(20.0):
            for name, world in jobs:
                for rank in range(world):
                    try:
                        request = pb.HeartbeatRequest(name=name, rank=rank)
                        stub.Heartbeat(request, timeout=5, metadata=call_metadata(credential=credential))
                    except grpc.RpcError:
                        pass


def start_agent(net: object, host: str, job: JobSpec, rank: int, bind: tuple[str, int], logs: Path,
                env: dict[str, str] | None = None) -> _Agent:  # fmt: skip
    """One p4reduce agent (no Gloo) in Mininet host `host`, for `rank` of `job`, bound to `bind`."""
    command = [sys.executable, "-m", "experiments.agent", *worker_arguments(job, rank, bind)]
    log_path = logs / f"agent-{host}-{bind[1]}.log"
    log = open(log_path, "wb")  # noqa: SIM115 (closed by stop_agents)
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    process = net.get(host).popen(  # type: ignore[attr-defined]
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=full_env, cwd=ROOT
    )
    return _Agent(process, log, log_path)


def stop_agents(agents: list[_Agent]) -> None:
    """End of input ends an agent; one that does not go within 20 s is killed."""
    for agent in agents:
        if agent.process.stdin:
            agent.process.stdin.close()
    for agent in agents:
        try:
            agent.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            agent.process.kill()
        agent.log.close()


def read_reply(agent: _Agent, timeout: float) -> dict:
    """The agent's next answer; ExperimentError with the end of its log if it exited or stalled."""
    assert agent.process.stdout is not None
    ready, _, _ = select.select([agent.process.stdout], [], [], timeout)
    line = agent.process.stdout.readline() if ready else b""
    if not line:
        state = "exited" if agent.process.poll() is not None else f"stalled for {timeout:.0f} s"
        agent.log.flush()
        tail = "\n".join(agent.log_path.read_text(errors="replace").splitlines()[-15:])
        raise ExperimentError(f"agent {agent.log_path.stem} {state}:\n{tail}")
    return json.loads(line)


def order(agent: _Agent, message: dict) -> None:
    """Send the agent one order (a line of JSON on its stdin)."""
    assert agent.process.stdin is not None
    agent.process.stdin.write(json.dumps(message).encode() + b"\n")
    agent.process.stdin.flush()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


__all__ = [
    "Cluster", "ExperimentError", "LaunchError", "MininetRun", "StarCluster", "Step", "SYSTEMS", "join_job",
    "keep_alive", "order", "read_reply", "start_agent", "stop_agents",
]  # fmt: skip
