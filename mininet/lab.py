"""The p4reduce Mininet lab: `sudo make lab WORKERS=4 SWITCH=soft|bmv2`.

Builds the network (hosts, P4 switches, links), starts the controller
daemon and lets it provision the switches over P4Runtime, checks plain
connectivity (ping all pairs, which crosses the switches' L2 path),
registers every host as a rank of one job, runs one worker per host, and
verifies every worker's sum. Leaves logs/ (switches, controller, workers),
pcaps/ (per switch port) and results/lab-<time>.json; exits non-zero on any
failure and tears everything down, also on Ctrl-C. A switch or controller
that exits while the lab needs it stops the lab with the last lines of its
log, instead of a ping with 100 % loss and a refused JoinJob later.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make the project importable ahead of the lab folder

import grpc  # noqa: E402
from mininet.link import Link, TCLink  # noqa: E402
from mininet.log import lg, setLogLevel  # noqa: E402
from mininet.net import Mininet  # noqa: E402

from contracts import jobapi_pb2 as pb  # noqa: E402
from contracts import jobapi_pb2_grpc as pb_grpc  # noqa: E402
from contracts.jobapi_metadata import call_metadata  # noqa: E402
from contracts.protocol import DEFAULT_VALUES_PER_PACKET, SUPPORTED_VALUES_PER_PACKET, payload_bytes  # noqa: E402
from controller.errors import ControllerError  # noqa: E402
from hostlib import JobSpec  # noqa: E402
from hostlib.launch import (  # noqa: E402
    LaunchError,
    build_program,
    free_port,
    start_controller,
    tail,
    worker_arguments,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab_ecn as ecn  # noqa: E402
from lab_config import TREE, aggregation_choice, controller_config, provision_fabric  # noqa: E402
from lab_state import LabState, clean  # noqa: E402
from switches import SWITCH_CLASSES  # noqa: E402
from targets import SWITCH_LOGS, p4c_bmv2  # noqa: E402
from topology import Topology, TopologyError, generate, load  # noqa: E402

JOB = "lab"
WORKER_PORT = 40000


LINK_BURST_KB = 15  # Mininet's own htb burst, also as the ceiling's (build_network)


def add_burst_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--burst",
        type=int,
        default=LINK_BURST_KB,
        help=f"KB a limited link may send at once, at rate and at ceiling (default {LINK_BURST_KB}; "
        "0: Mininet's htb, one frame at a time once the link is busy)",
    )


def add_ecn_argument(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--ecn-ms",
        type=float,
        default=default,
        metavar="MS",
        help=f"limited links mark ECN-capable packets CE once their queue holds more than MS ms at their "
        f"rate (default {default:g}; 0: no marking, tail drop only); see docs/lab.md",
    )


ETHERNET_MTU = 1500


def link_mtu(values_per_packet: int) -> int:
    """The MTU a lab's links need to carry DATA of K values in one frame: Ethernet's 1500 up to K = 256,
    a jumbo frame (9000, as data-centre NICs take) for 512 and 1024 (the embedded switch's default)."""
    needed = payload_bytes(values_per_packet) + 28  # IPv4 and UDP headers
    return ETHERNET_MTU if needed <= ETHERNET_MTU else 9000


def size_link(link: Link, values_per_packet: int) -> None:
    """Give both ends of `link` the MTU that DATA of K values needs (link_mtu); Mininet's is 1500."""
    mtu = link_mtu(values_per_packet)
    for intf in (link.intf1, link.intf2) if mtu > ETHERNET_MTU else ():
        intf.cmd(f"ip link set dev {intf.name} mtu {mtu}")


def program_values_per_packet(p4info: Path) -> int:
    """K of a compiled p4reduce program, from its P4Info (the annotation the controller reads too)."""
    import finsy as fy

    from controller.program import program_facts

    return program_facts(fy.P4Schema(p4info), str(p4info)).values_per_packet


def build_network(
    topo: Topology,
    kind: str,
    grpc_ports: dict[str, int],
    bw: float | None,
    drop_rate: float,
    drop_rate_out: float = 0.0,
    queue: int | None = None,
    switch_log: str = "info",
    out: Path = ROOT,
    burst: int = LINK_BURST_KB,
    values_per_packet: int = DEFAULT_VALUES_PER_PACKET,
    switch_link_bw: float | None = None,
    switch_link_loss: float = 0.0,
    ecn_ms: float = 0.0,
) -> Mininet:
    """The lab's network, not started; `bw` limits links with htb, `queue` (packets) bounds htb's queue.

    Without `queue` a limited link queues txqueuelen (1000) packets: seconds
    at a few Mbit/s, which a TCP flow fills and every ring step then waits behind.

    `burst` (KB) is what a throttled link may send at once, at its ceiling as at its rate (htb's
    burst and cburst). Mininet gives htb a 15 KB burst but a ceiling burst of one frame: once the
    link is busy it releases frames one per timer, and the emulation spends its CPU waking every
    process once per frame, while a TCP flow's 64 KB GSO packets pass whole. 0 keeps Mininet's.

    `values_per_packet` is the K of the switch's program (program_values_per_packet reads it from the
    P4Info): every link gets the MTU its DATA needs (link_mtu), so that a K of 512 or 1024 crosses the
    lab in one frame. The default, 64, fits Ethernet's MTU: for a network that carries no DATA, or the
    program as p4c compiles it for bmv2.

    `switch_link_bw` gives the links between switches another rate than `bw` (a fabric whose spine
    links are not oversubscribed); `switch_link_loss` (a fraction) makes them lose frames each way:
    each switch drops that fraction of what it sends out of its link ports (p4reduce-switch
    --drop-ports; this kernel has no netem), so either direction of a link loses it once.

    `ecn_ms` > 0 makes every limited link mark ECN-capable packets CE once its queue holds more than
    that many ms of its rate (mininet/lab_ecn.py): the embedded switch has no queues to mark at.
    """
    if switch_link_loss and (drop_rate or drop_rate_out):
        raise LaunchError("loss on the switch links and loss at the switches cannot be combined")
    if not any(isinstance(f, _QuietHtbQuantum) for f in lg.filters):
        lg.addFilter(_QuietHtbQuantum())
    net = Mininet(topo=None, build=False, controller=None, link=TCLink if bw else Link, autoSetMacs=False)
    try:
        cls = SWITCH_CLASSES[kind]
        for index, s in enumerate(topo.switches):
            net.addSwitch(
                s.name,
                cls=cls,
                dpid=f"{index + 1:016x}",  # Mininet derives it from the digits of a name like s1, not `spine`
                grpc_port=grpc_ports[s.name],
                device_id=index + 1,
                log_dir=str(out / "logs"),
                pcap_dir=str(out / "pcaps"),
                drop_rate=drop_rate,
                drop_rate_out=drop_rate_out or (switch_link_loss if topo.link_ports(s.name) else 0.0),
                drop_ports=tuple(topo.link_ports(s.name)) if switch_link_loss else (),
                switch_log=switch_log,
            )
        fabric_bw = switch_link_bw or bw
        links = []  # (link, its rate)
        for h in topo.hosts:
            host = net.addHost(h.name, ip=f"{h.ipv4}/24", mac=h.mac)
            links.append(
                (net.addLink(host, net.get(h.switch), port2=h.port, **({"bw": bw} if bw else {})), bw)
            )
        for a, pa, b, pb_ in topo.links:
            options = {"bw": fabric_bw} if bw else {}
            links.append((net.addLink(net.get(a), net.get(b), port1=pa, port2=pb_, **options), fabric_bw))
        for link, _ in links:
            size_link(link, values_per_packet)
        # TCLink's htb class 5:1, with the burst at its ceiling too (quantum: htb warns of the one it
        # derives from the rate; one class shares nothing), and a pfifo of `queue` packets under it
        for link, rate in links if bw else []:
            for intf in (link.intf1, link.intf2):
                if burst:
                    shape = f"htb rate {rate}Mbit burst {burst}k cburst {burst}k quantum 1514"
                    intf.tc(f"%s class change dev %s parent 5:0 classid 5:1 {shape}")
                if queue:
                    intf.tc(f"%s qdisc add dev %s parent 5:1 handle 10: pfifo limit {queue}")
        for link, rate in links if bw and ecn_ms else []:
            marker = ecn.marker_object(rate, ecn_ms, ROOT / "build", (burst or LINK_BURST_KB) * 1024)
            for intf in (link.intf1, link.intf2):
                ecn.attach(intf.name, marker, ecn.namespace_of(intf.node))
    except BaseException:  # links made so far would outlive the lab: no record of them yet
        net.stop()
        raise
    return net


class _QuietHtbQuantum(logging.Filter):
    """Mininet prints tc's warning that the quantum it derives from a rate above 16 Mbit/s is big, as an
    error, once per link end; build_network sets the quantum itself right after, so the line says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "quantum of class" not in record.getMessage()


def configure_hosts(net: Mininet, topo: Topology) -> None:
    """Offloads off (a switch that rewrites packets must see real checksums); ARP static between hosts and
    for every switch's aggregation address.

    The switch answers ARP for its aggregation address in the data plane, but a lab with injected loss
    may drop a rank's request, or the answer: the kernel asks again only after a second, so the first
    call waited that second, and its first round trip, the one the engine's estimate starts from, was
    one. A real cluster's hosts would have resolved the address long before their first call; the
    responder itself is tested without this (tests/protocol_scenarios.py, the switch daemon's ports
    and tests/lab/test_lab_hosts.py, which asks it from a lab host)."""
    for h in topo.hosts:
        host = net.get(h.name)
        for intf in host.intfList():
            host.cmd(f"ethtool -K {intf.name} rx off tx off sg off tso off gso off gro off >/dev/null 2>&1")
        for switch in topo.switches:
            entry = f"{switch.agg_ipv4} lladdr {switch.agg_mac} nud permanent dev {host.defaultIntf()}"
            said = host.cmd(f"ip neigh replace {entry}").strip()
            if said:
                raise LaunchError(f"{h.name}: ip neigh replace {entry}: {said}")
    net.staticArp()


def check_running(net: Mininet, controller: subprocess.Popen[bytes], controller_log: Path) -> None:
    """LaunchError with the end of its log if a switch or the controller has exited."""
    for switch in net.switches:
        switch.check_running()
    if controller.poll() is not None:
        code, last = controller.returncode, tail(controller_log)
        raise LaunchError(f"the controller exited with code {code}; {controller_log} ends:\n{last}")


def new_credential() -> str:
    """The lab job's credential: the runner joins for every rank, so it alone needs to know it."""
    return secrets.token_urlsafe(24)


def join_all(controller: str, topo: Topology, credential: str) -> dict[int, pb.JobDescription]:
    """JoinJob for every host at once (the rendezvous blocks until all ranks joined): each rank's reply,
    which carries that rank's key."""
    replies: dict[int, pb.JobDescription] = {}
    metadata = call_metadata(credential=credential)
    errors: list[str] = []
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)

        def join(rank: int, ip: str) -> None:
            request = pb.JoinJobRequest(
                name=JOB,
                rank=rank,
                world_size=len(topo.hosts),
                timeout_seconds=30,
                address=pb.WorkerAddress(ipv4=ip, udp_port=WORKER_PORT + rank),
            )
            try:
                replies[rank] = stub.JoinJob(request, timeout=40, metadata=metadata)
            except grpc.RpcError as error:
                errors.append(f"rank {rank}: {error.details()}")

        threads = [threading.Thread(target=join, args=(r, h.ipv4)) for r, h in enumerate(topo.hosts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise RuntimeError("JoinJob failed: " + "; ".join(errors))
    return replies


def heartbeat(controller: str, ranks: int, lease: float, stop: threading.Event, credential: str) -> None:
    metadata = call_metadata(credential=credential)
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        while not stop.wait(lease / 3):
            for rank in range(ranks):
                try:
                    stub.Heartbeat(pb.HeartbeatRequest(name=JOB, rank=rank), timeout=5, metadata=metadata)
                except grpc.RpcError:
                    pass


Counter = tuple[str, str, str, int, int]  # switch, counter, label, packets, bytes


def counters(controller: str, switches: list[str]) -> list[Counter]:
    """Every switch's non-zero counters: in a tree each switch counts its own part of the job."""
    rows = []
    with grpc.insecure_channel(controller) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        for switch in switches:
            reply = stub.GetCounters(pb.GetCountersRequest(switch_name=switch), timeout=10)
            rows += [(switch, c.counter, c.label, c.packets, c.bytes) for c in reply.counters if c.packets]
    return rows


def run(args: argparse.Namespace) -> int:
    topo = load(args.topo) if args.topo else generate(args.topology, args.workers)
    out: Path = args.out
    for folder in (out / "logs", out / "pcaps", out / "results", ROOT / "build"):
        folder.mkdir(parents=True, exist_ok=True)
    if args.switch == "bmv2":
        program, p4info = build_bmv2()
    else:
        program, p4info = build_program(ROOT / "build", args.values_per_packet)
    # the links' MTU follows the K the program was compiled for (its P4Info says), not an option's default
    values_per_packet = program_values_per_packet(p4info)
    aggregate_at = aggregation_choice(topo, args.aggregate_at)
    grpc_ports = {s.name: free_port() for s in topo.switches}
    job_port = free_port()
    config = out / "logs" / "lab-controller.yaml"
    config.write_text(controller_config(topo, grpc_ports, program, p4info, kind=args.switch,
                                        aggregate_at=aggregate_at))  # fmt: skip
    net = build_network(
        topo,
        args.switch,
        grpc_ports,
        args.bw,
        args.drop_rate,
        switch_log=args.switch_log,
        out=out,
        burst=args.burst,
        values_per_packet=values_per_packet,
        ecn_ms=args.ecn_ms,
    )
    controller: subprocess.Popen[bytes] | None = None
    controller_log = out / "logs" / "controller.log"
    stop = threading.Event()
    started = time.time()
    state = LabState()
    try:
        net.start()
        record_network(state, net)
        configure_hosts(net, topo)
        print(f"*** network up: {len(topo.switches)} switch(es) ({args.switch}), {len(topo.hosts)} hosts")
        if len(topo.switches) > 1:
            entries = provision_fabric(config, topo)
            where = "a tree of the switches" if aggregate_at == TREE else f"{aggregate_at} only"
            links = len(topo.links)
            print(f"*** fabric: {entries} L2 entries over {links} switch link(s); aggregation at {where}")
        controller = start_controller(config, job_port, controller_log)
        state.add([controller.pid])
        check_running(net, controller, controller_log)
        print(f"*** controller provisioned the switch(es); job API on 127.0.0.1:{job_port}")
        for attempt in range(1, 4):  # the first round may lose one ping: see docs/lab.md
            loss = net.pingAll(timeout=2)
            print(
                f"*** ping all pairs, round {attempt}: {loss:.0f}% loss (ordinary traffic over the L2 path)"
            )
            if loss == 0:
                break
        check_running(net, controller, controller_log)
        credential = new_credential()
        try:
            descs = join_all(f"127.0.0.1:{job_port}", topo, credential)
        except RuntimeError:
            check_running(net, controller, controller_log)  # a dead daemon explains a refused join best
            raise
        threading.Thread(
            target=heartbeat,
            args=(f"127.0.0.1:{job_port}", len(topo.hosts), 60.0, stop, credential),
            daemon=True,
        ).start()
        print_job(descs)
        reports = run_workers(net, topo, descs, args)
        rows = counters(f"127.0.0.1:{job_port}", topo.names)
    finally:
        stop.set()
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=10)
        if args.cli:
            from mininet.cli import CLI

            CLI(net)
        stop_network(net)
        state.done()
    ok = print_results(reports, rows) and loss == 0
    result_file = out / "results" / f"lab-{time.strftime('%Y%m%d-%H%M%S')}.json"
    result_file.write_text(
        json.dumps(
            {
                "ok": ok,
                "switch": args.switch,
                "workers": len(topo.hosts),
                "topology": str(args.topo) if args.topo else args.topology,
                "aggregate_at": aggregate_at,
                "size": args.size,
                "ping_loss": loss,
                "seconds": time.time() - started,
                "reports": reports,
                "counters": [
                    {"switch": sw, "counter": c, "label": lbl, "packets": p, "bytes": b}
                    for sw, c, lbl, p, b in rows
                ],
            },
            indent=2,
        )
    )
    print(
        f"*** {'PASS' if ok else 'FAIL'}: results in {result_file}, logs in {out / 'logs'}, "
        f"pcaps in {out / 'pcaps'}"
    )
    return 0 if ok else 1


def print_job(descs: dict[int, pb.JobDescription]) -> None:
    """One line per switch a rank was given (in a tree each rank's description is its own switch's),
    then the tree: which switch aggregates for which."""
    by_switch: dict[tuple[str, int], list[int]] = {}
    for rank, desc in sorted(descs.items()):
        by_switch.setdefault((desc.switch_ipv4, desc.switch_udp_port), []).append(rank)
    for ranks in by_switch.values():
        desc = descs[ranks[0]]
        print(
            f"*** job {desc.name!r}: id {desc.job_id}, slots {desc.base_slot}.."
            f"{desc.base_slot + desc.pool_size - 1}, switch {desc.switch_ipv4}:{desc.switch_udp_port}"
            + (f", ranks {ranks[0]}..{ranks[-1]}" if len(by_switch) > 1 else "")
        )
    for part in descs[0].tree:
        where = f"for {part.parent} via port {part.uplink_port}" if part.parent else "root"
        ranks = f", its ranks {','.join(map(str, part.ranks))}" if part.ranks else ""
        print(
            f"***   {part.switch_name}: {where}; id {part.job_id}, slots {part.base_slot}.."
            f"{part.base_slot + part.pool_size - 1}{ranks}"
        )


def run_workers(
    net: Mininet, topo: Topology, descs: dict[int, pb.JobDescription], args: argparse.Namespace
) -> list[dict]:
    processes = []
    for rank, h in enumerate(topo.hosts):
        job = JobSpec.from_description(descs[rank])
        command = [
            sys.executable,
            str(Path(__file__).with_name("worker.py")),
            *worker_arguments(job, rank, (h.ipv4, WORKER_PORT + rank)),
            f"--size={args.size}",
        ]
        for dtype in args.dtype:
            command += ["--dtype", dtype]
        log = open(args.out / "logs" / f"worker-{h.name}.log", "wb")  # noqa: SIM115 (closed below)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        processes.append((net.get(h.name).popen(command, stdout=subprocess.PIPE, stderr=log, env=env), log))
    reports = []
    for process, log in processes:
        try:
            out, _ = process.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        log.close()
        try:
            reports.append(json.loads(out.decode().strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            reports.append(
                {"rank": len(reports), "results": [{"ok": False, "error": "no report (see its log)"}]}
            )
    return reports


def print_results(reports: list[dict], rows: list[Counter]) -> bool:
    ok = True
    print(f"\n{'rank':>4} {'dtype':>8} {'seconds':>8} {'goodput':>12}  check")
    for report in reports:
        for r in report["results"]:
            if not r["ok"]:
                ok = False
                print(f"{report['rank']:>4} {r.get('dtype', '?'):>8}  FAILED: {r.get('error', 'wrong sum')}")
                continue
            check = "exact" if r["dtype"] == "int32" else f"max err {r['max_error']:.3g} <= {r['bound']:.3g}"
            print(
                f"{report['rank']:>4} {r['dtype']:>8} {r['seconds']:>8.2f} "
                f"{r['goodput'] / 1e6:>8.2f} MB/s  {check}"
            )
    print("\ncounters (non-zero):")
    for switch, counter, label, packets, size in rows:
        print(f"  {switch:<6} {counter:<22} {label:<18} {packets:>9} packets {size:>11} bytes")
    return ok


def build_bmv2() -> tuple[Path, Path]:
    """bmv2 JSON and P4Info from p4c (which must be on PATH), in build/bmv2/."""
    return p4c_bmv2(ROOT / "build" / "bmv2")


def main() -> int:
    parser = argparse.ArgumentParser(prog="mininet/lab.py", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="worker hosts (1..32, default 4)")
    parser.add_argument(
        "--switch", choices=sorted(SWITCH_CLASSES), default="soft", help="P4 target (default soft)"
    )
    parser.add_argument("--topology", choices=("star", "line"), default="star", help="generated topology")
    parser.add_argument("--topo", type=Path, help="topology JSON file (overrides --topology/--workers)")
    parser.add_argument(
        "--aggregate-at",
        default=TREE,
        metavar="tree|root|SWITCH",
        help="tree (default): each switch aggregates its own hosts and the controller joins the switches "
        "into a tree; root: only the switch the tree would be rooted at aggregates (a leaf-spine's spine), "
        "the others bridge; SWITCH: only that switch aggregates",
    )
    parser.add_argument("--size", type=int, default=65536, help="elements per all-reduce (default 65536)")
    parser.add_argument(
        "--dtype",
        action="append",
        choices=("float32", "float16", "int32"),
        help="dtype(s) to reduce (default float32 and int32)",
    )
    parser.add_argument("--bw", type=float, help="link bandwidth in Mbit/s (TCLink/htb)")
    add_burst_argument(parser)
    add_ecn_argument(parser, ecn.DEFAULT_MARK_MS)
    parser.add_argument(
        "--values-per-packet",
        type=int,
        choices=SUPPORTED_VALUES_PER_PACKET,
        metavar="K",
        help="the embedded switch runs the program compiled for K (default: the program's own, "
        "1024 for the embedded switch, 64 for bmv2); 512 and 1024 give the links a 9000-byte MTU",
    )
    parser.add_argument("--drop-rate", type=float, default=0.0, help="loss injected at the embedded switch")
    parser.add_argument(
        "--switch-log",
        choices=SWITCH_LOGS,
        default="trace",
        help="switch log: trace (every packet, as p4lang's tutorials; default), info, or off",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a worker may take")
    parser.add_argument("--cli", action="store_true", help="open the Mininet CLI after the run")
    parser.add_argument(
        "--out", type=Path, default=ROOT, help="where logs/, pcaps/ and results/ go (default: the checkout)"
    )
    parser.add_argument(
        "--clean", action="store_true", help="only remove what an interrupted lab left (daemons, links)"
    )
    args = parser.parse_args()
    args.dtype = args.dtype or ["float32", "int32"]
    if os.geteuid() != 0:
        print(
            "lab: Mininet needs root: run `sudo make lab` (or sudo .venv/bin/python mininet/lab.py)",
            file=sys.stderr,
        )
        return 2
    if args.clean:
        clean_leftovers()
        return 0
    if args.switch == "bmv2":
        missing = [tool for tool in ("simple_switch_grpc", "p4c") if not _which(tool)]
        if missing:
            print(
                f"lab: --switch bmv2 needs {' and '.join(missing)} on PATH (see docs/lab.md)", file=sys.stderr
            )
            return 2
    setLogLevel(os.environ.get("LAB_LOG", "warning"))
    try:
        return run(args)
    except (
        TopologyError,
        ControllerError,
        LaunchError,
        RuntimeError,
        subprocess.CalledProcessError,
    ) as error:
        print(f"lab: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lab: interrupted; network torn down", file=sys.stderr)
        return 130


def stop_network(net: Mininet) -> None:
    """The switch daemons first, then Mininet, which deletes the links before it stops the switches."""
    for switch in net.switches:
        switch.stop_daemon()
    net.stop()


def record_network(state: LabState, net: Mininet) -> None:
    """Remember the started network's node shells, switch daemons and links (mininet/lab_state.py)."""
    nodes = [*net.hosts, *net.switches]
    daemons = [s.process.pid for s in net.switches if getattr(s, "process", None) is not None]
    links = [intf.name for link in net.links for intf in (link.intf1, link.intf2)]
    state.add([n.pid for n in nodes if n.pid] + daemons, links)


def clean_leftovers() -> None:
    """Remove what an interrupted lab or experiment of this checkout left behind, and nothing else.

    That is what its runs recorded in .lab-state.json: switch daemons, the
    controller, Mininet's node shells and links (mininet/lab_state.py).
    Mininet's own `mn -c` kills every `ping` on the machine and deletes every
    /tmp/*.log and every `*-ethN` link, which are not ours to delete.
    """
    done = clean()
    print("\n".join(done) if done else "lab: nothing of this checkout's labs was left to remove")


def _which(tool: str) -> bool:
    from shutil import which

    return which(tool) is not None


if __name__ == "__main__":
    sys.exit(main())
