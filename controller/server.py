"""`p4reduce-ctl serve`: hold mastership of the configured switches and serve the job API.

Start-up order matters: connect to every switch (winning arbitration and
pushing the pipeline when its cookie differs), provision it, rebuild the
job registry from its tables, and only then listen, so no client ever sees
a half-known state. A lease task reclaims jobs whose workers went silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

import grpc

from contracts import jobapi_pb2_grpc as pb_grpc
from controller.config import Topology
from controller.errors import ConfigError
from controller.p4switch import SwitchSession
from controller.provision import provision, session_for
from controller.registry import JobRegistry
from controller.service import JobService, TokenInterceptor

log = logging.getLogger("controller.server")


@dataclass(frozen=True)
class ServeOptions:
    listen: str
    lease_seconds: float
    token: str = ""
    tls_cert: Path | None = None
    tls_key: Path | None = None


def server_credentials(options: ServeOptions) -> grpc.ServerCredentials | None:
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ConfigError("TLS needs both --tls-cert and --tls-key")
    if options.tls_cert is None or options.tls_key is None:
        return None
    try:
        return grpc.ssl_server_credentials([(options.tls_key.read_bytes(), options.tls_cert.read_bytes())])
    except OSError as exc:
        raise ConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None


async def serve(topology: Topology, options: ServeOptions) -> None:
    """Run until SIGINT/SIGTERM."""
    credentials = server_credentials(options)
    settings = topology.controller
    interceptors = [TokenInterceptor(options.token)] if options.token else []
    # No SO_REUSEPORT: a second daemon on the same address must fail, not share the port.
    server = grpc.aio.server(interceptors=interceptors, options=[("grpc.so_reuseport", 0)])
    _bind(server, options.listen, credentials)  # before touching a switch: a taken port fails fast
    async with contextlib.AsyncExitStack() as stack:
        sessions: dict[str, SwitchSession] = {}
        for switch in topology.switches:
            session = await stack.enter_async_context(session_for(switch, settings.election_id))
            sessions[switch.name] = session
            await provision(session, topology, switch)
        registry = JobRegistry(
            topology,
            sessions,
            lease_seconds=options.lease_seconds,
            default_pool_size=settings.default_pool_size,
            join_timeout=settings.join_timeout_seconds,
        )
        await registry.recover()
        pb_grpc.add_JobServiceServicer_to_server(JobService(registry), server)
        await server.start()
        log.info("job service listening on %s (%s, %s); lease %g s",
                 options.listen, "TLS" if credentials else "plaintext",
                 "token required" if options.token else "no token", options.lease_seconds)  # fmt: skip
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        leases = asyncio.create_task(_reclaim(registry, options.lease_seconds))
        try:
            await stop.wait()
        finally:
            log.info("stopping")
            leases.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await leases
            await server.stop(grace=1.0)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


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
