"""Two p4reduce jobs and one TCP flow on one bottleneck link, with congestion control on and then off.

A Mininet star, every link limited to --bw with the lab's ECN-marking
queues (docs/lab.md, *ECN-marking links*):

    h1  rank 0 of job A, rank 0 of job B, and the iperf3 server
    h2  rank 1 of job A        h3  rank 1 of job B        h4  the iperf3 client (TCP with ECN)

The TCP flow's congestion control is named (--tcp, cubic by default), not
left to the machine: a kernel whose default is BBR (v1) sends one that
ignores CE marks, and the share then measures BBR, not p4reduce.

The switch's port towards h1 carries both jobs' RESULTs and the TCP data:
that link is the one bottleneck, and the three flows share it. Each job
all-reduces float32 tensors back to back for --duration seconds while
iperf3 sends over the same time; every result is verified. The same run
is made twice on the same network: with congestion control on (ranks send
ECT(0) and answer CE and loss with their AIMD window) and off
(P4REDUCE_CONGESTION_CONTROL=0: Not-ECT, the whole window at once).
Reported per phase: each job's goodput and the flow's, Jain's fairness
index over the three, the bottleneck's utilization and the DATA resent.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mininet.log import setLogLevel

from experiments.cluster import (
    ExperimentError,
    LaunchError,
    MininetRun,
    _Agent,
    join_job,
    keep_alive,
    order,
    read_reply,
    start_agent,
    stop_agents,
)
from experiments.report import Report, add_link_arguments, figure, human, parser, progress
from experiments.step import Step
from hostlib import JobSpec
from hostlib.launch import ROOT, build_program, free_port, start_controller

sys.path.insert(0, str(ROOT / "mininet"))

from lab import (  # noqa: E402
    LINK_BURST_KB,
    build_network,
    check_running,
    configure_hosts,
    controller_config,
    new_credential,
    program_values_per_packet,
    record_network,
)
from lab_ecn import DEFAULT_MARK_MS, threshold_bytes  # noqa: E402
from topology import generate  # noqa: E402

JOBS = {"A": ("h1", "h2"), "B": ("h1", "h3")}  # job -> (host of rank 0, host of rank 1)
BASE_PORT = {"A": 40000, "B": 40100}
TCP_SERVER, TCP_CLIENT, TCP_PORT = "h1", "h4", 5201
BOTTLENECK = "h1"  # the switch's port towards it carries all three flows
FULL_SECONDS, QUICK_SECONDS = 60.0, 5.0
FULL_BYTES, QUICK_BYTES = 256 << 10, 32 << 10
COUNTS = (
    "packets_sent",
    "queries",
    "retransmissions",
    "ce_marks",
    "window_decreases",
)  # engine stats, per step


def jain(rates: list[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one takes everything."""
    total = sum(rates)
    squares = sum(r * r for r in rates)
    return total * total / (len(rates) * squares) if squares else 0.0


@dataclass
class Phase:
    """What one run of the three flows measured."""

    congestion_control: bool
    seconds: float = 0.0  # the window the three flows shared
    job_bytes: dict[str, int] = field(default_factory=dict)  # verified tensor bytes per rank, per job
    job_seconds: dict[str, float] = field(default_factory=dict)  # from a job's first order to its last reply
    tcp_bytes: int = 0  # bytes iperf3's server received within the window
    tcp_seconds: float = 0.0
    bottleneck_bytes: int = 0  # bytes the switch's port towards h1 sent within the window
    steps: list[tuple[str, Step, dict[str, int]]] = field(default_factory=list)  # (job, step, engine counts)

    def goodput(self, flow: str) -> float:
        if flow == "TCP":
            return self.tcp_bytes / self.tcp_seconds if self.tcp_seconds else 0.0
        return self.job_bytes.get(flow, 0) / self.job_seconds[flow] if self.job_seconds.get(flow) else 0.0

    def total(self, counter: str) -> int:
        return sum(counts[counter] for _, _, counts in self.steps)

    @property
    def resent(self) -> float:
        """DATA sent again over DATA sent (packets sent less queries), both jobs, every rank."""
        data = self.total("packets_sent") - self.total("queries")
        return self.total("retransmissions") / data if data else 0.0


