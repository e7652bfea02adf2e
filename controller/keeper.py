"""Keeping the daemon's P4Runtime session to one switch alive across switch restarts.

When the stream ends (the switch restarted, or the link broke) the keeper
reconnects with exponential backoff (0.1 s doubling to 5 s), under the same
configured election id. A new session pushes the pipeline again if the
switch lost it (its cookie differs), then `restored` runs: provisioning and
the registry's `attach`, which reinstalls every job, group and forwarding
entry the switch no longer holds. Meanwhile writes fail at once with a
line saying the switch is being reconnected, instead of hanging or naming
a connection the daemon will never use again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from controller.config import SwitchConfig
from controller.errors import SwitchError
from controller.mastership import LinkStats, MastershipSettings
from controller.p4switch import SwitchSession
from controller.provision import session_for

log = logging.getLogger("controller.keeper")

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0

Restored = Callable[[SwitchSession], Awaitable[None]]


class SwitchKeeper:
    """The daemon's link to one switch: its current session, and `stats` (mastership.LinkStats), the
    figures the metrics exporter reads, kept across reconnects."""

    def __init__(
        self,
        config: SwitchConfig,
        election_id: int,
        restored: Restored,
        mastership: MastershipSettings | None = None,
    ) -> None:
        self.config = config
        self.election_id = election_id
        self.restored = restored
        self.mastership = mastership or MastershipSettings()
        self.stats = LinkStats()
        self.session: SwitchSession | None = None

    @property
    def reconnects(self) -> int:
        """Sessions opened after the first."""
        return self.stats.reconnects_total

    def _session(self) -> SwitchSession:
        return session_for(self.config, self.election_id, mastership=self.mastership, stats=self.stats)

    async def connect(self) -> SwitchSession:
        """The first session: failures are the caller's (the daemon does not start without its switch)."""
        self.session = self._session()
        await self.session.open()
        return self.session

    async def run(self) -> None:
        """Forever: wait for the session to be lost, then get a new one and restore the switch."""
        while True:
            session = self.session
            assert session is not None
            await session.lost.wait()
            await session.close()
            self.session = await self._reconnect(session.lost_at)
            self.stats.reconnects_total += 1

    async def _reconnect(self, lost_at: float) -> SwitchSession:
        delay, attempt = BACKOFF_FIRST, 0
        while True:
            attempt += 1
            session = self._session()
            try:
                await session.open()
                await self.restored(session)
            except SwitchError as exc:
                await session.close()
                log.warning("switch %s: reconnect attempt %d failed (%s); next in %.1f s",
                            self.config.name, attempt, exc, delay)  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            what = "pushed the pipeline again" if session.pushed else "the pipeline was still there"
            log.warning("switch %s: reconnected %.1f s after the connection was lost (attempt %d; %s)",
                        self.config.name, time.monotonic() - lost_at, attempt, what)  # fmt: skip
            return session
