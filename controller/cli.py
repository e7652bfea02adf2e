"""p4reduce-ctl: the operator's command line for p4reduce switches and jobs.

    p4reduce-ctl serve --config lab.yaml            # the controller daemon
    p4reduce-ctl provision --config lab.yaml        # one-shot switch set-up, no daemon
    p4reduce-ctl pipeline push --switch 127.0.0.1:9559 --p4info F --config F
    p4reduce-ctl job create|list|show|delete ...    # through the daemon
    p4reduce-ctl fwd add|list|delete --switch ADDR  # L2 entries, directly on a switch
    p4reduce-ctl counters [--job J] [--watch S]     # through the daemon
    p4reduce-ctl top [--once]                       # live view of jobs, through the daemon
    p4reduce-ctl shell --switch ADDR                # p4runtime-shell in its own venv

Every user mistake ends with one line on stderr and a non-zero status
(2 for a bad command line, 1 for everything else).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from contracts import jobapi_pb2 as pb
from contracts.protocol import MAX_WORKERS
from controller import config as cfg
from controller.addresses import (
    format_mac,
    parse_endpoint,
    parse_mac,
    parse_metrics_endpoint,
    parse_port_number,
)
from controller.client import JobClient
from controller.device_config import Target
from controller.errors import ConfigError, ControllerError
from controller.p4switch import SwitchSession
from controller.render import as_json, table

PROG = "p4reduce-ctl"
DEFAULT_SWITCH = "127.0.0.1:9559"
CLI_ELECTION_ID = 1
REPO = Path(__file__).resolve().parents[1]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _endpoint(text: str) -> str:
    try:
        return parse_endpoint(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _metrics_endpoint(text: str) -> tuple[str, int]:
    try:
        return parse_metrics_endpoint(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type[int] | type[float], zero: bool = False) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value >= 0 if zero else value > 0) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} must be a {'' if zero else 'positive '}number")
        return value

    return convert


def _non_negative(kind: type[int] | type[float]) -> Callable[[str], Any]:
    """A number >= 0, where 0 means something (no grace, no keepalive)."""
    return _positive(kind, zero=True)


def _given(flag: float | None, configured: float) -> float:
    """The flag's value when given, 0 included; else the config file's."""
    return configured if flag is None else flag


def _between(low: int, high: int) -> Callable[[str], int]:
    """An integer in low..high: every out-of-range number is one line, not a traceback later."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low}..{high}")
        return value

    return convert


