"""A job on a host aggregator (an aggregation node of last resort) against the same job on the switch.

A Mininet star of N workers around the embedded switch s1, links limited
to --bw (20 Mbit/s by default), and one more host, agg1, on its own link
to s1: it runs p4reduce-switch with a UDP port and is named in the
controller's config with `last_resort: true` (docs/controller.md,
*Aggregation when the switch is full or down*). The job is first created
and run on s1; then jobs of one rank take the rest of s1's slots (its program has
2048), and the same job, created again, is placed on agg1 by the
controller: the ranks change nothing but the address in their JoinJob
reply. Every all-reduce of both placements is verified on every rank
(int32 exactly). agg1 lives in the root network namespace, where the
controller can reach its P4Runtime port.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mininet.log import setLogLevel

from experiments.cluster import (
    ExperimentError,
    LaunchError,
    MininetRun,
    _Agent,
    join_job,
    order,
    read_reply,
    start_agent,
    stop_agents,
)
from experiments.report import Report, add_link_arguments, figure, human, parser, progress
from experiments.step import Step
from hostlib import JobSpec
from hostlib.launch import ROOT, build_program, free_port, start_controller, wait_for_port

sys.path.insert(0, str(ROOT / "mininet"))

import lab  # noqa: E402
from targets import SwitchSpec, soft_launch  # noqa: E402
from topology import generate  # noqa: E402

NODE, NODE_IP, NODE_MAC, NODE_UDP = "agg1", "10.0.0.50", "02:00:00:00:00:50", 20562
SLOTS, HOG = 2048, 1024  # the program's slot count (P4Info's p4reduce_slot_count), a hog job's largest pool
FULL_BYTES, QUICK_BYTES = 1 << 20, 16 << 10
DTYPES = ("float32", "int32")


def node_config(grpc: str, program: Path, p4info: Path) -> str:
    """The config lines that name agg1 an aggregation node of last resort, after the lab's switches."""
    return (
        f"  - name: {NODE}\n    target: p4reduce-switch\n    last_resort: true\n    grpc: {grpc}\n"
        f"    device_id: 2\n    p4info: {p4info}\n    device_config: {program}\n"
        f'    aggregation: {{ipv4: {NODE_IP}, mac: "{NODE_MAC}", udp_port: {NODE_UDP}}}\n'
        "    default_host_port: 1\n"
    )