class Bottleneck(MininetRun):
    """The star, its controller and ECN-marking links; phases run on it one after the other."""

    def __init__(
        self, bw: float, queue: int, burst: int | None, ecn_ms: float, pool: int, logs: Path, tcp: str
    ) -> None:
        self.bw, self.queue, self.ecn_ms, self.pool, self.logs = bw, queue, ecn_ms, pool, logs
        self.tcp = tcp  # the TCP flow's congestion control (iperf3 -C)
        self.burst = LINK_BURST_KB if burst is None else burst
        self.topo = generate("star", 4)
        self.controller = ""
        super().__init__()

    def _start(self) -> None:
        setLogLevel("warning")
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # tear Mininet down
        self.logs.mkdir(parents=True, exist_ok=True)
        program, p4info = build_program(ROOT / "build", None)
        grpc_ports = {s.name: free_port() for s in self.topo.switches}
        config = self.logs / "controller.yaml"
        config.write_text(controller_config(self.topo, grpc_ports, program, p4info, self.pool))
        # links of the MTU the program's DATA needs: its K is the embedded switch's default (P4Info)
        self.net = net = build_network(self.topo, "soft", grpc_ports, self.bw, 0.0, 0.0, self.queue,
                                       switch_log="off", burst=self.burst, ecn_ms=self.ecn_ms,
                                       values_per_packet=program_values_per_packet(p4info))  # fmt: skip
        for switch in net.switches:
            switch.log_dir, switch.pcap_dir = self.logs, None
        net.start()
        record_network(self._state, net)
        configure_hosts(net, self.topo)
        for host in (TCP_SERVER, TCP_CLIENT):  # TCP answers CE as p4reduce does (RFC 3168)
            net.get(host).cmd("sysctl -qw net.ipv4.tcp_ecn=1")
        job_port = free_port()
        self._controller = start_controller(config, job_port, self.logs / "controller.log")
        self._state.add([self._controller.pid])
        check_running(net, self._controller, self.logs / "controller.log")
        self.controller = f"127.0.0.1:{job_port}"
        for _ in range(3):  # the first round may lose a ping (docs/lab.md)
            if (dropped := net.pingAll(timeout=1)) == 0:
                break
        else:
            raise ExperimentError(f"hosts cannot reach each other ({dropped:.0f}% of pings lost)")

    def _tx_bytes(self, host: str) -> int:
        agg = self.topo.aggregator.name
        port = self.topo.port_towards(agg, next(h for h in self.topo.hosts if h.name == host))
        return int(Path(f"/sys/class/net/{agg}-eth{port}/statistics/tx_bytes").read_text())

    def _rx_bytes(self, host: str) -> int:
        agg = self.topo.aggregator.name
        port = self.topo.port_towards(agg, next(h for h in self.topo.hosts if h.name == host))
        return int(Path(f"/sys/class/net/{agg}-eth{port}/statistics/rx_bytes").read_text())

    def run(self, congestion_control: bool, seconds: float, elements: int) -> Phase:
        """Both jobs and the TCP flow for `seconds`, from the same start."""
        assert self.net is not None
        tag = "on" if congestion_control else "off"
        credential = new_credential()
        ips = {h.name: h.ipv4 for h in self.topo.hosts}
        members = {j: [(ips[h], BASE_PORT[j] + r) for r, h in enumerate(hosts)] for j, hosts in JOBS.items()}
        descs: dict[str, list] = {}
        joiners = [
            threading.Thread(target=lambda j=j: descs.__setitem__(j, join_job(self.controller, f"{j}-{tag}",
                                                                             members[j], credential)))
            for j in JOBS
        ]  # fmt: skip
        for thread in joiners:
            thread.start()
        for thread in joiners:
            thread.join()
        if set(descs) != set(JOBS):
            raise ExperimentError(f"the jobs of phase {tag} could not be joined (see controller.log)")
        stop = threading.Event()
        threading.Thread(
            target=keep_alive,
            args=(self.controller, [(f"{j}-{tag}", 2) for j in JOBS], stop, credential),
            daemon=True,
        ).start()
        env = {"P4REDUCE_CONGESTION_CONTROL": "1" if congestion_control else "0"}
        agents = {
            j: [self._agent(h, descs[j][r], r, members[j][r], env, tag) for r, h in enumerate(hosts)]
            for j, hosts in JOBS.items()
        }
        server = client = None
        try:
            for job_agents in agents.values():
                for agent in job_agents:
                    read_reply(agent, 180.0)  # {"ready": true}
            phase = Phase(congestion_control)
            server = self.net.get(TCP_SERVER).popen(
                ["iperf3", "-s", "-1", "-J", "-p", str(TCP_PORT)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            time.sleep(0.5)
            # iperf3 runs a little longer than the jobs: its share is taken from its first `seconds`
            client = self.net.get(TCP_CLIENT).popen(
                ["iperf3", "-c", ips[TCP_SERVER], "-p", str(TCP_PORT), "-C", self.tcp,
                 "-t", str(int(seconds) + 3), "-i", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            before, started = self._tx_bytes(BOTTLENECK), time.monotonic()
            errors: list[BaseException] = []
            deadline = started + seconds
            drivers = [
                threading.Thread(target=self._drive, args=(j, agents[j], deadline, elements, phase, errors))
                for j in JOBS
            ]
            for thread in drivers:
                thread.start()
            time.sleep(max(0.0, started + seconds / 2 - time.monotonic()))
            self._snapshot(tag, ips[TCP_SERVER])
            time.sleep(max(0.0, started + seconds - time.monotonic()))
            phase.bottleneck_bytes, phase.seconds = self._tx_bytes(BOTTLENECK) - before, seconds
            for thread in drivers:
                thread.join()
            if errors:
                raise errors[0]
            out, err = server.communicate(timeout=seconds + 60)
            client.wait(timeout=30)
            phase.tcp_bytes, phase.tcp_seconds = tcp_received(out.decode(), seconds)
            if not phase.tcp_seconds:
                raise ExperimentError(f"iperf3 reported nothing: {err.decode().strip()[-300:]}")
            return phase
        finally:
            for process in (client, server):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
            stop_agents([a for job_agents in agents.values() for a in job_agents])
            stop.set()

    def _snapshot(self, tag: str, server: str) -> None:
        """Mid-phase, into the logs: the TCP sender's state (`ss -tin`: its congestion control, window, round
        trip, CE-marked deliveries) and the bottleneck's real queue, sampled every 30 ms for 0.6 s (the
        marker's queue is a model of it: docs/lab.md, *ECN-marking links*). What explains a share."""
        assert self.net is not None
        agg = self.topo.aggregator.name
        port = self.topo.port_towards(agg, next(h for h in self.topo.hosts if h.name == BOTTLENECK))
        tcp = self.net.get(TCP_CLIENT).cmd(f"ss -tin dst {server}")
        backlog = []
        for _ in range(20):
            shown = subprocess.run(["tc", "-s", "qdisc", "show", "dev", f"{agg}-eth{port}", "parent", "5:1"],
                                   capture_output=True, text=True, check=False).stdout  # fmt: skip
            backlog += [int(b) for b in re.findall(r"backlog (\d+)b", shown)[:1]]
            time.sleep(0.03)
        threshold = threshold_bytes(self.bw, self.ecn_ms) if self.ecn_ms else 0
        (self.logs / f"cc-{tag}" / "mid-phase.txt").write_text(
            f"$ ss -tin (on {TCP_CLIENT})\n{tcp}\n"
            f"bottleneck queue (towards {BOTTLENECK}), bytes, sorted: {sorted(backlog)}\n"
            f"marker threshold: {threshold} bytes\n"
        )

    def _agent(
        self, host: str, desc: object, rank: int, bind: tuple[str, int], env: dict[str, str], tag: str
    ) -> _Agent:
        """One agent; its log goes to a folder per phase (cc-on/, cc-off/), so the second keeps the first."""
        assert self.net is not None
        logs = self.logs / f"cc-{tag}"
        logs.mkdir(exist_ok=True)
        return start_agent(self.net, host, JobSpec.from_description(desc), rank, bind, logs, env)

    def _drive(
        self, job: str, agents: list[_Agent], deadline: float, elements: int, phase: Phase, errors: list
    ) -> None:
        """All-reduces back to back until `deadline`; the job's bytes and time go into `phase`."""
        iteration, started, done = 0, time.monotonic(), 0
        own = JOBS[job][1]  # rank 1's host carries this job only: its port counts this job's bytes
        try:
            while time.monotonic() < deadline:
                up, down, wall = self._rx_bytes(own), self._tx_bytes(own), time.monotonic()
                for agent in agents:
                    order(agent, {"system": "p4reduce", "elements": elements, "dtype": "float32",
                                  "iteration": iteration})  # fmt: skip
                replies = [read_reply(agent, 300.0) for agent in agents]
                seconds = time.monotonic() - wall
                ok = all(r["ok"] for r in replies)
                step = Step(
                    system="p4reduce", workers=len(agents), elements=elements, dtype="float32",
                    iteration=iteration, tensor_bytes=4 * elements, seconds=seconds, ok=ok,
                    retransmissions=sum(r.get("retransmissions", 0) for r in replies),
                    queries=sum(r.get("queries", 0) for r in replies),
                    up_bytes=self._rx_bytes(own) - up, down_bytes=self._tx_bytes(own) - down,
                    switch_packets=0, switch_cpu=0.0,
                    error="; ".join(sorted({r["error"] for r in replies if r.get("error")})),
                )  # fmt: skip
                counts = {k: sum(r.get(k, 0) for r in replies) for k in COUNTS}
                phase.steps.append((job, step, counts))
                done += 4 * elements if ok else 0
                iteration += 1
        except BaseException as error:  # the runner re-raises it
            errors.append(error)
        phase.job_bytes[job], phase.job_seconds[job] = done, time.monotonic() - started


def tcp_received(report: str, seconds: float) -> tuple[int, float]:
    """Bytes iperf3's server received in its intervals that end within `seconds` (+ half an interval)."""
    try:
        intervals = json.loads(report)["intervals"]
    except (json.JSONDecodeError, KeyError):
        return 0, 0.0
    counted = [i["sum"] for i in intervals if i["sum"]["end"] <= seconds + 0.25]
    if not counted:
        return 0, 0.0
    return sum(int(i["bytes"]) for i in counted), float(counted[-1]["end"])


def main(argv: list[str] | None = None) -> int:
    p = parser("fairness", __doc__.splitlines()[0])
    add_link_arguments(p, 10.0)
    p.add_argument(
        "--ecn-ms",
        type=float,
        default=DEFAULT_MARK_MS,
        help=f"links mark CE above this queue delay (default {DEFAULT_MARK_MS:g}; 0: tail drop only)",
    )
    p.add_argument("--duration", type=float, help=f"seconds per phase (default {FULL_SECONDS:g}; --quick: 5)")
    p.add_argument("--bytes", type=int, help=f"tensor bytes (default {human(FULL_BYTES)}; --quick: 32 KB)")
    p.add_argument(
        "--tcp",
        default="cubic",
        help="the TCP flow's congestion control (default cubic, Debian's and Linux's usual default, which "
        "answers ECN as RFC 3168 says; bbr ignores CE and takes its estimate of the link whatever the marks)",
    )
    p.set_defaults(pool=256)  # the library's default: a job's window without congestion control
    args = p.parse_args(argv)
    if shutil.which("iperf3") is None:
        p.error("the TCP flow is iperf3's: apt-get install iperf3 (`make install` as root installs it)")
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if args.tcp not in available:
        p.error(f"--tcp {args.tcp}: this kernel's TCP congestion controls are {', '.join(available)}")
    seconds = args.duration or (QUICK_SECONDS if args.quick else FULL_SECONDS)
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    report = Report("fairness", args.out)
    phases: list[Phase] = []
    try:
        with (
            Bottleneck(args.bw, args.queue, args.burst, args.ecn_ms, args.pool, args.logs, args.tcp) as link,
            progress(2, f"fairness, {seconds:g} s per phase, {args.bw:g} Mbit/s") as advance,
        ):
            for congestion_control in (True, False):
                phases.append(link.run(congestion_control, seconds, size // 4))
                for job, step, counts in phases[-1].steps:
                    report.add(
                        step, congestion_control=congestion_control, job=job, bw_mbit=args.bw, **counts
                    )
                advance()
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    flows = ("A", "B", "TCP")
    link_rate = args.bw * 1e6 / 8
    write_flows(args.out / "fairness-flows.csv", phases, flows, link_rate)
    report.table(
        f"two p4reduce jobs and one TCP flow (iperf3, {args.tcp} with ECN) on one {args.bw:g} Mbit/s link,"
        f" {seconds:g} s each,"
        f" {human(size)} float32 all-reduces, {args.pool} slots, "
        + (f"links mark CE above {args.ecn_ms:g} ms" if args.ecn_ms else "tail drop only (--ecn-ms 0)"),
        [
            "congestion control",
            "job A MB/s",
            "job B MB/s",
            "TCP MB/s",
            "Jain's index",
            "bottleneck busy",
            "DATA resent",
            "CE marks",
            "window decreases",
        ],  # fmt: skip
        [
            [
                "on" if ph.congestion_control else "off",
                *(f"{ph.goodput(f) / 1e6:.3f}" for f in flows),
                f"{jain([ph.goodput(f) for f in flows]):.2f}",
                f"{ph.bottleneck_bytes / ph.seconds / link_rate:.0%}",
                f"{ph.resent:.2%}",
                str(ph.total("ce_marks")),
                str(ph.total("window_decreases")),
            ]
            for ph in phases
        ],
    )
    for ph in phases:
        state = "on" if ph.congestion_control else "off"
        index = jain([ph.goodput(f) for f in flows])
        report.note(f"Jain's fairness index (congestion control {state}): {index:.2f}")
    report.note(
        "goodput: a job's verified tensor bytes per rank per second of its all-reduces; TCP: bytes iperf3's "
        f"server received in the first {seconds:g} s. Jain's index over the three; an equal share of the "
        f"link is {link_rate / 3 / 1e6:.3f} MB/s of frames, less each flow's headers. bottleneck busy: bytes "
        "the switch sent towards h1 (both jobs' RESULTs and the TCP data) over the link rate. DATA resent: "
        "over DATA sent (packets sent less queries), both jobs, every rank."
    )

    fig, (shares, extra) = figure(2, f"two jobs and a TCP flow on one {args.bw:g} Mbit/s link")
    width = 0.38
    for index, ph in enumerate(phases):
        label = "congestion control " + ("on" if ph.congestion_control else "off")
        xs = [i + (index - 0.5) * width for i in range(len(flows))]
        shares.bar(xs, [ph.goodput(f) / 1e6 for f in flows], width, label=label, color=f"C{index}")
    shares.axhline(link_rate / 3 / 1e6, color="gray", linestyle=":", label="a third of the link")
    shares.set(xticks=range(len(flows)), xticklabels=["job A", "job B", "TCP"], ylabel="goodput (MB/s)")
    names = [f"cc {'on' if ph.congestion_control else 'off'}" for ph in phases]
    indices = [jain([ph.goodput(f) for f in flows]) for ph in phases]
    extra.bar(names, indices, color=["C0", "C1"][: len(phases)])
    extra.set(ylabel="Jain's fairness index", ylim=(0, 1.05))
    for axes in (shares, extra):
        axes.grid(alpha=0.3, axis="y")
    shares.legend(fontsize=7)
    return 0 if report.save(fig) else 1


def write_flows(path: Path, phases: list[Phase], flows: tuple[str, ...], link_rate: float) -> None:
    """One row per phase and flow: the figures of the summary, for plotting elsewhere."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["congestion_control", "flow", "goodput", "jain", "bottleneck_utilization",
                         "data_resent"])  # fmt: skip
        for ph in phases:
            index = jain([ph.goodput(flow) for flow in flows])
            for flow in flows:
                writer.writerow([ph.congestion_control, flow, ph.goodput(flow), index,
                                 ph.bottleneck_bytes / ph.seconds / link_rate, ph.resent])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
