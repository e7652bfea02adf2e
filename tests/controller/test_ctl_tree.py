"""A job over a leaf–spine fabric: the controller installs its aggregation tree (issue 27).

Three embedded switches run the real program: two leaves, each with two ranks
on a rootless UDP port (port 1), and a spine joined to each leaf by a veth
pair (raw Ethernet, so root is needed). The daemon's config lists the hosts
under their own leaf and the two cables under `links:`. Ranks join through
hostlib as always; each hears its own leaf's job id and address. What the
specification says, shown end to end: every sum is exact; the spine sees one
partial sum per leaf and use, not one per rank; `job show` prints the tree;
delete leaves nothing on any switch; a spine that restarts is healed (the
call in flight fails on every rank, the next is exact); a restarted daemon
finds the tree again; a job whose tree finds a leaf full is refused, naming it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from ctl_support import (
    Artifacts,
    Daemon,
    Switch,
    cli,
    compile_soft,
    read_entries,
    read_groups,
    read_keys,
    start_switch,
    stop,
    wait_until,
)

from hostlib import AllreduceAborted, Communicator, JoinError
from hostlib.launch import free_loopback_address
from tests.ports import free_tcp_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the fabric's cables are veth pairs (root)")

PER_LEAF = 2
WORLD = 2 * PER_LEAF
SPINE_IP, SPINE_MAC = "10.99.0.254", "02:00:00:99:00:fe"


@dataclass
class Fabric:
    leaves: list[Switch]
    spine: Switch
    cables: list[tuple[str, str]]  # (leaf end, spine end) of each veth pair
    worker_ips: list[str]  # by rank: ranks 0, 1 on leaf1; 2, 3 on leaf2
    config: Path

    def switches(self) -> list[Switch]:
        return [*self.leaves, self.spine]


def veth(a: str, b: str) -> None:
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    for end in (a, b):
        subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False)
        subprocess.run(["ip", "link", "set", end, "up"], check=True)


@pytest.fixture(scope="module")
def soft_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return compile_soft(tmp_path_factory.mktemp("build-tree"))


@pytest.fixture
def fabric(soft_artifacts: Artifacts, tmp_path: Path) -> Iterator[Fabric]:
    tag = f"{os.getpid() % 10000}{int(time.monotonic() * 1000) % 1000}"
    cables = [(f"t{tag}l{i}", f"t{tag}s{i}") for i in (1, 2)]
    started: list[Switch] = []
    try:
        for a, b in cables:
            veth(a, b)
        leaves = []
        for i, (leaf_end, _) in enumerate(cables, 1):
            logs = tmp_path / f"leaf{i}"
            logs.mkdir()
            leaves.append(start_switch("soft", soft_artifacts, logs, interfaces=((2, leaf_end),)))
            started.append(leaves[-1])
        logs = tmp_path / "spine"
        logs.mkdir()
        spine = start_switch("soft", soft_artifacts, logs, interfaces=((2, cables[0][1]), (3, cables[1][1])))
        started.append(spine)
        ips = [free_loopback_address(0).rsplit(".", 1)[0] + f".{10 + r}" for r in range(WORLD)]
        yield Fabric(leaves, spine, cables, ips, write_fabric_config(leaves, spine, ips, tmp_path))
    finally:
        for sw in started:
            stop(sw.process)
        for a, _ in cables:
            subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)


def write_fabric_config(leaves: list[Switch], spine: Switch, ips: list[str], tmp_path: Path) -> Path:
    def switch(name: str, sw: Switch, ip: str, mac: str) -> dict[str, object]:
        return {"name": name, "grpc": sw.address, "p4info": str(sw.artifacts.p4info),
                "device_config": str(sw.artifacts.device_config), "aggregation": {"ipv4": ip, "mac": mac},
                "default_host_port": 1}  # fmt: skip

    data = {
        "controller": {"default_pool_size": 16, "join_timeout_seconds": 20},
        "switches": [
            switch("leaf1", leaves[0], str(leaves[0].udp_address), "02:50:52:00:00:01"),
            switch("leaf2", leaves[1], str(leaves[1].udp_address), "02:50:52:00:00:01"),
            switch("spine", spine, SPINE_IP, SPINE_MAC),
        ],
        "hosts": [
            {
                "name": f"h{r}",
                "ipv4": ip,
                "mac": f"02:00:00:00:00:{r + 1:02x}",
                "switch": "leaf1" if r < PER_LEAF else "leaf2",
                "port": 1,
            }
            for r, ip in enumerate(ips)
        ],  # fmt: skip
        "links": [["leaf1:2", "spine:2"], ["leaf2:2", "spine:3"]],
    }
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def controller(fabric: Fabric, tmp_path: Path) -> Iterator[Callable[[], Daemon]]:
    listen = f"127.0.0.1:{free_tcp_port()}"
    started: list[Daemon] = []

    def start() -> Daemon:
        d = Daemon(fabric.config, listen, tmp_path / "controller.log")
        started.append(d)
        return d.start()

    try:
        yield start
    finally:
        for d in started:
            d.stop()


def inputs(rank: int, size: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * (rank + 3) % 100_003).astype(np.int32)


def exact(result: np.ndarray, size: int) -> bool:
    expected = sum(inputs(r, size).astype(np.int64) for r in range(WORLD)).astype(np.int32)
    return bool(np.array_equal(result, expected))


def on_ranks(
    d: Daemon, fabric: Fabric, job: str, work: Callable[[Communicator, int], object]
) -> list[object]:
    def rank(r: int) -> object:
        address = (fabric.worker_ips[r], 0)
        with Communicator.join(d.listen, job, r, WORLD, address=address, join_timeout=30) as comm:
            return work(comm, r)

    with ThreadPoolExecutor(WORLD) as pool:
        return list(pool.map(rank, range(WORLD)))


def counter(d: Daemon, switch: str, name: str, job_id: int) -> int:
    out = cli("counters", "--switch-name", switch, "--controller", d.listen, "--json").out
    return sum(v["packets"] for v in json.loads(out) if v["counter"].endswith(name) and v["index"] == job_id)


def test_ranks_on_two_leaves_aggregate_at_each_leaf_and_the_spine_sees_one_partial_per_leaf(
    fabric: Fabric, controller: Callable[[], Daemon]
) -> None:
    d = controller()
    shown: list[str] = []

    def work(comm: Communicator, rank: int) -> tuple[bool, int, str]:
        ok = exact(comm.allreduce(inputs(rank, 20_000)), 20_000)
        if rank == 0:
            shown.append(cli("job", "show", "tree", "--controller", d.listen).out)
        return ok, comm.job.job_id, comm.job.switch_address[0]

    results = on_ranks(d, fabric, "tree", work)
    assert all(ok for ok, _, _ in results)  # type: ignore[misc]
    # Each rank sends to its own leaf, under that leaf's id for the job.
    addresses = [address for _, _, address in results]  # type: ignore[misc]
    assert addresses == [fabric.leaves[0].udp_address] * 2 + [fabric.leaves[1].udp_address] * 2
    text = shown[0]
    assert "aggregation tree: 3 switches, root spine" in text, text
    assert "leaf1" in text and "spine as rank 0 via port 2" in text and "spine as rank 2 via port 2" in text
    assert "ranks 0,1" in text and "ranks 2,3" in text, text
    # The spine added one contribution per leaf and use: half of what the four ranks gave the leaves.
    leaf_ids = [job_id for _, job_id, _ in results[::PER_LEAF]]  # type: ignore[misc]
    leaf_data = sum(counter(d, f"leaf{i}", "job_data_in", j) for i, j in enumerate(leaf_ids, 1))
    spine_row = next(line for line in text.splitlines() if line.startswith("spine"))
    spine_data = counter(d, "spine", "job_data_in", int(spine_row.split()[-3]))
    assert leaf_data > 0 and spine_data * 2 == leaf_data, (leaf_data, spine_data)
    # Layer 2 across the fabric: leaf1 forwards to leaf2's hosts through its uplink instead of flooding.
    l2 = dict(read_entries(fabric.leaves[0], "MyIngress.l2_forward"))
    assert l2[0x020000000003] == l2[0x020000000004] == 2 and l2[0x020000000001] == 1


def test_delete_leaves_nothing_of_the_tree_on_any_switch(
    fabric: Fabric, controller: Callable[[], Daemon]
) -> None:
    d = controller()
    before = {id(sw): (read_keys(sw, "MyIngress.job_table"), read_groups(sw)) for sw in fabric.switches()}
    on_ranks(d, fabric, "gone", lambda comm, rank: exact(comm.allreduce(inputs(rank, 1000)), 1000))
    # The last rank out deleted it: every switch is as before the job.
    for sw in fabric.switches():
        assert wait_until(lambda sw=sw: read_keys(sw, "MyIngress.job_table") == before[id(sw)][0], 10)
        assert read_groups(sw) == before[id(sw)][1]
        assert read_keys(sw, "MyIngress.upstream") == [] and read_keys(sw, "MyIngress.from_parent") == []


def test_a_spine_restart_fails_the_call_in_flight_on_every_rank_and_the_next_call_is_exact(
    fabric: Fabric, controller: Callable[[], Daemon], tmp_path: Path
) -> None:
    d = controller()
    restarted: list[Switch] = []
    size = 3_000_000

    def work(comm: Communicator, rank: int) -> tuple[str, bool]:
        handle = comm.allreduce_async(inputs(rank, size))
        if rank == 0:
            time.sleep(0.05)
            os.kill(fabric.spine.process.pid, signal.SIGKILL)
            fabric.spine.process.wait(timeout=10)
            logs = tmp_path / "spine-again"
            logs.mkdir()
            interfaces = ((2, fabric.cables[0][1]), (3, fabric.cables[1][1]))
            restarted.append(
                start_switch(
                    "soft", fabric.spine.artifacts, logs, same_as=fabric.spine, interfaces=interfaces
                )
            )
        try:
            handle.wait()
            outcome = "completed"
        except AllreduceAborted as error:
            outcome = str(error)
        return outcome, exact(comm.allreduce(inputs(rank, 20_000)), 20_000)

    try:
        results = on_ranks(d, fabric, "cut", work)
        for outcome, next_exact in results:  # type: ignore[misc]
            assert outcome.startswith("switch restarted: switch spine restarted"), outcome
            assert next_exact
    finally:
        for sw in restarted:
            stop(sw.process)


def test_a_restarted_daemon_finds_the_tree_and_its_ranks_go_on(
    fabric: Fabric, controller: Callable[[], Daemon]
) -> None:
    d = controller()
    first_done = threading.Barrier(WORLD, timeout=60)

    def work(comm: Communicator, rank: int) -> tuple[bool, bool]:
        before = exact(comm.allreduce(inputs(rank, 5000)), 5000)
        first_done.wait()
        if rank == 0:
            d.stop()
            d.start()
        first_done.wait()
        return before, exact(comm.allreduce(inputs(rank, 5000)), 5000)

    assert on_ranks(d, fabric, "kept", work) == [(True, True)] * WORLD
    assert "recovered job 'kept' as a tree rooted at spine" in d.log.read_text()


def test_a_tree_that_finds_a_leaf_full_is_refused_naming_the_leaf(
    fabric: Fabric, controller: Callable[[], Daemon]
) -> None:
    d = controller()
    # Jobs of leaf2's own take every slot of its pool (the program's 2048).
    hog = ("--world-size", "1", "--switch-name", "leaf2", "--pool-size", "1024", "--controller", d.listen)
    assert cli("job", "create", "hog1", *hog).code == 0 and cli("job", "create", "hog2", *hog).code == 0
    errors: list[str] = []

    def rank(r: int) -> None:
        try:
            Communicator.join(d.listen, "wide", r, WORLD, address=(fabric.worker_ips[r], 0), join_timeout=30)
        except JoinError as error:
            errors.append(str(error))

    with ThreadPoolExecutor(WORLD) as pool:
        list(pool.map(rank, range(WORLD)))
    assert len(errors) == WORLD, errors
    assert all("switch leaf2 has no room for it" in e for e in errors), errors
    listed = cli("job", "list", "--controller", d.listen, "--json").out
    assert '"wide"' not in listed and '"hog1"' in listed