def parser() -> argparse.ArgumentParser:
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="what to log on stderr (default: info for serve, warning otherwise)",
    )
    common = argparse.ArgumentParser(add_help=False, parents=[logs])
    common.add_argument("--json", action="store_true", help="print JSON instead of a table (for scripts)")
    daemon = argparse.ArgumentParser(add_help=False)
    daemon.add_argument(
        "--controller", type=_endpoint, default=cfg.DEFAULT_LISTEN, metavar="ADDR",
        help=f"the daemon's job API address (default {cfg.DEFAULT_LISTEN})",
    )  # fmt: skip
    daemon.add_argument("--token", default=os.environ.get("P4REDUCE_TOKEN", ""),
                        help="the daemon's access or admin token (default: $P4REDUCE_TOKEN)")  # fmt: skip
    daemon.add_argument(
        "--credential", default=os.environ.get("P4REDUCE_JOB_CREDENTIAL", ""), metavar="C",
        help="the job's credential, from `job create` (default: $P4REDUCE_JOB_CREDENTIAL)",
    )  # fmt: skip
    daemon.add_argument("--tls-ca", type=Path, metavar="FILE", help="CA certificate: talk TLS to the daemon")
    switch = argparse.ArgumentParser(add_help=False)
    switch.add_argument("--switch", type=_endpoint, default=DEFAULT_SWITCH, metavar="ADDR",
                        help=f"the switch's P4Runtime address (default {DEFAULT_SWITCH})")  # fmt: skip
    switch.add_argument(
        "--device-id", type=_between(0, 2**64 - 1), default=1, help="P4Runtime device id (default 1)"
    )
    switch.add_argument(
        "--election-id", type=_between(1, 2**128 - 1), default=CLI_ELECTION_ID,
        help=f"election id (default {CLI_ELECTION_ID}: yields to a running daemon; a higher one takes over)",
    )  # fmt: skip

    p = _Parser(
        prog=PROG, description="Control plane of p4reduce: switches, jobs and counters over P4Runtime."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    serve = sub.add_parser("serve", parents=[logs], help="run the controller daemon (job API)",
                           description="Hold mastership of the configured switches, provision them and serve "
                           "the job API until SIGINT/SIGTERM.")  # fmt: skip
    serve.add_argument("--config", type=Path, required=True, metavar="FILE", help="topology/config file")
    serve.add_argument(
        "--listen",
        type=_endpoint,
        metavar="ADDR",
        help=f"job API address (default: config's controller.listen or {cfg.DEFAULT_LISTEN})",
    )
    serve.add_argument(
        "--lease",
        type=_positive(float),
        metavar="S",
        help="seconds a job survives without heartbeats (default: config or 30)",
    )
    serve.add_argument(
        "--disconnect-grace",
        type=_non_negative(float),
        metavar="S",
        help="seconds a rank whose watch stream closed (its process died) has to come back before its "
        "peers are told (default: config or 0.5)",
    )
    serve.add_argument(
        "--keepalive",
        type=_non_negative(float),
        metavar="S",
        help="ping each client connection every S seconds and close it if unanswered, so a cut-off rank "
        "is named before its lease ends (default: config or 10; 0: off)",
    )
    serve.add_argument(
        "--keepalive-timeout",
        type=_positive(float),
        metavar="S",
        help="seconds a keepalive ping may go unanswered (default: config or 5)",
    )
    serve.add_argument(
        "--token",
        default=os.environ.get("P4REDUCE_TOKEN", ""),
        help="access token: every call must carry 'authorization: Bearer T' (default: $P4REDUCE_TOKEN); "
        "it lets clients create and list jobs, never act on another's",
    )
    serve.add_argument(
        "--admin-token",
        default=os.environ.get("P4REDUCE_ADMIN_TOKEN", ""),
        help="admin token: every call on every job (default: $P4REDUCE_ADMIN_TOKEN)",
    )
    serve.add_argument(
        "--metrics",
        type=_metrics_endpoint,
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics (jobs, switches, counters) on http://HOST:PORT/metrics; HOST "
        "defaults to 127.0.0.1 (default: config's controller.metrics, else off)",
    )
    serve.add_argument("--tls-cert", type=Path, metavar="FILE", help="serve TLS with this certificate")
    serve.add_argument("--tls-key", type=Path, metavar="FILE", help="private key of --tls-cert")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="serve beyond loopback without TLS or without a token (warns loudly at start)",
    )

    prov = sub.add_parser(
        "provision",
        parents=[common],
        help="set switches up from a config file, no daemon",
        description="Push the pipeline when it differs, then install L2 forwarding, the flood "
        "group, the aggregation address and its ARP answer on every configured switch.",
    )
    prov.add_argument("--config", type=Path, required=True, metavar="FILE", help="topology/config file")
    prov.add_argument(
        "--election-id", type=_between(1, 2**128 - 1), default=CLI_ELECTION_ID, help="election id"
    )
    prov.add_argument(
        "--force-push", action="store_true", help="push the pipeline even when its cookie matches"
    )

    pipe = sub.add_parser("pipeline", help="pipeline operations").add_subparsers(
        dest="action", metavar="ACTION", required=True, parser_class=_Parser
    )
    push = pipe.add_parser(
        "push",
        parents=[common, switch],
        help="push P4Info + device config to a switch",
        description="SetForwardingPipelineConfig, skipped when the switch already runs "
        "the same pair of files (same cookie), unless --force.",
    )
    push.add_argument("--p4info", type=Path, required=True, metavar="FILE", help="P4Info (text protobuf)")
    push.add_argument(
        "--config",
        type=Path,
        required=True,
        metavar="FILE",
        help="device config (bmv2 JSON, or the p4reduce-p4c JSON)",
    )
    push.add_argument("--force", action="store_true", help="push even when the cookie matches (clears state)")
    push.add_argument(
        "--target",
        choices=[t.value for t in Target],
        help="the switch's kind: its device config must be that kind's (default: either kind)",
    )

    job = sub.add_parser("job", help="jobs, through the daemon").add_subparsers(
        dest="action", metavar="ACTION", required=True, parser_class=_Parser
    )
    create = job.add_parser(
        "create", parents=[common, daemon], help="create a job (reserves its slots)",
        description="Create a job. It prints the job's credential, which its ranks and every later "
        "command on the job present (--credential or $P4REDUCE_JOB_CREDENTIAL); give --credential to "
        "choose it instead (16..256 characters).",
    )  # fmt: skip
    create.add_argument("name", help="job name: 1-64 letters, digits, '.', '_' or '-'")
    create.add_argument(
        "--world-size", type=_between(1, MAX_WORKERS), required=True, metavar="N",
        help=f"number of ranks (1..{MAX_WORKERS})",
    )  # fmt: skip
    create.add_argument(
        "--pool-size", type=_between(cfg.MIN_POOL_SIZE, cfg.MAX_POOL_SIZE), metavar="P",
        help=f"slots, {cfg.MIN_POOL_SIZE}..{cfg.MAX_POOL_SIZE} (default: the daemon's default_pool_size)",
    )  # fmt: skip
    create.add_argument(
        "--switch-name", default="", metavar="NAME", help="switch of the job (default: first)"
    )
    job.add_parser(
        "list",
        parents=[common, daemon],
        help="list jobs",
        description="List the jobs the caller may see: every job with the admin token (or when the "
        "daemon has none), else the jobs whose credential is given (--credential).",
    )
    show = job.add_parser(
        "show",
        parents=[common, daemon],
        help="show one job with its workers",
        description="One job: id, state, ranks joined, slots, multicast group, switch and aggregation "
        "address, K, and each rank's address once all have joined. Needs the job's credential "
        "(--credential or $P4REDUCE_JOB_CREDENTIAL) or the admin token.",
    )
    show.add_argument("name", help="the job")
    delete = job.add_parser(
        "delete",
        parents=[common, daemon],
        help="delete a job (frees its slots)",
        description="Delete a job: its entries and group leave the switch, its slots are freed, and its "
        "ranks' calls fail at once naming the deletion. Needs the job's credential (--credential or "
        "$P4REDUCE_JOB_CREDENTIAL) or the admin token.",
    )
    delete.add_argument("name", help="the job")

    fwd = sub.add_parser("fwd", help="L2 forwarding entries, directly on a switch").add_subparsers(
        dest="action", metavar="ACTION", required=True, parser_class=_Parser
    )
    add = fwd.add_parser("add", parents=[common, switch], help="forward frames for MAC out of PORT",
                         description="Add (or change) the L2 entry of MAC on the switch, directly over "
                         "P4Runtime. It needs mastership: beside a running daemon (election id 10) give "
                         "--election-id above it.")  # fmt: skip
    add.add_argument("mac", help="destination MAC, e.g. 02:00:00:00:00:01")
    add.add_argument("port", type=int, help="switch port (0..511)")
    fwd.add_parser("list", parents=[common, switch], help="list L2 entries",
                   description="The switch's L2 entries (MAC -> port), read directly; works beside a "
                   "running daemon (reading needs no mastership).")  # fmt: skip
    rm = fwd.add_parser("delete", parents=[common, switch], help="delete the entry of MAC",
                        description="Delete the L2 entry of MAC on the switch, directly over P4Runtime "
                        "(needs mastership, as fwd add).")  # fmt: skip
    rm.add_argument("mac", help="destination MAC of the entry")

    counters = sub.add_parser(
        "counters", parents=[common, daemon], help="P4 counters, labelled, via the daemon",
        description="The switch's P4 counters through the daemon, labelled by job name and drop reason. "
        "With --job, that job's (its credential: --credential or $P4REDUCE_JOB_CREDENTIAL, or the admin "
        "token); without, every job's and the drops of the switch (the admin token).",
    )  # fmt: skip
    counters.add_argument("--job", default="", help="only this job's counters")
    counters.add_argument("--switch-name", default="", metavar="NAME", help="switch (default: first)")
    counters.add_argument("--watch", type=_positive(float), metavar="SECONDS", help="repeat every SECONDS")
    counters.add_argument(
        "--count", type=_positive(int), metavar="N", help="with --watch: stop after N rounds"
    )

    tree = sub.add_parser(
        "tree", parents=[common], help="the aggregation tree a job over these switches would use",
        description="From the config file's switches and links: the smallest subtree of the fabric that "
        "joins the given switches (those with ranks of a job), its root, and which switch aggregates "
        "for which through which ports (docs/protocol.md, Aggregation trees). Needs no switch or daemon.",
    )  # fmt: skip
    tree.add_argument("--config", type=Path, required=True, metavar="FILE", help="topology/config file")
    tree.add_argument("switches", nargs="+", metavar="SWITCH", help="switches with ranks of the job")
    sub.add_parser(
        "tenants", parents=[common, daemon], help="tenants: their quotas and what they hold",
        description="Each tenant of the daemon (config file `tenants:`): its jobs and slots per switch "
        "against its quotas (max_jobs, max_slots per switch). The admin token shows every tenant; a "
        "tenant's token (--token) shows its own.",
    )  # fmt: skip
    top = sub.add_parser(
        "top", parents=[common, daemon], help="live view of jobs: ranks, goodput, questions, drops",
        description="Jobs with their ranks, DATA and results per second, QUERYs per DATA, MISSING, "
        "replays and aborts, and each switch's drops by reason (admin token), refreshed in place "
        "until Ctrl-C. What it shows is what the caller may see: every job with the admin token, a "
        "job with its credential.",
    )  # fmt: skip
    top.add_argument("--interval", type=_positive(float), default=1.0, metavar="S",
                     help="seconds between refreshes; rates are over this interval (default 1)")  # fmt: skip
    top.add_argument(
        "--once", action="store_true", help="print one table (rates over one interval) and exit; with --json"
    )

    shell = sub.add_parser(
        "shell",
        parents=[switch],
        help="p4runtime-shell on a switch (isolated venv)",
        description="Open p4runtime-shell against the switch, using the P4Info the switch "
        "runs. The shell lives in the venv made by scripts/p4runtime-shell.sh.",
    )
    shell.add_argument(
        "--venv",
        type=Path,
        default=Path(os.environ.get("P4RT_VENV", REPO / ".venv-p4rt")),
        help="p4runtime-shell venv (default: $P4RT_VENV or .venv-p4rt)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    level = getattr(args, "log_level", None) or ("info" if args.command == "serve" else "warning")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command != "serve":
        logging.getLogger("finsy").setLevel(logging.CRITICAL)  # one-shot commands report errors themselves
    try:
        return COMMANDS[(args.command, getattr(args, "action", None))](args)
    except ControllerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `p4reduce-ctl counters | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


# ---- daemon --------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from controller.server import ServeOptions, serve

    topology = cfg.load(args.config)
    settings = topology.controller
    options = ServeOptions(
        listen=args.listen or settings.listen,
        lease_seconds=args.lease or settings.lease_seconds,
        disconnect_grace_seconds=_given(args.disconnect_grace, settings.disconnect_grace_seconds),
        keepalive_seconds=_given(args.keepalive, settings.keepalive_seconds),
        keepalive_timeout_seconds=args.keepalive_timeout or settings.keepalive_timeout_seconds,
        token=args.token,
        admin_token=args.admin_token,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        insecure=args.insecure,
        metrics=args.metrics or settings.metrics,
    )
    asyncio.run(serve(topology, options))
    return 0


def cmd_provision(args: argparse.Namespace) -> int:
    from controller.provision import provision, session_for

    topology = cfg.load(args.config)

    async def run() -> list[Any]:
        reports = []
        for switch in topology.switches:
            async with session_for(switch, args.election_id, args.force_push) as session:
                reports.append(await provision(session, topology, switch))
        return reports

    reports = asyncio.run(run())
    headers = ["switch", "pipeline", "l2_entries", "flood_ports", "updates"]
    rows = [
        [r.switch, _pushed(r.pipeline_pushed), r.l2_entries, list(r.flood_ports), r.updates] for r in reports
    ]
    _print(args, headers, rows)
    return 0


# ---- switch-direct commands ----------------------------------------------------------------------


def _session(args: argparse.Namespace, **kwargs: Any) -> SwitchSession:
    return SwitchSession(
        args.switch, args.switch, device_id=args.device_id, election_id=args.election_id, **kwargs
    )


def cmd_pipeline_push(args: argparse.Namespace) -> int:
    async def run() -> tuple[bool, str]:
        target = Target(args.target) if args.target else None
        files = {"p4info": args.p4info, "device_config": args.config}
        async with _session(args, **files, force_push=args.force, target=target) as s:
            return s.pushed, s.schema.get_pipeline_info()

    pushed, info = asyncio.run(run())
    _print(args, ["switch", "pipeline", "program"], [[args.switch, _pushed(pushed), info]])
    return 0


def cmd_fwd_add(args: argparse.Namespace) -> int:
    from controller.tables.l2 import L2Entry, L2Forwarding

    entry = L2Entry(parse_mac(args.mac), parse_port_number(args.port, "port"))

    async def run() -> None:
        async with _session(args) as s:
            l2 = L2Forwarding()
            await s.write(l2.reconcile(await l2.read(s), [entry]))

    asyncio.run(run())
    _print(args, ["mac", "port"], [[format_mac(entry.mac), entry.port]])
    return 0


def cmd_fwd_list(args: argparse.Namespace) -> int:
    from controller.tables.l2 import L2Forwarding

    async def run() -> list[Any]:
        async with _session(args, require_primary=False) as s:
            return await L2Forwarding().read(s)

    _print(args, ["mac", "port"], [[format_mac(e.mac), e.port] for e in asyncio.run(run())])
    return 0


def cmd_fwd_delete(args: argparse.Namespace) -> int:
    from controller.tables.l2 import L2Entry, L2Forwarding

    mac = parse_mac(args.mac)

    async def run() -> None:
        async with _session(args) as s:
            l2 = L2Forwarding()
            if mac not in {e.mac for e in await l2.read(s)}:
                raise ControllerError(f"no L2 entry for {format_mac(mac)} on {args.switch}")
            await s.write([l2.update("-", L2Entry(mac, 0))])

    asyncio.run(run())
    if not args.json:
        print(f"deleted {format_mac(mac)}")
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    python = args.venv / "bin" / "python"
    if not python.exists():
        raise ControllerError(
            f"p4runtime-shell venv {args.venv} is missing; create it with: "
            f"{REPO / 'scripts' / 'p4runtime-shell.sh'}"
        )
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    command = [str(python), "-m", "p4runtime_sh", "--grpc-addr", args.switch,
               "--device-id", str(args.device_id), "--election-id", f"0,{args.election_id}"]  # fmt: skip
    return subprocess.call(command, env=env)


# ---- job API commands ----------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> JobClient:
    return JobClient(args.controller, args.token, args.tls_ca, args.credential)


def _job_dict(job: pb.JobDescription) -> dict[str, Any]:
    return {
        "name": job.name, "job_id": job.job_id, "state": job.state, "world_size": job.world_size,
        "base_slot": job.base_slot, "pool_size": job.pool_size, "multicast_group": job.multicast_group,
        "switch": job.switch_name, "switch_ipv4": job.switch_ipv4, "switch_udp_port": job.switch_udp_port,
        "values_per_packet": job.values_per_packet, "lease_seconds": job.lease_seconds,
        "generation": job.generation, "ranks_joined": job.ranks_joined, "tenant": job.tenant,
        "placement": job.placement,
        "workers": [{"rank": r, "ipv4": w.ipv4, "udp_port": w.udp_port, "mac": w.mac,
                     "switch_port": w.switch_port} for r, w in enumerate(job.workers)],
        "tree": [{"switch": p.switch_name, "parent": p.parent, "job_id": p.job_id, "base_slot": p.base_slot,
                  "pool_size": p.pool_size, "multicast_group": p.multicast_group,
                  "uplink_port": p.uplink_port, "parent_port": p.parent_port,
                  "rank_in_parent": p.rank_in_parent, "ranks": list(p.ranks)}
                 for p in job.tree],
    }  # fmt: skip


def _tree_rows(job: pb.JobDescription) -> list[list[Any]]:
    """One row per switch of the job's tree: what it aggregates, for whom, in which slots."""
    rows = []
    for part in job.tree:
        children = [c for c in job.tree if c.parent == part.switch_name]
        below = [f"ranks {','.join(map(str, part.ranks))}"] if part.ranks else []
        below += [f"{c.switch_name} (port {c.parent_port})" for c in children]
        up = (
            "root"
            if not part.parent
            else (f"{part.parent} as rank {part.rank_in_parent} via port {part.uplink_port}")
        )
        slots = f"{part.base_slot}..{part.base_slot + part.pool_size - 1}"
        rows.append([part.switch_name, up, "; ".join(below), part.job_id, slots, part.multicast_group])
    return rows


JOB_HEADERS = ["name", "id", "state", "ranks", "slots", "group", "switch"]


def _job_row(job: pb.JobDescription) -> list[Any]:
    slots = f"{job.base_slot}..{job.base_slot + job.pool_size - 1}"
    return [job.name, job.job_id, job.state, job.world_size, slots, job.multicast_group, job.switch_name]


def cmd_job_create(args: argparse.Namespace) -> int:
    with _client(args) as client:
        job = client.create(args.name, args.world_size, args.pool_size or 0, args.switch_name)
    _print(args, JOB_HEADERS, [_job_row(job)], [_job_dict(job) | {"credential": job.credential}])
    if job.credential and not args.json:
        print(f"credential: {job.credential}  (its ranks and later commands on the job need it)")
    return 0


def cmd_job_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        jobs = client.list()
    _print(args, JOB_HEADERS, [_job_row(j) for j in jobs], [_job_dict(j) for j in jobs])
    return 0


def cmd_job_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        job = client.get(args.name)
    if args.json:
        print(as_json(_job_dict(job)))
        return 0
    print(table(JOB_HEADERS, [_job_row(job)]))
    print(f"aggregation address {job.switch_ipv4}:{job.switch_udp_port}, K = {job.values_per_packet}, "
          f"lease {job.lease_seconds:g} s; {job.ranks_joined} of {job.world_size} ranks joined")  # fmt: skip
    if job.placement:
        print(f"placed {job.placement}")
    if job.tree:
        print(f"aggregation tree: {len(job.tree)} switches, root {job.tree[0].switch_name}")
        print(table(["switch", "sends to", "aggregates", "id", "slots", "group"], _tree_rows(job)))
    if job.workers:
        rows = [[r, f"{w.ipv4}:{w.udp_port}", w.mac, w.switch_port] for r, w in enumerate(job.workers)]
        print(table(["rank", "address", "mac", "switch_port"], rows))
    return 0


def cmd_job_delete(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.delete(args.name)
    if not args.json:
        print(f"deleted job {args.name}")
    return 0


def cmd_counters(args: argparse.Namespace) -> int:
    if args.count and not args.watch:
        raise ConfigError("--count N needs --watch SECONDS (without --watch there is one round)")
    rounds = args.count if args.watch else 1
    previous: dict[tuple[str, int], int] = {}
    with _client(args) as client:
        for round_ in range(rounds or sys.maxsize):
            values = client.counters(args.job, args.switch_name)
            rows = []
            for v in values:
                delta = v.packets - previous.get((v.counter, v.index), v.packets)
                previous[(v.counter, v.index)] = v.packets
                rows.append(
                    [v.counter, v.index, v.label, v.packets, v.bytes] + ([delta] if args.watch else [])
                )
            headers = ["counter", "index", "label", "packets", "bytes"] + (["+packets"] if args.watch else [])
            dicts = [{"counter": v.counter, "index": v.index, "label": v.label, "packets": v.packets,
                      "bytes": v.bytes} for v in values]  # fmt: skip
            if args.watch and not args.json:
                print(time.strftime("%H:%M:%S"))
            _print(args, headers, rows, dicts)
            sys.stdout.flush()
            if args.watch and round_ + 1 != rounds:
                time.sleep(args.watch)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    from controller.fabric import tree_for

    tree = tree_for(cfg.load(args.config), args.switches)
    if args.json:
        uplinks = {child: {"parent": up.parent, "child_port": up.child_port, "parent_port": up.parent_port}
                   for child, up in tree.uplinks.items()}  # fmt: skip
        print(as_json({"root": tree.root, "uplinks": uplinks, "switches": tree.switches}))
    else:
        print("\n".join(tree.describe()))
    return 0


def cmd_tenants(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tenants = client.tenants()

    def limit(value: int, limited: bool) -> str:
        return str(value) if limited else "-"

    rows, dicts = [], []
    for t in tenants:
        held = {s.switch_name: s.slots for s in t.slots}
        rows.append([t.name, f"{t.jobs}/{limit(t.max_jobs, t.limited_jobs)}",
                     ", ".join(f"{k} {v}" for k, v in held.items()) or "0",
                     limit(t.max_slots, t.limited_slots)])  # fmt: skip
        dicts.append({"tenant": t.name, "jobs": t.jobs, "max_jobs": t.max_jobs if t.limited_jobs else None,
                      "slots": held, "max_slots": t.max_slots if t.limited_slots else None})  # fmt: skip
    _print(args, ["tenant", "jobs/max", "slots held", "max slots per switch"], rows, dicts)
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    from rich.console import Console

    from controller import top

    with _client(args) as client:
        if not args.once:
            if args.json:
                raise ConfigError("--json needs --once (a live view is for a terminal)")
            top.run(client, args.interval, Console())
            return 0
        before, now = top.once(client, args.interval)
    if args.json:
        rows = {"jobs": top.job_rows(before, now), "drops": top.drop_rows(before, now), "note": now.note}
        print(as_json(rows))
    else:
        Console(width=max(120, Console().width)).print(top.render(before, now, args.interval))
    return 0


def _pushed(pushed: bool) -> str:
    return "pushed" if pushed else "unchanged"


def _print(
    args: argparse.Namespace,
    headers: list[str],
    rows: list[list[Any]],
    dicts: list[dict[str, Any]] | None = None,
) -> None:
    if args.json:
        print(as_json(dicts if dicts is not None else [dict(zip(headers, r, strict=True)) for r in rows]))
    else:
        print(table(headers, rows))


COMMANDS: dict[tuple[str, str | None], Callable[[argparse.Namespace], int]] = {
    ("serve", None): cmd_serve,
    ("provision", None): cmd_provision,
    ("pipeline", "push"): cmd_pipeline_push,
    ("job", "create"): cmd_job_create,
    ("job", "list"): cmd_job_list,
    ("job", "show"): cmd_job_show,
    ("job", "delete"): cmd_job_delete,
    ("fwd", "add"): cmd_fwd_add,
    ("fwd", "list"): cmd_fwd_list,
    ("fwd", "delete"): cmd_fwd_delete,
    ("counters", None): cmd_counters,
    ("top", None): cmd_top,
    ("tenants", None): cmd_tenants,
    ("tree", None): cmd_tree,
    ("shell", None): cmd_shell,
}