class HostAggregator(MininetRun):
    """The star, agg1 beside it, the controller over both; jobs are created and run one at a time."""

    def __init__(self, workers: int, bw: float, queue: int, pool: int, logs: Path) -> None:
        self.workers, self.bw, self.queue, self.pool, self.logs = workers, bw, queue, pool, logs
        self.topo = generate("star", workers)
        self.controller = ""
        self._node: subprocess.Popen[bytes] | None = None
        super().__init__()

    def _start(self) -> None:
        setLogLevel("warning")
        self.logs.mkdir(parents=True, exist_ok=True)
        program, p4info = build_program(ROOT / "build", None)
        grpc_ports = {s.name: free_port() for s in self.topo.switches}
        node_grpc = f"127.0.0.1:{free_port()}"
        generated = lab.controller_config(self.topo, grpc_ports, program, p4info, self.pool)
        switches, hosts = generated.split("hosts:\n")
        node_port = len(self.topo.hosts) + 1  # s1's port towards agg1
        config = self.logs / "controller.yaml"
        config.write_text(
            switches + node_config(node_grpc, program, p4info) + "hosts:\n" + hosts
            + f'  - {{name: {NODE}, ipv4: {NODE_IP}, mac: "{NODE_MAC}", switch: s1, port: {node_port}}}\n'
        )  # fmt: skip
        k = lab.program_values_per_packet(p4info)  # the switch's and agg1's K: the links' MTU follows it
        self.net = net = lab.build_network(self.topo, "soft", grpc_ports, self.bw, 0.0, 0.0, self.queue,
                                       switch_log="off", values_per_packet=k)  # fmt: skip
        node = net.addHost(NODE, ip=f"{NODE_IP}/24", mac=NODE_MAC, inNamespace=False)
        link = net.addLink(node, net.get("s1"), port2=node_port, bw=self.bw)
        lab.size_link(link, k)
        for intf in (link.intf1, link.intf2):  # the lab's queue under htb (build_network)
            intf.tc(f"%s qdisc add dev %s parent 5:1 handle 10: pfifo limit {self.queue}")
        for switch in net.switches:
            switch.log_dir, switch.pcap_dir = self.logs, None
        net.start()
        lab.record_network(self._state, net)
        lab.configure_hosts(net, self.topo)  # and agg1: a rewriting switch must see real checksums
        node.cmd(f"ethtool -K {NODE}-eth0 rx off tx off sg off tso off gso off gro off >/dev/null 2>&1")
        spec = SwitchSpec(NODE, node_grpc, 2, udp_ports=(f"1@{NODE_IP}:{NODE_UDP}",), log_dir=self.logs,
                          switch_log="off")  # fmt: skip
        launch = soft_launch(spec)
        console = open(launch.console_log, "wb")  # noqa: SIM115 (the daemon's console, kept open while it runs)
        self._node = subprocess.Popen(launch.command, stdout=console, stderr=subprocess.STDOUT, cwd=ROOT)
        self._state.add([self._node.pid])
        # As the lab's switches are (mininet/switches.py): the daemon compiles its program before it
        # listens, over 10 s on a busy host, and the controller gives up on a switch that does not answer.
        wait_for_port(int(node_grpc.rsplit(":", 1)[1]), self._node, launch.console_log, f"switch {NODE}")
        job_port = free_port()
        self._controller = start_controller(config, job_port, self.logs / "controller.log")
        self._state.add([self._controller.pid])
        lab.check_running(net, self._controller, self.logs / "controller.log")
        if self._node.poll() is not None:
            raise ExperimentError(f"{NODE}'s p4reduce-switch exited (see {launch.console_log})")
        self.controller = f"127.0.0.1:{job_port}"
        for _ in range(3):
            if (dropped := net.pingAll(timeout=1)) == 0:
                break
        else:
            raise ExperimentError(f"hosts cannot reach each other ({dropped:.0f}% of pings lost)")

    def close(self) -> None:
        super().close()
        if self._node is not None:
            self._node.terminate()
            self._node.wait(timeout=10)
            self._node = None

    def fill_switch(self, held: int) -> None:
        """Jobs of one rank that take every slot of s1 that `held` (the first job's) left: the next job
        finds it full. Each must land on s1 itself; a hog placed on agg1 would leave room on s1."""
        ctl = str(Path(sys.executable).with_name("p4reduce-ctl"))
        free, index = SLOTS - held, 0
        while free > 0:
            size = min(free, HOG)
            command = [ctl, "job", "create", f"hog{index}", "--world-size", "1", "--pool-size", str(size),
                       "--controller", self.controller, "--json"]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise ExperimentError(f"could not fill s1: {done.stderr.strip() or done.stdout.strip()}")
            created = json.loads(done.stdout)  # `job create --json`: a list of the one job created
            if (created[0] if isinstance(created, list) else created).get("switch") != "s1":
                raise ExperimentError(f"hog{index} ({size} slots) did not fit on s1: {done.stdout.strip()}")
            free, index = free - size, index + 1

    def job(self, name: str) -> tuple[str, list[_Agent]]:
        """Create `name` with every worker as a rank; its placement, as its description says, and agents."""
        assert self.net is not None
        members = [(h.ipv4, lab.WORKER_PORT + r) for r, h in enumerate(self.topo.hosts)]
        descs = join_job(self.controller, name, members, lab.new_credential())
        where = descs[0].placement or f"on switch s1 ({descs[0].switch_ipv4})"
        agents = [start_agent(self.net, h.name, JobSpec.from_description(descs[r]), r, members[r], self.logs)
                  for r, h in enumerate(self.topo.hosts)]  # fmt: skip
        for agent in agents:
            read_reply(agent, 180.0)
        return where, agents

    def run(self, agents: list[_Agent], elements: int, dtype: str, iteration: int) -> Step:
        """One all-reduce by every rank; no job runs concurrently, so s1's worker ports count this one."""
        before = self._ports()
        for agent in agents:
            order(agent, {"system": "p4reduce", "elements": elements, "dtype": dtype, "iteration": iteration})
        replies = [read_reply(agent, 600.0) for agent in agents]
        delta = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(self._ports(), before)]
        return Step(
            system="p4reduce", workers=len(agents), elements=elements, dtype=dtype, iteration=iteration,
            tensor_bytes=4 * elements, seconds=max(r["seconds"] for r in replies),
            ok=all(r["ok"] for r in replies),
            retransmissions=sum(r.get("retransmissions", 0) for r in replies),
            queries=sum(r.get("queries", 0) for r in replies),
            up_bytes=sum(d[0] for d in delta) / len(agents),
            down_bytes=sum(d[1] for d in delta) / len(agents),
            switch_packets=0, switch_cpu=0.0,
            error="; ".join(sorted({r["error"] for r in replies if r.get("error")})),
        )  # fmt: skip

    def _ports(self) -> list[tuple[int, int]]:
        """(rx, tx) bytes of s1's port towards each worker."""
        stats = [Path(f"/sys/class/net/s1-eth{h.port}/statistics") for h in self.topo.hosts]
        return [(int((s / "rx_bytes").read_text()), int((s / "tx_bytes").read_text())) for s in stats]


