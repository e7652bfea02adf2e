"""Aggregation when the switch is full or down: a host running p4reduce-switch takes the job (issue 28).

The config names a second embedded switch as an aggregation node of last
resort (`last_resort: true`): a host the ranks reach over IP. A job whose
switch has no room, or is down when the job is created, is placed there,
says so in its description and `job show`, and aggregates exactly as on the
switch; ranks change nothing. A tenant's quota is never a reason to move a job.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import yaml
from ctl_support import Artifacts, Daemon, Switch, cli, compile_soft, start_switch, stop

from controller import config
from controller.errors import ConfigError, PoolExhausted, QuotaExceeded, SwitchError
from controller.registry import _no_room_or_down
from hostlib import Communicator
from tests.ports import free_tcp_port

WORLD = 2


@pytest.fixture(scope="module")
def soft_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return compile_soft(tmp_path_factory.mktemp("build-last-resort"))


def entry(name: str, sw: Switch, **extra: object) -> dict[str, object]:
    return {"name": name, "grpc": sw.address, "p4info": str(sw.artifacts.p4info),
            "device_config": str(sw.artifacts.device_config), "default_host_port": 1,
            "aggregation": {"ipv4": str(sw.udp_address), "mac": "02:50:52:00:00:01"}, **extra}  # fmt: skip


@pytest.fixture
def place(soft_artifacts: Artifacts, tmp_path: Path) -> Iterator[tuple[Switch, Switch, Callable[[], Daemon]]]:
    """A switch sw1, an aggregation node node1, and a daemon over both."""
    started: list[Switch] = []
    daemons: list[Daemon] = []
    try:
        for name in ("sw1", "node1"):
            (tmp_path / name).mkdir()
            started.append(start_switch("soft", soft_artifacts, tmp_path / name))
        data = {
            "controller": {"default_pool_size": 16, "join_timeout_seconds": 20},
            "switches": [entry("sw1", started[0]), entry("node1", started[1], last_resort=True)],
        }
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(data))
        listen = f"127.0.0.1:{free_tcp_port()}"

        def start() -> Daemon:
            daemons.append(Daemon(path, listen, tmp_path / "controller.log").start())
            return daemons[-1]

        yield started[0], started[1], start
    finally:
        for d in daemons:
            d.stop()
        for sw in started:
            stop(sw.process)


def inputs(rank: int, size: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * (rank + 5) % 99_991).astype(np.int32)


def all_reduce_on_ranks(d: Daemon, job: str) -> list[tuple[bool, str]]:
    expected = sum(inputs(r, 10_000).astype(np.int64) for r in range(WORLD)).astype(np.int32)

    def rank(r: int) -> tuple[bool, str]:
        with Communicator.join(
            d.listen, job, r, WORLD, address=(f"127.0.0.{70 + r}", 0), join_timeout=30
        ) as c:
            return bool(np.array_equal(c.allreduce(inputs(r, 10_000)), expected)), c.job.switch_address[0]

    with ThreadPoolExecutor(WORLD) as pool:
        return list(pool.map(rank, range(WORLD)))


def test_a_job_that_finds_its_switch_full_aggregates_on_the_node_and_says_so(
    place: tuple[Switch, Switch, Callable[[], Daemon]],
) -> None:
    switch, node, start = place
    d = start()
    hog = ("--world-size", "1", "--pool-size", "1024", "--controller", d.listen)
    assert cli("job", "create", "hog1", *hog).code == 0 and cli("job", "create", "hog2", *hog).code == 0
    assert cli("job", "create", "spilled", "--world-size", str(WORLD), "--controller", d.listen).code == 0
    shown = cli("job", "show", "spilled", "--controller", d.listen).out
    assert "spilled" in shown and "node1" in shown
    assert (
        "placed on aggregation node node1 (last resort): switch sw1 could not take it: cannot allocate 16"
        in shown
    )
    assert all_reduce_on_ranks(d, "spilled") == [(True, str(node.udp_address))] * WORLD
    # The hogs stay where they were asked for, and say nothing.
    hog1 = json.loads(cli("job", "show", "hog1", "--controller", d.listen, "--json").out)
    assert hog1["switch"] == "sw1" and hog1["placement"] == ""


def test_a_job_created_while_its_switch_is_down_aggregates_on_the_node(
    place: tuple[Switch, Switch, Callable[[], Daemon]],
) -> None:
    switch, node, start = place
    d = start()
    os.kill(switch.process.pid, signal.SIGKILL)
    switch.process.wait(timeout=10)
    assert all_reduce_on_ranks(d, "meanwhile") == [(True, str(node.udp_address))] * WORLD
    assert "switch sw1 could not take it: " in d.log.read_text()


def test_a_placed_job_keeps_its_reason_across_a_daemon_restart(
    place: tuple[Switch, Switch, Callable[[], Daemon]],
) -> None:
    _, _, start = place
    d = start()
    hog = ("--world-size", "1", "--pool-size", "1024", "--controller", d.listen)
    assert cli("job", "create", "hog1", *hog).code == 0 and cli("job", "create", "hog2", *hog).code == 0
    assert cli("job", "create", "spilled", "--world-size", "2", "--controller", d.listen).code == 0
    d.stop()
    d = start()
    again = json.loads(cli("job", "show", "spilled", "--controller", d.listen, "--json").out)
    assert again["switch"] == "node1" and again["placement"].startswith("on aggregation node node1")


def test_only_a_full_or_unreachable_switch_moves_a_job() -> None:
    assert _no_room_or_down(PoolExhausted("cannot allocate 16 contiguous slots"))
    assert _no_room_or_down(SwitchError("sw1: the P4Runtime connection was lost 1.0 s ago"))
    assert not _no_room_or_down(QuotaExceeded("tenant 'a' would hold 32 slots on switch sw1"))
    assert not _no_room_or_down(ConfigError("pool size 1 is below 2"))


def switches(**node: object) -> list[dict[str, object]]:
    common = {"p4info": "p", "device_config": "d"}
    sw1 = {"ipv4": "10.0.0.254", "mac": "02:00:00:00:00:fe"}
    node1 = {"ipv4": "10.0.9.1", "mac": "02:00:00:00:09:01"}
    return [
        {"name": "sw1", "grpc": "127.0.0.1:9001", "aggregation": sw1, **common},
        {"name": "node1", "grpc": "127.0.0.1:9002", "aggregation": node1, **common, **node},
    ]


def test_an_aggregation_node_is_never_the_default_switch_and_needs_a_host_port() -> None:
    topo = config.parse(
        {"switches": list(reversed(switches(last_resort=True, default_host_port=1)))}, Path(".")
    )
    assert topo.switch().name == "sw1"
    with pytest.raises(
        ConfigError, match=r"switches\[1\]: an aggregation node of last resort needs default_host_port"
    ):
        config.parse({"switches": switches(last_resort=True)}, Path("."))
    with pytest.raises(ConfigError, match=r"switches\[1\].last_resort: 'yes' is not true or false"):
        config.parse({"switches": switches(last_resort="yes", default_host_port=1)}, Path("."))
    with pytest.raises(ConfigError, match=r"links: node1 is an aggregation node of last resort \(a host\)"):
        config.parse(
            {"switches": switches(last_resort=True, default_host_port=1), "links": [["sw1:9", "node1:2"]]},
            Path("."),
        )
