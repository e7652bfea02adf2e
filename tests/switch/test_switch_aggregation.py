"""End to end: the daemon runs p4reduce.p4, a finsy controller sets a job up, workers all-reduce.

This is the path the controller and host library use: `p4reduce-switch --no-p4
... --udp-port 1@ADDR:20562`, pipeline pushed over P4Runtime.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import finsy as fy
import pytest
from switch_aggregation import K, Worker, data_packet, job_entities, parse
from switch_support import free_tcp_port
from test_switch_daemon import command, environment, wait_for_grpc

from contracts.protocol import UDP_PORT, MsgType
from hostlib.launch import free_loopback_address
from softswitch.dataplane.ports import host_mac

JOB, GROUP = 7, 2


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """`p4reduce-switch --no-p4` with UDP port 1 on AGG:20562: (gRPC address, AGG)."""
    address = f"127.0.0.1:{free_tcp_port()}"
    agg = free_loopback_address()
    process = subprocess.Popen(
        command(
            "--no-p4",
            "--device-id",
            "1",
            "--grpc-server-addr",
            address,
            "--udp-port",
            f"1@{agg}:{UDP_PORT}",
            "--log-file",
            str(tmp_path / "sw.log"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    try:
        wait_for_grpc(address, process)
        yield address, agg
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
        assert process.returncode == 0, stderr


def workers_on_loopback(count: int) -> tuple[list[Worker], list[socket.socket]]:
    sockets, workers = [], []
    for rank in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((f"127.0.0.{11 + rank}", 0))
        sock.settimeout(5)
        ip, port = sock.getsockname()
        sockets.append(sock)
        workers.append(Worker(rank, 1, ip, port, int.from_bytes(host_mac(socket.inet_aton(ip)), "big")))
    return workers, sockets


async def configure(address: str, p4info: Path, program: Path, entities: list[object]) -> dict[str, int]:
    options = fy.SwitchOptions(p4info=p4info, p4blob=program, device_id=1)
    async with fy.Switch("sw", address, options) as sw:
        await sw.write([+e for e in entities])  # type: ignore[operator]
        return {"job_table": len([e async for e in sw.read(fy.P4TableEntry("job_table"))])}


async def counters(address: str, p4info: Path, program: Path) -> dict[str, int]:
    options = fy.SwitchOptions(p4info=p4info, p4blob=program, device_id=1)
    async with fy.Switch("sw", address, options) as sw:
        out = {}
        for name in ("job_data_in", "job_results_out"):
            [entry] = [c async for c in sw.read(fy.P4CounterEntry(name, index=JOB))]
            out[name] = entry.data.packet_count
        return out


def test_three_workers_get_the_sum_over_udp_ports(
    compiled: tuple[Path, Path], switch: tuple[str, int]
) -> None:
    program, p4info = compiled
    address, agg = switch
    workers, sockets = workers_on_loopback(3)
    try:
        seen = asyncio.run(configure(address, p4info, program, job_entities(JOB, workers, agg, GROUP)))
        assert seen == {"job_table": 3}
        vectors = [[(rank + 1) * (i - 16) for i in range(K)] for rank in range(3)]
        for rank, sock in enumerate(sockets):
            sock.sendto(
                data_packet(JOB, rank, slot=1, set_=0, values=vectors[rank], exp=130 + rank, seq=9),
                (agg, UDP_PORT),
            )
        for rank, sock in enumerate(sockets):
            payload, sender = sock.recvfrom(2048)
            result = parse(payload)
            assert sender == (agg, UDP_PORT)
            assert result["msg_type"] == MsgType.RESULT and result["job"] == JOB
            assert (result["slot"], result["set"], result["seq"]) == (1, 0, 9)
            assert result["key"] == workers[rank].key  # each rank's result carries its own key
            assert result["exp"] == 132  # the maximum exponent
            assert result["values"] == [sum(v[i] for v in vectors) for i in range(K)]
        assert asyncio.run(counters(address, p4info, program)) == {"job_data_in": 3, "job_results_out": 1}
    finally:
        for sock in sockets:
            sock.close()


WORKER_SCRIPT = """
import json, socket, sys
sys.path.insert(0, sys.argv[1])
from switch_aggregation import data_packet, parse
rank, values = int(sys.argv[2]), json.loads(sys.argv[3])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("0.0.0.0", 30000))
sock.settimeout(1)
packet = data_packet(7, rank, slot=0, set_=0, values=values, exp=129, seq=1)
for attempt in range(10):  # retransmit like a worker: ARP may still be resolving
    sock.sendto(packet, ("10.77.0.100", 20562))
    try:
        print(json.dumps(parse(sock.recvfrom(2048)[0])))
        break
    except TimeoutError:
        continue
"""


@pytest.mark.root
def test_two_hosts_in_namespaces_aggregate_through_raw_ports(
    compiled: tuple[Path, Path], tmp_path: Path
) -> None:
    """`p4reduce-switch PROGRAM -i 1@.. -i 2@..`: ARP answered by the program, sums multicast to both."""
    from switch_netns import two_hosts

    program, p4info = compiled
    with two_hosts() as (ends, hosts):
        address = f"127.0.0.1:{free_tcp_port()}"
        pcaps = tmp_path / "pcaps"
        pcaps.mkdir()
        process = subprocess.Popen(
            command(str(program), "--p4info", str(p4info), "--device-id", "1", "--grpc-server-addr", address,
                    "-i", f"1@{ends[0]}", "-i", f"2@{ends[1]}", "--pcap", str(pcaps)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(),
        )  # fmt: skip
        try:
            wait_for_grpc(address, process)
            workers = [Worker(rank, rank + 1, h.ip, 30000, int(h.mac.replace(":", ""), 16))
                       for rank, h in enumerate(hosts)]  # fmt: skip
            entities = job_entities(JOB, workers, "10.77.0.100", GROUP)
            entities.append(fy.P4TableEntry(
                "arp_responder", match=fy.P4TableMatch({"hdr.arp.target_proto_addr": "10.77.0.100"}),
                action=fy.P4TableAction("arp_reply", mac=0x02AA00000064)))  # fmt: skip
            asyncio.run(configure(address, p4info, program, entities))
            vectors = [[i for i in range(K)], [1000 - i for i in range(K)]]
            runs = [
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        host.namespace,
                        sys.executable,
                        "-c",
                        WORKER_SCRIPT,
                        str(Path(__file__).parent),
                        str(rank),
                        json.dumps(vectors[rank]),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=environment(),
                )  # fmt: skip
                for rank, host in enumerate(hosts)
            ]
            outputs = [run.communicate(timeout=30) for run in runs]
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=10)
        assert process.returncode == 0, stderr
        for (stdout, stderr_worker), rank in zip(outputs, range(2), strict=True):
            assert stdout.strip(), stderr_worker
            result = json.loads(stdout)
            assert result["msg_type"] == MsgType.RESULT and result["rank"] in (0, 1), rank
            assert result["values"] == [1000] * K and result["exp"] == 129
        assert (pcaps / "1_in.pcap").exists() and (pcaps / "2_out.pcap").exists()