def main(argv: list[str] | None = None) -> int:
    p = parser("aggregator", __doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4, help="hosts on the star (default 4)")
    add_link_arguments(p, 20.0)
    p.add_argument("--bytes", type=int, help=f"tensor bytes (default {human(FULL_BYTES)}; --quick: 16 KB)")
    args = p.parse_args(argv)
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    iters = 1 if args.quick else args.iters
    report = Report("aggregator", args.out)
    placements: dict[str, str] = {}
    try:
        with (
            HostAggregator(args.workers, args.bw, args.queue, args.pool, args.logs) as cluster,
            progress(2 * len(DTYPES) * iters, f"host aggregator, {args.bw:g} Mbit/s") as advance,
        ):
            for node in ("switch", "node"):
                if node == "node":
                    cluster.fill_switch(args.pool)
                placements[node], agents = cluster.job(f"job-{node}")
                try:
                    for iteration in range(iters):
                        for dtype in DTYPES:
                            step = cluster.run(agents, size // 4, dtype, iteration)
                            report.add(step, aggregator=node, placement=placements[node], bw_mbit=args.bw)
                            advance()
                finally:
                    stop_agents(agents)
    except (ExperimentError, LaunchError) as error:
        return report.abort(error)

    if not placements["node"].startswith(f"on aggregation node {NODE}"):
        return report.abort(ExperimentError(f"the second job was not placed on {NODE}: {placements['node']}"))
    seconds = report.medians("seconds", "aggregator", "dtype")
    exact = {
        (node, dtype): all(r["ok"] for r in report.rows if r["aggregator"] == node and r["dtype"] == dtype)
        for node in ("switch", "node")
        for dtype in DTYPES
    }
    report.table(
        f"one job, {args.workers} workers, {args.bw:g} Mbit/s links, {human(size)} per all-reduce,"
        f" {args.pool} slots, median of {iters}: on the switch, then on {NODE} once s1 is full",
        ["aggregated by", "dtype", "seconds", "goodput MB/s", "against the switch", "every rank"],
        [
            [
                "switch s1" if node == "switch" else f"{NODE} (last resort)",
                dtype,
                f"{seconds[node, dtype]:.3f}",
                f"{size / seconds[node, dtype] / 1e6:.3f}",
                f"{seconds[node, dtype] / seconds['switch', dtype]:.2f}x the time",
                ("exact" if dtype == "int32" else "within bound") if exact[node, dtype] else "WRONG",
            ]
            for node in ("switch", "node")
            for dtype in DTYPES
        ],
    )
    report.note(f"placement of the second job, as its description says: {placements['node']}")
    for dtype in DTYPES:
        report.note(
            f"{dtype}: {seconds['switch', dtype]:.3f} s on the switch,"
            f" {seconds['node', dtype]:.3f} s on {NODE}"
        )
    report.note(
        f"{NODE} has one link: every rank's DATA comes in and every RESULT goes out over it, {args.workers}"
        f" times a rank's bytes each way, where the switch's port towards each rank carries one rank's."
    )

    fig, (axes,) = figure(1, f"one job on the switch and on a host aggregator, {args.bw:g} Mbit/s links")
    width = 0.38
    for index, node in enumerate(("switch", "node")):
        xs = [i + (index - 0.5) * width for i in range(len(DTYPES))]
        label = "switch s1" if node == "switch" else f"{NODE} (last resort)"
        axes.bar(xs, [seconds[node, d] for d in DTYPES], width, label=label, color=f"C{index}")
    axes.set(xticks=range(len(DTYPES)), xticklabels=DTYPES, ylabel=f"seconds per {human(size)} all-reduce")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize=7)
    return 0 if report.save(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
