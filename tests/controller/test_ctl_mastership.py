"""The daemon's mastership: it notices losing a switch, says so, and takes it back by the P4Runtime rule.

A switch that follows the specification keeps `election_id_past` and
promotes nobody when a controller with a higher election id leaves
(docs/softswitch.md); bmv2 promotes the highest id still connected. Each
test states what an operator sees: the daemon's log lines, what CreateJob
answers while another controller holds the switch, and that it works again
once the daemon holds it back (controller/mastership.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from ctl_support import BMV2_ANSWERS, Daemon, Switch, cli, wait_until, write_config
from finsy.proto import U128, p4r, p4r_grpc

from controller import config
from controller.errors import SwitchError
from controller.keeper import SwitchKeeper
from controller.mastership import LinkStats, MastershipSettings, Policy
from controller.p4switch import SwitchSession
from controller.tables.l2 import L2Entry, L2Forwarding

OTHER = 20  # the election id of the other controller; the daemon's is 10
RETRY = 0.5  # controller.mastership_retry_seconds of these tests


@contextlib.contextmanager
def held_by(switch: Switch, election_id: int) -> Iterator[None]:
    """Another controller, primary with `election_id` for the duration of the block, then gone."""
    requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()

    def stream() -> Iterator[p4r.StreamMessageRequest]:
        while (item := requests.get()) is not None:
            yield item

    with grpc.insecure_channel(switch.address) as channel:
        call = p4r_grpc.P4RuntimeStub(channel).StreamChannel(stream())
        update = p4r.MasterArbitrationUpdate(device_id=1, election_id=U128.encode(election_id))
        requests.put(p4r.StreamMessageRequest(arbitration=update))
        assert next(call).arbitration.status.code == 0, "the other controller is primary"
        try:
            yield
        finally:
            requests.put(None)
            call.cancel()


def create_job(d: Daemon, name: str) -> tuple[int, str]:
    result = cli("job", "create", name, "--world-size", "2", "--pool-size", "8", "--controller", d.listen)
    return result.code, result.err


def logged(d: Daemon, text: str, timeout: float = 10.0) -> bool:
    return wait_until(lambda: text in d.log.read_text(), timeout=timeout)


def test_the_daemon_takes_a_switch_back_once_its_other_primary_has_left(
    target: str, switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    """Primary leaves, daemon regains, CreateJob works: with the specification's rule by arbitrating
    with election_id_past (20) after RETRY s without a primary; bmv2 promotes the daemon's own 10."""
    d = daemon(mastership_retry_seconds=RETRY)
    with held_by(switch, OTHER):
        assert logged(
            d, f"switch sw1 at {switch.address}: mastership lost to election id {OTHER} (ours is 10)"
        )
        code, err = create_job(d, "alpha")
        assert code == 1
        holder = f"another controller is primary with election id {OTHER}, ours is 10"
        assert f"switch sw1 at {switch.address}: not primary: {holder}" in err
    regained = 10 if target in BMV2_ANSWERS else OTHER
    assert logged(d, f"primary again (election id {regained})")
    if target not in BMV2_ANSWERS:
        assert (
            f"taking the switch back with election id {OTHER} (election_id_past {OTHER}" in d.log.read_text()
        )
    assert create_job(d, "alpha") == (0, "")


