"""Who is primary on a switch, as the switch last said, and when the daemon takes mastership back.

The P4Runtime rule (specification, "Rules for Handling MasterArbitrationUpdate
Messages"): a controller becomes primary only with an election id at least
`election_id_past`, the highest id a primary of the switch ever had. So
when a controller with a higher id takes the switch from the daemon and
then leaves, a switch that follows the specification promotes nobody: it
tells every client NOT_FOUND with `election_id_past`, and the daemon, with
its lower configured id, would stay backup for good (bmv2 instead promotes
the highest id still connected, which gives the daemon the switch back by
itself). The policy (`controller.mastership` of the config file) says what
the daemon does about it:

- `reclaim` (the daemon's default): once the switch says nobody is primary
  and has said so for `mastership_retry_seconds` (the controller that left
  may be a command that comes back with its own id, as `p4reduce-ctl fwd
  add --election-id 20` twice in a row does), send an arbitration update
  with the smallest id the rule accepts: max(configured id, election_id_past).
  While another controller is primary the daemon never takes the switch from
  it (that would be a higher id still); it checks again every
  `mastership_retry_seconds`, and job changes fail with a line naming the
  switch and the other primary's election id;
- `yield`: stay backup, and say so in the log and in every refused change
  (the one-shot commands always yield).

`LinkStats` holds the figures of one switch link that the metrics exporter
reads; every session of a `SwitchKeeper` shares its keeper's.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field

from finsy.proto import U128, p4r, rpc_code

log = logging.getLogger("controller.switch")

DEFAULT_RETRY_SECONDS = 5.0


class Policy(enum.Enum):
    RECLAIM = "reclaim"
    YIELD = "yield"


@dataclass(frozen=True)
class MastershipSettings:
    """The config file's `controller.mastership` and `controller.mastership_retry_seconds`."""

    policy: Policy = (
        Policy.YIELD
    )  # a one-shot command never takes a switch back; the daemon's default: RECLAIM
    retry_seconds: float = DEFAULT_RETRY_SECONDS


@dataclass
class LinkStats:
    """The daemon's figures of one switch link, kept across reconnects (names as Prometheus has them).

    - `is_primary`: the daemon is the switch's primary controller now (False while the link is down);
    - `writes_total`: Write batches the daemon asked the link to send (refused ones included);
    - `write_errors_total`: of those, the ones that failed: refused updates, a lost link, not primary;
    - `reconnects_total`: sessions opened after the first (the stream ended and was opened again);
    - `mastership_lost_total`: times the switch said, while the daemon was primary, that another
      controller or nobody is primary.
    """

    is_primary: bool = False
    writes_total: int = 0
    write_errors_total: int = 0
    reconnects_total: int = 0
    mastership_lost_total: int = 0


@dataclass
class Mastership:
    """What the switch's arbitration updates said, and the policy's next step."""

    where: str
    configured_id: int
    settings: MastershipSettings = field(default_factory=MastershipSettings)
    stats: LinkStats = field(default_factory=LinkStats)
    primary_id: int | None = None  # the other primary's election id (None: none, or we are)
    past_id: int = (
        0  # election_id_past (highest id seen, from bmv2) when the switch last said nobody is primary
    )
    orphaned_at: float | None = None  # time.monotonic() since when nobody has been primary

    def take(self, update: p4r.MasterArbitrationUpdate, election_id: int, announce: bool) -> None:
        """An arbitration update of the switch; a change of primary is one line in the log (`announce`:
        not for the answer to the first update, which the caller reports)."""
        was, other_before = self.stats.is_primary, self.primary_id
        code = update.status.code
        self.stats.is_primary = code == rpc_code.OK
        reported = U128.decode(update.election_id) if update.HasField("election_id") else 0
        self.primary_id = reported if code == rpc_code.ALREADY_EXISTS else None
        if code == rpc_code.NOT_FOUND:
            self.past_id = reported
            self.orphaned_at = self.orphaned_at or time.monotonic()
        else:
            self.orphaned_at = None
        if was and not self.stats.is_primary:
            self.stats.mastership_lost_total += 1
            holder = "nobody" if self.primary_id is None else f"election id {self.primary_id}"
            log.error(
                "%s: mastership lost to %s (ours is %d): %s", self.where, holder, election_id, self.plan()
            )
        elif announce and self.stats.is_primary and not was:
            log.warning("%s: primary again (election id %d)", self.where, election_id)
        elif announce and other_before is not None and code == rpc_code.NOT_FOUND:
            log.warning("%s: the primary (election id %d) left and the switch promotes nobody: %s",
                        self.where, other_before, self.plan())  # fmt: skip

    def wait_seconds(self) -> float:
        """How long the daemon may wait before `due` can change without a word from the switch."""
        if self.orphaned_at is None:
            return self.settings.retry_seconds
        return max(0.05, self.orphaned_at + self.settings.retry_seconds - time.monotonic())

    def plan(self) -> str:
        """What the daemon does about not being primary, for the log and for refused changes."""
        if self.settings.policy is Policy.YIELD:
            return (
                "the daemon stays backup (controller.mastership: yield); restart it to take the switch back"
            )
        if self.primary_id is not None:
            return (
                "the daemon takes the switch back once that controller has gone (controller.mastership: "
                f"reclaim; checked every {self.settings.retry_seconds:g} s)"
            )
        return (
            f"the daemon takes the switch back with election id {self.reclaim_with()} after "
            f"{self.settings.retry_seconds:g} s without a primary (controller.mastership: reclaim)"
        )

    def reclaim_with(self) -> int:
        """The smallest election id the specification's rule makes primary."""
        return max(self.configured_id, self.past_id)

    def due(self) -> int | None:
        """The election id to arbitrate with now, or None: primary, another primary, yield, or too early."""
        if self.settings.policy is not Policy.RECLAIM or self.stats.is_primary or self.orphaned_at is None:
            return None
        if time.monotonic() - self.orphaned_at < self.settings.retry_seconds:
            return None
        return self.reclaim_with()

    def refusal(self, election_id: int) -> str:
        """Why a change cannot be written now: a line naming the switch and who holds it."""
        if self.primary_id is not None:
            holder = f"another controller is primary with election id {self.primary_id}"
        else:
            holder = f"nobody is primary (the last primary had election id {self.past_id})"
        return f"{self.where}: not primary: {holder}, ours is {election_id}; {self.plan()}"
