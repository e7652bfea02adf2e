"""The controller against a real switch: provisioning, pipeline push, L2 entries, jobs, leases, restarts.

Every test starts its own switch (p4reduce-switch, or simple_switch_grpc when
p4c and bmv2 are installed) and, where it needs one, its own
`p4reduce-ctl serve`; aggregation is checked with real DATA datagrams from
UDP sockets on 127.0.0.x through the embedded switch's rootless port.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml
from ctl_support import (
    BMV2_ANSWERS,
    ROOT,
    CliResult,
    Daemon,
    K,
    Switch,
    Worker,
    channel_to,
    cli,
    environment,
    free_tcp_port,
    join_all,
    read_groups,
    read_keys,
    wait_until,
    write_config,
)

from contracts import jobapi_pb2 as pb
from contracts.protocol import DEFAULT_SLOT_COUNT as SLOT_COUNT
from controller.p4switch import SwitchSession
from controller.tables.l2 import L2Forwarding

RECORD_RANK = 255
SLOTS_USED = 4


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def create(d: Daemon, name: str, world: int, pool: int = 8) -> dict[str, object]:
    result = cli("job", "create", name, "--world-size", str(world), "--pool-size", str(pool),
                 "--controller", d.listen, "--json")  # fmt: skip
    assert result.code == 0, result.err
    [job] = json.loads(result.out)
    return job


def open_workers(count: int, first_ip: int) -> list[Worker]:
    return [Worker.open(rank, f"127.0.0.{first_ip + rank}") for rank in range(count)]


def vector(job: int, rank: int, slot: int) -> list[int]:
    return [(job * 1000 + rank * 100 + slot * 10 + i) * (-1) ** i for i in range(K)]


def aggregate(data: tuple[str, int], jobs: list[tuple[int, list[Worker]]]) -> None:
    """Every rank of every job sends SLOTS_USED slots, interleaved across jobs; each rank gets every sum."""
    for slot in range(SLOTS_USED):
        for job_id, workers in jobs:
            for w in workers:
                w.send(data, job_id, slot, vector(job_id, w.rank, slot))
    for job_id, workers in jobs:
        expected = {
            slot: [sum(vector(job_id, r, slot)[i] for r in range(len(workers))) for i in range(K)]
            for slot in range(SLOTS_USED)
        }
        for w in workers:
            assert w.results(SLOTS_USED) == expected, f"job {job_id} rank {w.rank}"


def close(*groups: list[Worker]) -> None:
    for workers in groups:
        for w in workers:
            w.sock.close()


def counters(d: Daemon, *args: str) -> dict[tuple[str, str], int]:
    result = cli("counters", "--controller", d.listen, "--json", *args)
    assert result.code == 0, result.err
    return {(c["counter"], c["label"]): c["packets"] for c in json.loads(result.out)}


# ---- switch-level commands -------------------------------------------------------------------------


def test_provision_installs_the_topology_and_is_idempotent(switch: Switch, tmp_path: Path) -> None:
    config = write_config(switch, tmp_path / "lab.yaml")
    first = cli("provision", "--config", str(config), "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out) == [
        {"switch": "sw1", "pipeline": "pushed", "l2_entries": 1, "flood_ports": [1, 2], "updates": 4}
    ]
    agg = ip(switch.udp_address or "10.0.0.254")
    assert read_keys(switch, "MyIngress.l2_forward") == [(0x020000000009,)]
    assert read_keys(switch, "MyIngress.agg_addresses") == [(agg,)]
    assert read_keys(switch, "MyIngress.arp_responder") == [(agg,)]
    assert read_groups(switch) == {1: [(1, 0), (2, 0)]}
    again = cli("provision", "--config", str(config), "--json")
    assert json.loads(again.out)[0] | {"pipeline": "?"} == json.loads(first.out)[0] | {
        "pipeline": "?",
        "updates": 0,
    }
    assert json.loads(again.out)[0]["pipeline"] == "unchanged"


def test_a_switch_with_an_ecn_threshold_gets_it_on_every_port_it_knows(
    switch: Switch, tmp_path: Path
) -> None:
    config = write_config(switch, tmp_path / "lab.yaml")
    data = yaml.safe_load(config.read_text())
    data["switches"][0]["ecn_threshold"] = 20
    config.write_text(yaml.safe_dump(data))
    assert cli("provision", "--config", str(config)).code == 0
    assert read_keys(switch, "MyEgress.ecn_threshold") == [(1,), (2,)]  # the host's port and the default
    data["switches"][0]["ecn_threshold"] = 30  # changed: modified in place, nothing added
    config.write_text(yaml.safe_dump(data))
    again = cli("provision", "--config", str(config), "--json")
    assert json.loads(again.out)[0]["updates"] == 2
    assert read_keys(switch, "MyEgress.ecn_threshold") == [(1,), (2,)]


def test_pipeline_push_is_skipped_when_the_cookie_matches(switch: Switch) -> None:
    files = ["--p4info", str(switch.artifacts.p4info), "--config", str(switch.artifacts.device_config)]
    first = cli("pipeline", "push", "--switch", switch.address, *files, "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out)[0]["pipeline"] == "pushed"
    second = cli("pipeline", "push", "--switch", switch.address, *files, "--json")
    assert json.loads(second.out)[0]["pipeline"] == "unchanged"
    forced = cli("pipeline", "push", "--switch", switch.address, *files, "--force", "--json")
    assert json.loads(forced.out)[0]["pipeline"] == "pushed"


def push(switch: Switch, device_config: Path, *extra: str) -> CliResult:
    return cli("pipeline", "push", "--switch", switch.address,
               "--p4info", str(switch.artifacts.p4info), "--config", str(device_config), *extra)  # fmt: skip


def one_line_error(result: CliResult) -> str:
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert result.err.startswith("p4reduce-ctl: error: ")
    return result.err


def nothing_pushed(switch: Switch) -> bool:
    return "has no pipeline" in cli("fwd", "list", "--switch", switch.address).err


def test_a_device_config_that_is_no_program_is_refused_unpushed(switch: Switch, tmp_path: Path) -> None:
    # bmv2 would accept these bytes and fail every read later; the controller looks at the file first.
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"not": "a program"}')
    err = one_line_error(push(switch, bogus))
    assert f"device config {bogus} is neither a bmv2 JSON from p4c" in err
    assert nothing_pushed(switch)


def test_a_device_config_of_another_program_is_refused_unpushed(switch: Switch, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    document = json.loads(switch.artifacts.device_config.read_text())
    text = json.dumps(document).replace("MyIngress.l2_forward", "MyIngress.l3_forward")
    other.write_text(text)
    err = one_line_error(push(switch, other))
    assert "does not match the P4Info: it has no MyIngress.l2_forward" in err
    assert nothing_pushed(switch)


def test_a_device_config_for_the_other_target_is_refused_unpushed(switch: Switch) -> None:
    other = "p4reduce-switch" if switch.target == "bmv2" else "bmv2"
    err = one_line_error(push(switch, switch.artifacts.device_config, "--target", other))
    assert f"but the switch is {other}, which runs" in err
    assert nothing_pushed(switch)


def test_a_device_config_the_switch_cannot_run_is_one_line_with_either_answer(
    switch: Switch, tmp_path: Path
) -> None:
    """A file that looks right but does not run: the specification's switch refuses the push; bmv2 takes
    it and fails the first read, which the controller makes right after pushing."""
    schema = fy.P4Schema(switch.artifacts.p4info)
    names = [
        obj.name
        for objs in (schema.tables, schema.actions, schema.counters, schema.registers)
        for obj in objs
    ]
    if switch.target == "bmv2":
        document: dict[str, object] = {"header_types": [], "pipelines": [], "names": names}
    else:
        document = {"format": "p4reduce-softswitch-program", "version": 1, "program": {"names": names}}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document))
    err = one_line_error(push(switch, broken))
    if switch.target in BMV2_ANSWERS:
        assert f"switch {switch.address} accepted the pipeline but cannot use it (UNKNOWN: " in err
        assert "Error when reading table entries from target" in err
    else:
        assert f"switch {switch.address} refused the pipeline: INVALID_ARGUMENT: " in err
        assert nothing_pushed(switch)


def test_an_absent_group_or_entry_read_by_key_is_absent_with_either_answer(switch: Switch) -> None:
    """bmv2 answers NOT_FOUND to a group id nobody inserted and nothing to an absent table key."""
    files = ["--p4info", str(switch.artifacts.p4info), "--config", str(switch.artifacts.device_config)]
    assert cli("pipeline", "push", "--switch", switch.address, *files).code == 0

    async def read_absent() -> tuple[list[object], list[object]]:
        async with SwitchSession(switch.address, switch.address, require_primary=False) as session:
            groups = await session.read(fy.P4MulticastGroupEntry(77))
            entries = await session.read(L2Forwarding().entity(0x0200000000EE))
            return groups, entries

    assert asyncio.run(read_absent()) == ([], [])


def test_fwd_adds_modifies_lists_and_deletes_l2_entries(switch: Switch) -> None:
    files = ["--p4info", str(switch.artifacts.p4info), "--config", str(switch.artifacts.device_config)]
    assert cli("pipeline", "push", "--switch", switch.address, *files).code == 0
    at = ["--switch", switch.address]
    assert cli("fwd", "add", "02:00:00:00:00:aa", "3", *at).code == 0
    assert cli("fwd", "add", "02:00:00:00:00:bb", "4", *at).code == 0
    assert cli("fwd", "add", "02:00:00:00:00:aa", "5", *at).code == 0  # a new port modifies the entry
    listed = cli("fwd", "list", *at, "--json")
    assert json.loads(listed.out) == [
        {"mac": "02:00:00:00:00:aa", "port": 5},
        {"mac": "02:00:00:00:00:bb", "port": 4},
    ]
    assert cli("fwd", "delete", "02:00:00:00:00:aa", *at).code == 0
    assert read_keys(switch, "MyIngress.l2_forward") == [(0x0200000000BB,)]
    gone = cli("fwd", "delete", "02:00:00:00:00:aa", *at)
    assert (gone.code, gone.err) == (
        1,
        f"p4reduce-ctl: error: no L2 entry for 02:00:00:00:00:aa on {switch.address}\n",
    )


def test_shell_opens_p4runtime_shell_on_the_running_pipeline(switch: Switch) -> None:
    venv = ROOT / ".venv-p4rt"
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"p4runtime-shell venv {venv} is absent (scripts/p4runtime-shell.sh creates it)")
    files = ["--p4info", str(switch.artifacts.p4info), "--config", str(switch.artifacts.device_config)]
    assert cli("pipeline", "push", "--switch", switch.address, *files).code == 0
    assert cli("fwd", "add", "02:00:00:00:00:aa", "3", "--switch", switch.address).code == 0
    script = 'print("entries", len(list(table_entry["MyIngress.l2_forward"].read())))\nexit\n'
    shell = subprocess.run(
        [sys.executable, "-m", "controller", "shell", "--switch", switch.address, "--venv", str(venv)],
        input=script, capture_output=True, text=True, timeout=120, cwd=ROOT, env=environment(),
    )  # fmt: skip
    assert shell.returncode == 0, shell.stderr
    assert "entries 1" in shell.stdout


def test_switch_commands_without_a_pipeline_say_how_to_get_one(switch: Switch) -> None:
    result = cli("fwd", "list", "--switch", switch.address)
    assert result.code == 1
    assert "has no pipeline; push one with `p4reduce-ctl pipeline push`" in result.err


# ---- the daemon ------------------------------------------------------------------------------------


def test_a_running_daemon_keeps_other_writers_out(switch: Switch, daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    result = cli("fwd", "add", "02:00:00:00:00:aa", "3", "--switch", switch.address)
    assert result.code == 1
    assert "arbitration lost: another controller is primary with election id 10 (ours is 1)" in result.err
    listed = cli("fwd", "list", "--switch", switch.address, "--json")  # reading needs no mastership
    assert json.loads(listed.out) == [{"mac": "02:00:00:00:00:09", "port": 2}]
    log = d.log.read_text()
    assert "gNMI" not in log and "Traceback" not in log and " ERROR " not in log, (
        "a quiet log on a clean path"
    )


def test_the_daemons_election_id_never_ratchets(
    target: str, switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    """A command with --election-id 20 takes the switch for its duration; the daemon keeps its own 10,
    so the same command works a second time (it used to find 20 taken by the daemon itself)."""
    d = daemon()
    for mac in ("02:00:00:00:00:aa", "02:00:00:00:00:ab"):
        result = cli("fwd", "add", mac, "3", "--switch", switch.address, "--election-id", "20")
        assert result.code == 0, result.err
    log = d.log.read_text()
    assert "mastership lost to election id 20" in log and "election id 21" not in log
    if target in BMV2_ANSWERS:  # bmv2 gives mastership back to the highest id left: the daemon's 10
        assert wait_until(lambda: "primary again (election id 10)" in d.log.read_text(), timeout=10)


def test_two_jobs_get_disjoint_slots_and_aggregate_at_the_same_time(
    daemon: Callable[..., Daemon], data_plane: tuple[str, int]
) -> None:
    d = daemon()
    alpha, beta = create(d, "alpha", 2), create(d, "beta", 3)
    assert alpha["state"] == beta["state"] == "waiting"
    a_slots = range(alpha["base_slot"], alpha["base_slot"] + alpha["pool_size"])  # type: ignore[operator]
    b_slots = range(beta["base_slot"], beta["base_slot"] + beta["pool_size"])  # type: ignore[operator]
    assert not set(a_slots) & set(b_slots) and len(a_slots) == len(b_slots) == 8
    assert alpha["job_id"] != beta["job_id"] and alpha["multicast_group"] != beta["multicast_group"]
    wa, wb = open_workers(2, 21), open_workers(3, 31)
    try:
        with channel_to(d) as stub:
            answers = join_all(stub, "alpha", wa)
            join_all(stub, "beta", wb)
        assert len({a.key for a in answers}) == len(answers) and all(a.key for a in answers), "a key per rank"
        same = [pb.JobDescription(**{**{f.name: v for f, v in a.ListFields()}, "key": 0}) for a in answers]
        assert all(a == same[0] for a in same), "every rank gets the same description but for its key"
        assert answers[0].state == "active"
        assert [(w.ipv4, w.udp_port, w.switch_port) for w in answers[0].workers] == [
            (w.ip, w.port, 1) for w in wa
        ]
        assert (answers[0].switch_ipv4, answers[0].switch_udp_port) == data_plane
        aggregate(data_plane, [(int(alpha["job_id"]), wa), (int(beta["job_id"]), wb)])  # type: ignore[call-overload]
        seen = counters(d, "--job", "alpha")
        assert seen[("job_data_in", "alpha")] == 2 * SLOTS_USED
        assert seen[("job_results_out", "alpha")] == SLOTS_USED
        before = counters(d)[("ingress_drops", "WRONG_SENDER")]
        wa[0].send(data_plane, int(beta["job_id"]), 5, vector(0, 0, 5))  # type: ignore[call-overload]
        assert all(w.nothing_arrives(0.3) for w in wb), "a job's slots take only its own workers' packets"
        assert counters(d)[("ingress_drops", "WRONG_SENDER")] == before + 1
    finally:
        close(wa, wb)


def test_deleting_one_job_leaves_the_other_untouched(
    switch: Switch, daemon: Callable[..., Daemon], data_plane: tuple[str, int]
) -> None:
    d = daemon()
    alpha, beta = create(d, "alpha", 2), create(d, "beta", 3)
    a_id, b_id = int(alpha["job_id"]), int(beta["job_id"])  # type: ignore[call-overload]
    wa, wb = open_workers(2, 21), open_workers(3, 31)
    try:
        with channel_to(d) as stub:
            join_all(stub, "alpha", wa)
            join_all(stub, "beta", wb)
        deleted = cli("job", "delete", "alpha", "--controller", d.listen)
        assert (deleted.code, deleted.out) == (0, "deleted job alpha\n")
        assert read_keys(switch, "MyIngress.job_table") == [(b_id, r) for r in (0, 1, 2, RECORD_RANK)]
        assert read_keys(switch, "MyEgress.result_dest") == [(b_id, r) for r in (0, 1, 2)]
        assert sorted(read_groups(switch)) == [1, int(beta["multicast_group"])]  # type: ignore[call-overload]
        aggregate(data_plane, [(b_id, wb)])
        before = counters(d)[("ingress_drops", "UNKNOWN_JOB")]
        for w in wa:
            w.send(data_plane, a_id, 0, vector(a_id, w.rank, 0))
        assert all(w.nothing_arrives() for w in wa)
        assert counters(d)[("ingress_drops", "UNKNOWN_JOB")] == before + 2
        listed = cli("job", "list", "--controller", d.listen, "--json")
        assert [j["name"] for j in json.loads(listed.out)] == ["beta"]
    finally:
        close(wa, wb)


def test_a_restarted_controller_lists_the_same_jobs_and_does_not_double_allocate(
    daemon: Callable[..., Daemon], data_plane: tuple[str, int]
) -> None:
    d = daemon()
    alpha = create(d, "alpha", 2)
    create(d, "beta", 3, pool=100)
    wa = open_workers(2, 21)
    try:
        with channel_to(d) as stub:
            join_all(stub, "alpha", wa)
        before = json.loads(cli("job", "list", "--controller", d.listen, "--json").out)
        d.stop()
        d2 = daemon()
        after = json.loads(cli("job", "list", "--controller", d2.listen, "--json").out)
        assert after == before
        assert [(j["name"], j["state"]) for j in after] == [("alpha", "active"), ("beta", "waiting")]
        gamma = create(d2, "gamma", 2)
        used = {s for j in after for s in range(j["base_slot"], j["base_slot"] + j["pool_size"])}
        assert not used & set(range(gamma["base_slot"], gamma["base_slot"] + gamma["pool_size"]))  # type: ignore[operator]
        assert gamma["job_id"] > max(j["job_id"] for j in after)
        aggregate(data_plane, [(int(alpha["job_id"]), wa)])  # type: ignore[call-overload]
        with channel_to(d2) as stub:  # the recovered job's lease runs again
            assert stub.Heartbeat(pb.HeartbeatRequest(name="alpha", rank=1)).lease_seconds == 30
    finally:
        close(wa)


def test_a_job_whose_workers_stop_heartbeating_is_reclaimed(
    switch: Switch, daemon: Callable[..., Daemon]
) -> None:
    d = daemon("--lease", "2")
    create(d, "idle", 2)  # nobody joins: an operator's job has no lease
    workers = open_workers(1, 41)
    try:
        with channel_to(d) as stub:
            [job] = join_all(stub, "solo", workers)
            assert job.lease_seconds == 2
            for _ in range(10):  # 3 s of heartbeats: longer than the lease, the job stays
                assert stub.Heartbeat(pb.HeartbeatRequest(name="solo", rank=0)).lease_seconds == 2
                time.sleep(0.3)
            assert {j.name for j in stub.ListJobs(pb.Empty()).jobs} == {"idle", "solo"}
            assert wait_until(
                lambda: {j.name for j in stub.ListJobs(pb.Empty()).jobs} == {"idle"}, timeout=10
            )
            with pytest.raises(grpc.RpcError) as gone:
                stub.Heartbeat(pb.HeartbeatRequest(name="solo", rank=0))
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert [k for k in read_keys(switch, "MyIngress.job_table") if k[0] == job.job_id] == []
        assert sorted(read_groups(switch)) == [1]
        assert create(d, "next", 2, pool=job.pool_size)["base_slot"] == job.base_slot  # its slots are free
    finally:
        close(workers)


def test_the_last_rank_to_leave_deletes_the_job(switch: Switch, daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    workers = open_workers(2, 51)
    try:
        with channel_to(d) as stub:
            [job, _] = join_all(stub, "done", workers)
            stub.LeaveJob(pb.LeaveJobRequest(name="done", rank=0))
            assert stub.GetJob(pb.JobRef(name="done")).state == "active"
            with pytest.raises(grpc.RpcError) as again:
                stub.JoinJob(
                    pb.JoinJobRequest(name="done", rank=0, world_size=2, address=workers[0].address())
                )
            assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            stub.LeaveJob(pb.LeaveJobRequest(name="done", rank=1))
            assert list(stub.ListJobs(pb.Empty()).jobs) == []
        assert [k for k in read_keys(switch, "MyIngress.job_table") if k[0] == job.job_id] == []
    finally:
        close(workers)


def test_ranks_leaving_at_once_still_delete_the_job(switch: Switch, daemon: Callable[..., Daemon]) -> None:
    """Every rank of a 4-rank job calls LeaveJob at the same moment (the end of a torchrun job): each
    sees others still present when it starts, yet the job must not outlive its last rank."""
    d = daemon()
    workers = open_workers(4, 61)
    try:
        with channel_to(d) as stub:
            [job, *_] = join_all(stub, "together", workers)
            leaving = [stub.LeaveJob.future(pb.LeaveJobRequest(name="together", rank=r)) for r in range(4)]
            for call in leaving:
                call.result(timeout=10)
            assert list(stub.ListJobs(pb.Empty()).jobs) == []
        assert [k for k in read_keys(switch, "MyIngress.job_table") if k[0] == job.job_id] == []
    finally:
        close(workers)


def test_pool_exhaustion_is_one_clear_line(daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    create(d, "big", 2, pool=SLOT_COUNT - 8)
    result = cli("job", "create", "more", "--world-size", "2", "--pool-size", "16", "--controller", d.listen)
    assert (result.code, result.err) == (
        1,
        "p4reduce-ctl: error: cannot allocate 16 contiguous slots: 8 of 2048 slots are free, "
        "the largest free range is 8 slots (2040..2047)\n",
    )
    assert create(d, "fits", 2, pool=8)["base_slot"] == SLOT_COUNT - 8


def test_bad_requests_are_refused_with_their_reason(daemon: Callable[..., Daemon]) -> None:
    d = daemon()
    for command in (["show", "nope"], ["delete", "nope"]):
        result = cli("job", *command, "--controller", d.listen)
        assert (result.code, result.err) == (1, "p4reduce-ctl: error: unknown job 'nope'\n")
    create(d, "pair", 2)
    dup = cli("job", "create", "pair", "--world-size", "2", "--controller", d.listen)
    assert dup.err == "p4reduce-ctl: error: job 'pair' already exists\n"
    bad_name = cli("job", "create", "a b", "--world-size", "2", "--controller", d.listen)
    assert "job name 'a b' must be 1-64 characters" in bad_name.err
    worker = pb.WorkerAddress(ipv4="127.0.0.61", udp_port=40000)
    other = pb.WorkerAddress(ipv4="127.0.0.62", udp_port=1)
    cases = [
        (pb.JoinJobRequest(name="pair", rank=0, world_size=3, address=worker),
         grpc.StatusCode.INVALID_ARGUMENT, "job 'pair' has world size 2, not 3"),
        (pb.JoinJobRequest(name="pair", rank=2, world_size=2, address=worker),
         grpc.StatusCode.OUT_OF_RANGE, "rank 2 is outside 0..1 of job 'pair'"),
        (pb.JoinJobRequest(name="nope", rank=0, address=worker),
         grpc.StatusCode.NOT_FOUND, "unknown job 'nope' (give world_size to create it)"),
        (pb.JoinJobRequest(name="pair", rank=0, world_size=2, address=pb.WorkerAddress(ipv4="x", udp_port=1)),
         grpc.StatusCode.INVALID_ARGUMENT, "worker address: 'x' is not an IPv4 address"),
        (pb.JoinJobRequest(name="pair", rank=1, world_size=2, address=worker, timeout_seconds=0.2),
         grpc.StatusCode.DEADLINE_EXCEEDED, "1 of 2 ranks joined job 'pair' within 0.2 s (missing ranks 0)"),
        (pb.JoinJobRequest(name="pair", rank=1, world_size=2, address=other),
         grpc.StatusCode.ALREADY_EXISTS, "rank 1 of job 'pair' already joined from 127.0.0.61:40000"),
        (pb.JoinJobRequest(name="pair", rank=0, world_size=2, address=worker),
         grpc.StatusCode.ALREADY_EXISTS, "127.0.0.61:40000 already joined job 'pair' as rank 1"),
    ]  # fmt: skip
    with channel_to(d) as stub:
        for request, code, message in cases:
            with pytest.raises(grpc.RpcError) as error:
                stub.JoinJob(request, timeout=10)
            assert (error.value.code(), message in error.value.details()) == (code, True), (
                error.value.details()
            )
        assert [j.name for j in stub.ListJobs(pb.Empty()).jobs] == ["pair"], "a refused join creates nothing"


def test_a_token_guards_the_job_api(daemon: Callable[..., Daemon]) -> None:
    d = daemon("--token", "s3cret", token="s3cret")
    refused = cli("job", "list", "--controller", d.listen)
    assert (refused.code, refused.err) == (
        1,
        "p4reduce-ctl: error: missing or wrong token (authorization: Bearer T)\n",
    )
    wrong = cli("job", "list", "--controller", d.listen, "--token", "guess")
    assert wrong.code == 1
    assert cli("job", "list", "--controller", d.listen, "--token", "s3cret").code == 0


def test_tls_serves_the_job_api_to_clients_that_trust_the_certificate(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    d = daemon("--tls-cert", str(cert), "--tls-key", str(key), tls_ca=cert)
    assert (
        cli("job", "create", "t", "--world-size", "1", "--controller", d.listen, "--tls-ca", str(cert)).code
        == 0
    )
    plain = cli("job", "list", "--controller", d.listen)
    assert plain.code == 1 and "unreachable" in plain.err


def test_serve_reports_an_unreachable_switch_in_one_line(switch: Switch, tmp_path: Path) -> None:
    config = write_config(switch, tmp_path / "lab.yaml")
    config.write_text(config.read_text().replace(switch.address, f"127.0.0.1:{free_tcp_port()}"))
    result = cli("serve", "--config", str(config), "--listen", f"127.0.0.1:{free_tcp_port()}")
    assert result.code == 1
    assert result.err.endswith("is unreachable (is the switch running?)\n") and result.err.count("\n") == 1