def test_with_mastership_yield_the_daemon_stays_backup_and_says_why(
    target: str, switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    if target in BMV2_ANSWERS:
        pytest.skip("bmv2 gives the switch back by itself: the policy never has to act")
    d = daemon(mastership="yield", mastership_retry_seconds=RETRY)
    with held_by(switch, OTHER):
        assert logged(d, f"mastership lost to election id {OTHER} (ours is 10): the daemon stays backup")
    assert logged(d, f"the primary (election id {OTHER}) left and the switch promotes nobody")
    code, err = create_job(d, "alpha")
    assert code == 1
    assert f"not primary: nobody is primary (the last primary had election id {OTHER}), ours is 10" in err
    assert "controller.mastership: yield" in err
    assert "primary again" not in d.log.read_text()


def test_a_daemon_started_below_election_id_past_takes_the_switch(
    target: str, switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    """A command with --election-id 20 came and went before the daemon started: the specification's switch
    takes no id below 20, so the daemon (reclaim) arbitrates with 20 at once."""
    if target in BMV2_ANSWERS:
        pytest.skip("bmv2 takes any id once nobody is connected")
    files = ["--p4info", str(switch.artifacts.p4info), "--config", str(switch.artifacts.device_config)]
    pushed = cli("pipeline", "push", "--switch", switch.address, *files, "--election-id", str(OTHER))
    assert pushed.code == 0, pushed.err
    d = daemon()
    assert f"(election_id_past): arbitrating with {OTHER}" in d.log.read_text()
    assert create_job(d, "alpha") == (0, "")


def test_a_command_below_election_id_past_names_the_flag_that_fixes_it(target: str, switch: Switch) -> None:
    """After `--election-id 20` came and went, a command with the default id 1 is told to give
    --election-id 20 or higher: the flag it has, not the daemon's config key."""
    if target in BMV2_ANSWERS:
        pytest.skip("bmv2 takes any id once nobody is connected")
    with held_by(switch, OTHER):
        pass
    result = cli("fwd", "add", "--switch", switch.address, "02:00:00:00:00:09", "1")
    assert result.code == 1
    assert f"ours is 1: give --election-id {OTHER} or higher, or restart the switch" in result.err
    assert "controller.election_id" not in result.err
    mac = "02:00:00:00:00:09"
    taken = cli("fwd", "add", "--switch", switch.address, "--election-id", str(OTHER), mac, "1")
    assert "has no pipeline" in taken.err  # with that id arbitration passes: the next thing it lacks


def test_the_links_stats_follow_writes_mastership_and_reconnects(
    target: str, switch: Switch, tmp_path: Path
) -> None:
    """SwitchKeeper.stats: is_primary, writes_total, write_errors_total, mastership_lost_total,
    reconnects_total, as the metrics exporter reads them."""
    if target in BMV2_ANSWERS:
        pytest.skip("the figures do not depend on the switch's answers")
    topology = config.load(write_config(switch, tmp_path / "lab.yaml"))
    l2 = L2Forwarding()

    async def restored(session: SwitchSession) -> None:
        return None

    async def scenario() -> list[LinkStats]:
        keeper = SwitchKeeper(topology.switches[0], 10, restored, MastershipSettings(Policy.RECLAIM, RETRY))
        seen = [LinkStats(**vars(keeper.stats))]
        session = await keeper.connect()
        runner = asyncio.create_task(keeper.run())
        try:
            seen.append(LinkStats(**vars(keeper.stats)))
            await session.write([l2.update("+", L2Entry(0x020000000001, 3))])
            with contextlib.suppress(SwitchError):
                await session.write([l2.update("+", L2Entry(0x020000000001, 3))])  # ALREADY_EXISTS
            other = SwitchSession("other", switch.address, election_id=OTHER)  # grpc.aio, as the loop's
            await other.open()
            await until(lambda: not keeper.stats.is_primary)
            with contextlib.suppress(SwitchError):
                await session.write([l2.update("-", L2Entry(0x020000000001, 3))])  # not primary
            seen.append(LinkStats(**vars(keeper.stats)))
            await other.close()
            await until(lambda: keeper.stats.is_primary)
            seen.append(LinkStats(**vars(keeper.stats)))
            await session.close()  # as if the stream broke: the keeper opens another session
            session.lost.set()
            await until(lambda: keeper.stats.reconnects_total == 1 and keeper.stats.is_primary)
            seen.append(LinkStats(**vars(keeper.stats)))
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            if keeper.session is not None:
                await keeper.session.close()
        return seen

    assert asyncio.run(scenario()) == [
        LinkStats(),
        LinkStats(is_primary=True),
        LinkStats(is_primary=False, writes_total=3, write_errors_total=2, mastership_lost_total=1),
        LinkStats(is_primary=True, writes_total=3, write_errors_total=2, mastership_lost_total=1),
        LinkStats(True, 3, 2, reconnects_total=1, mastership_lost_total=1),
    ]


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for `condition`; the bound is generous: a reconnect under `reclaim` may back off (0.1 s doubling
    to 5 s) while the switch still counts the old stream, and CI once took longer than 10 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.05)


def test_closing_a_session_ends_its_reclaimer_even_as_an_arbitration_arrives() -> None:
    """The reclaimer is cancelled in the same turn of the loop as an arbitration answer sets its event
    (what a reconnect under load does): it must end, or close(), which awaits it, never returns.
    Python 3.11's asyncio.wait_for swallowed that cancellation (gh-86296)."""

    async def scenario() -> bool:
        session = SwitchSession("s1", "127.0.0.1:9", mastership=MastershipSettings(Policy.RECLAIM, 60.0))
        reclaimer = asyncio.create_task(session._reclaim())
        await asyncio.sleep(0)  # it waits for an arbitration now
        session._arbitrated.set()
        reclaimer.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(reclaimer), 2.0)
        ended = reclaimer.done()
        reclaimer.cancel()  # the old code's immortal loop: do not leave it running
        return ended

    assert asyncio.run(scenario())
