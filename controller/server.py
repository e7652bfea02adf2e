"""`p4reduce-ctl serve`: hold mastership of the configured switches and serve the job API.

Start-up order matters: connect to every switch (winning arbitration and
pushing the pipeline when its cookie differs), provision it, rebuild the
job registry from its tables, and only then listen, so no client ever sees
a half-known state. A lease task reclaims jobs whose workers went silent;
a keeper per switch reconnects when the switch restarts and restores it
(provisioning, then every job: controller/keeper.py).

The job API binds to loopback by default. Any other address is refused
unless the daemon serves TLS and requires a token, or `--insecure` says the
operator means it (a loud warning at every start).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import grpc

from contracts import jobapi_pb2_grpc as pb_grpc
from controller.auth import Tokens
from controller.config import (
    DEFAULT_DISCONNECT_GRACE,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    SwitchConfig,
    Topology,
)
from controller.errors import ConfigError
from controller.keeper import SwitchKeeper
from controller.mastership import LinkStats, MastershipSettings
from controller.p4switch import SwitchSession
from controller.provision import provision
from controller.registry import JobRegistry
from controller.service import JobService, server_options
from controller.tables.l2 import L2Entry, L2Forwarding

log = logging.getLogger("controller.server")


@dataclass(frozen=True)
class ServeOptions:
    listen: str
    lease_seconds: float
    disconnect_grace_seconds: float = DEFAULT_DISCONNECT_GRACE
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS  # 0: no HTTP/2 keepalive pings
    keepalive_timeout_seconds: float = DEFAULT_KEEPALIVE_TIMEOUT_SECONDS
    token: str = ""
    admin_token: str = ""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False
    metrics: tuple[str, int] | None = None  # Prometheus /metrics (host, port); None: off


def server_credentials(options: ServeOptions) -> grpc.ServerCredentials | None:
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ConfigError("TLS needs both --tls-cert and --tls-key")
    if options.tls_cert is None or options.tls_key is None:
        return None
    try:
        return grpc.ssl_server_credentials([(options.tls_key.read_bytes(), options.tls_cert.read_bytes())])
    except OSError as exc:
        raise ConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None


def is_loopback(listen: str) -> bool:
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(options: ServeOptions, tls: bool) -> None:
    """Beyond loopback the job API needs TLS and a token, or --insecure (and then it says so loudly)."""
    if is_loopback(options.listen):
        return
    missing = [
        what for what, ok in (("TLS", tls), ("a token", options.token or options.admin_token)) if not ok
    ]
    if not missing:
        return
    if not options.insecure:
        raise ConfigError(
            f"--listen {options.listen} is reachable beyond this host, which needs {' and '.join(missing)} "
            "(--tls-cert/--tls-key, --token or --admin-token); --insecure serves it anyway"
        )
    for line in (
        f"INSECURE: the job API on {options.listen} is served without {' and without '.join(missing)} "
        "(--insecure)",
        "INSECURE: anyone who can reach it can create jobs and read their workers' addresses"
        + (", and tokens and credentials cross the network in the clear" if not tls else ""),
    ):
        log.warning("%s", line)


async def serve(topology: Topology, options: ServeOptions) -> None:
    """Run until SIGINT/SIGTERM."""
    credentials = server_credentials(options)
    check_exposure(options, credentials is not None)
    settings = topology.controller
    server = grpc.aio.server(
        options=server_options(options.keepalive_seconds, options.keepalive_timeout_seconds)
    )
    _bind(server, options.listen, credentials)  # before touching a switch: a taken port fails fast
    registry: JobRegistry | None = None
    known_l2: dict[str, list[L2Entry]] = {}

    def restorer(switch: SwitchConfig):  # noqa: ANN202 - a closure per switch
        async def restored(session: SwitchSession) -> None:
            assert registry is not None
            await provision(session, topology, switch, extra=known_l2[switch.name])
            await registry.attach(switch.name, session)

        return restored

    metrics: WSGIServer | None = None
    keepers = [SwitchKeeper(switch, settings.election_id, restorer(switch)) for switch in topology.switches]
    mastership = MastershipSettings(settings.mastership, settings.mastership_retry_seconds)
    keepers = [
        SwitchKeeper(switch, settings.election_id, restorer(switch), mastership)
        for switch in topology.switches
    ]
    tasks: list[asyncio.Task[None]] = []
    try:
        sessions: dict[str, SwitchSession] = {}
        for keeper in keepers:
            session = await keeper.connect()
            sessions[keeper.config.name] = session
            await provision(session, topology, keeper.config)
            known_l2[keeper.config.name] = await L2Forwarding().read(session)
        registry = JobRegistry(
            topology,
            sessions,
            lease_seconds=options.lease_seconds,
            default_pool_size=settings.default_pool_size,
            join_timeout=settings.join_timeout_seconds,
            id_quarantine=settings.id_quarantine_seconds,
            disconnect_grace=options.disconnect_grace_seconds,
        )
        await registry.recover()
        tenant_tokens = tuple((t.name, t.token) for t in topology.tenants)
        tokens = Tokens(options.token, options.admin_token, tenant_tokens)
        pb_grpc.add_JobServiceServicer_to_server(JobService(registry, tokens), server)
        await server.start()
        if options.metrics is not None:
            metrics = _serve_metrics(registry, keepers, options.metrics)
        auth = ", ".join(
            what for what, on in (("access token", options.token), ("admin token", options.admin_token)) if on
        )
        log.info("job service listening on %s (%s, %s); lease %g s, disconnect grace %g s, keepalive %s",
                 options.listen, "TLS" if credentials else "plaintext",
                 auth or "no token", options.lease_seconds, options.disconnect_grace_seconds,
                 f"{options.keepalive_seconds:g} s (timeout {options.keepalive_timeout_seconds:g} s)"
                 if options.keepalive_seconds else "off")  # fmt: skip
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        tasks.append(asyncio.create_task(_reclaim(registry, options.lease_seconds)))
        tasks += [asyncio.create_task(keeper.run()) for keeper in keepers]
        await stop.wait()
        log.info("stopping")
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if metrics is not None:
            metrics.shutdown()
        if registry is not None:
            registry.cancel_checks()
            registry.close_watches()
        await server.stop(grace=1.0)
        for keeper in keepers:
            if keeper.session is not None:
                await keeper.session.close()


def _serve_metrics(registry: JobRegistry, keepers: list[SwitchKeeper], where: tuple[str, int]) -> WSGIServer:
    from controller.metrics import ControllerCollector, serve_metrics

    def links() -> dict[str, LinkStats]:
        return {keeper.config.name: keeper.stats for keeper in keepers}

    collector = ControllerCollector(registry, asyncio.get_running_loop(), links)
    try:
        return serve_metrics(collector, *where)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {where[0]}:{where[1]}: {exc.strerror or exc}") from None


def _bind(server: grpc.aio.Server, listen: str, credentials: grpc.ServerCredentials | None) -> None:
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError:
        port = 0
    if not port:
        raise ConfigError(f"cannot listen on {listen} (address in use, or not an address of this host)")


async def _reclaim(registry: JobRegistry, lease_seconds: float) -> None:
    period = min(max(lease_seconds / 4, 0.05), 1.0)
    while True:
        await asyncio.sleep(period)
        try:
            await registry.expire()
        except Exception:  # a switch hiccup must not end lease keeping; the next round retries
            log.exception("lease check failed")
