"""All-reduce through the real p4reduce-switch and controller daemon: exact ints, bounded floats, loss.

Workers are threads with their own Communicator and their own 127.0.0.x
address, joined through the controller's job API, exactly as processes
would be.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest

from contracts import jobapi_pb2 as pb
from contracts import jobapi_pb2_grpc as pb_grpc
from contracts.protocol import UDP_PORT, MsgType
from hostlib import (
    AllreduceError,
    AllreduceMismatch,
    AllreduceTimeout,
    Communicator,
    JoinError,
    NonFiniteError,
)
from hostlib.engine import HEADER
from hostlib.launch import ROOT, Services, services
from hostlib.verify import check, make_input


@pytest.fixture(scope="module")
def lossless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with services(
        tmp_path_factory.mktemp("logs"), ROOT / "build", switch_ip="127.0.1.1", pool_size=16
    ) as svc:
        yield svc


def on_workers(
    svc: Services, job: str, world: int, work: Callable[[Communicator, int], object], first: int = 20
) -> list[object]:
    def worker(rank: int) -> object:
        with Communicator.join(
            svc.controller, job, rank, world, address=(f"127.0.0.{first + rank}", 0), join_timeout=20
        ) as comm:
            return work(comm, rank)

    with ThreadPoolExecutor(world) as pool:
        return list(pool.map(worker, range(world)))


def test_int32_is_exact_and_float32_within_the_bound(lossless: Services) -> None:
    size, world = 10_000, 3

    def work(comm: Communicator, rank: int) -> list[tuple[bool, float, float]]:
        return [
            check(
                comm.allreduce(make_input(rank, size, dtype)),
                world,
                size,
                dtype,
                k=comm.job.values_per_packet,
            )
            for dtype in ("int32", "float32", "int32")
        ]

    for per_worker in on_workers(lossless, "exact", world, work):
        assert all(ok for ok, _, _ in per_worker), per_worker


def test_a_missing_peer_gives_a_timeout_not_a_hang(lossless: Services) -> None:
    joined = threading.Barrier(2)
    timed_out = threading.Event()

    def work(comm: Communicator, rank: int) -> str:
        joined.wait()
        if rank == 1:
            timed_out.wait(20)  # alive and in the job (leaving would be news), but never calling
            return "stayed silent"
        comm.engine.engine.progress_timeout = 1.0
        with pytest.raises(AllreduceTimeout, match="a peer may have died"):
            comm.allreduce(np.ones(1000, dtype=np.int32))
        timed_out.set()
        return "timed out"

    assert on_workers(lossless, "silent-peer", 2, work, first=30) == ["timed out", "stayed silent"]


def test_the_controller_refuses_a_join_with_the_wrong_world_size(lossless: Services) -> None:
    def work(comm: Communicator, rank: int) -> None:
        with pytest.raises(JoinError, match="world"):
            Communicator.join(lossless.controller, "sized", 1, 5, address=("127.0.0.45", 0), join_timeout=2)

    on_workers(lossless, "sized", 1, work, first=40)


def test_results_stay_correct_with_five_percent_loss(tmp_path: Path) -> None:
    size, world = 20_000, 2
    with services(
        tmp_path, ROOT / "build", switch_ip="127.0.2.1", pool_size=16, drop_rate=0.05, drop_rate_out=0.05
    ) as svc:

        def work(comm: Communicator, rank: int) -> tuple[bool, bool, int]:
            k = comm.job.values_per_packet
            int_ok = check(comm.allreduce(make_input(rank, size, "int32")), world, size, "int32", k=k)[0]
            float_ok = check(comm.allreduce(make_input(rank, size, "float32")), world, size, "float32", k=k)[
                0
            ]
            in_place_ok = True
            for dtype in ("int32", "float32"):  # in place: each block's DATA, resent or not, is its input's
                data = make_input(rank, size, dtype)
                comm.allreduce(data, out=data)
                in_place_ok = in_place_ok and check(data, world, size, dtype, k=k)[0]
            return int_ok and in_place_ok, float_ok, comm.stats().retransmissions

        reports = on_workers(svc, "lossy", world, work, first=50)
    assert all(int_ok and float_ok for int_ok, float_ok, _ in reports)
    assert sum(retx for _, _, retx in reports) > 0


# ---------------------------------------------------------------------------------------- protocol v2


def test_ranks_whose_calls_differ_all_fail_at_once_and_the_next_call_is_exact(lossless: Services) -> None:
    """1000 vs 1001 elements; float32 vs int32; a rank that skips a call; NaN under nonfinite='raise'."""
    world = 3
    barrier = threading.Barrier(world)

    def work(comm: Communicator, rank: int) -> list[str]:
        k, seen = comm.job.values_per_packet, []

        def attempt(array: np.ndarray, **options: str) -> None:
            barrier.wait()
            started = time.monotonic()
            try:
                comm.allreduce(array, **options)  # type: ignore[arg-type]
                seen.append("no error")
            except (AllreduceMismatch, NonFiniteError) as error:
                seen.append(f"{type(error).__name__} in {time.monotonic() - started:.2f} s")
            good = make_input(rank, 5000, "int32")
            barrier.wait()
            ok, _, _ = check(comm.allreduce(good), world, 5000, "int32", k=k)
            seen.append("next call exact" if ok else "next call WRONG")

        ones = np.ones(1000, dtype=np.float32)
        attempt(np.ones(1001, dtype=np.float32) if rank == 2 else ones)  # same number of packets
        attempt(np.ones(1000, dtype=np.int32) if rank == 1 else ones)
        attempt(np.ones(3000, dtype=np.float32) if rank == 0 else ones)  # rank 0 is a call ahead
        poisoned = ones.copy()
        if rank == 1:
            poisoned[500] = np.nan
        attempt(poisoned, nonfinite="raise")
        return seen

    for seen in on_workers(lossless, "mismatch", world, work, first=60):
        outcomes, nexts = seen[0::2], seen[1::2]
        assert all(name.startswith(("AllreduceMismatch", "NonFiniteError")) for name in outcomes), seen
        assert all(float(name.split(" in ")[1][:-2]) < 1.0 for name in outcomes), seen
        assert nexts == ["next call exact"] * 4, seen


def test_one_ranks_nan_and_inf_come_back_in_their_blocks_on_every_rank(lossless: Services) -> None:
    world, size = 3, 4000

    def work(comm: Communicator, rank: int) -> tuple[np.ndarray, int]:
        data = make_input(rank, size, "float32")
        if rank == 0:
            data[100] = np.nan
        if rank == 2:
            data[3000] = np.inf
        return comm.allreduce(data), comm.job.values_per_packet

    outcomes = on_workers(lossless, "nan", world, work, first=70)
    results = [result for result, _ in outcomes]
    k = outcomes[0][1]  # the switch's K: blocks are K values
    for result in results:
        assert isinstance(result, np.ndarray)
        bad = np.flatnonzero(~np.isfinite(result))
        assert set(bad // k) == {100 // k, 3000 // k}, "exactly the affected blocks"
        assert np.isnan(result[100]) and result[3000] == np.inf
        expected = sum(make_input(r, size, "float32").astype(np.float64) for r in range(world))
        fine = np.isfinite(result)
        assert np.allclose(result[fine], expected[fine], rtol=1e-5, atol=1e-6)
    assert all(np.array_equal(results[0], r, equal_nan=True) for r in results)


def unknown_job_drops(controller: str) -> int:
    """The switch's count of packets it refused for want of a job entry (UNKNOWN_JOB)."""
    with grpc.insecure_channel(controller) as channel:
        reply = pb_grpc.JobServiceStub(channel).GetCounters(pb.GetCountersRequest(), timeout=10)
    return sum(c.packets for c in reply.counters if c.counter == "ingress_drops" and c.label == "UNKNOWN_JOB")


def test_a_departed_ranks_address_is_never_trusted_again(lossless: Services) -> None:
    """After rank 2 leaves, a process on its address (with its old key) adds nothing: the switch refuses
    every DATA it sends, and the other ranks hear at once that rank 2 left."""
    left = threading.Event()
    impostor_sent = threading.Event()
    refused: list[int] = []

    def work(comm: Communicator, rank: int) -> str:
        if rank == 2:
            address, key, job_id, k = (
                comm.sock.getsockname(),
                comm.job.key,
                comm.job.job_id,
                comm.job.values_per_packet,
            )
            comm.close()  # LeaveJob: its entries go at once
            left.set()
            before = unknown_job_drops(lossless.controller)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as impostor:
                impostor.bind(address)
                values = np.full(k, 10**6, dtype=">i4").tobytes()
                for use in range(8):
                    header = HEADER.pack(MsgType.DATA, 2, job_id, use, 0, 0, use, key, 0x10000000 | k, 0)
                    impostor.sendto(header + values, comm.job.switch_address)
            deadline = time.monotonic() + 5
            while unknown_job_drops(lossless.controller) - before < 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            refused.append(unknown_job_drops(lossless.controller) - before)
            impostor_sent.set()
            return "left"
        left.wait(10)
        impostor_sent.wait(10)
        try:
            comm.allreduce(np.ones(512, dtype=np.int32))
        except AllreduceError as error:
            return str(error)
        return "completed with a departed rank"

    outcomes = on_workers(lossless, "departed", 3, work, first=80)
    assert outcomes[2] == "left"
    assert refused == [8], "every DATA from the departed rank's address is refused as UNKNOWN_JOB"
    assert outcomes[:2] == ["rank 2 left job 'departed': its peers' calls cannot finish without it"] * 2


def test_joining_from_an_address_the_switch_never_sees_is_refused(lossless: Services) -> None:
    with pytest.raises(JoinError, match="cannot join from 0.0.0.0"):
        Communicator.join(lossless.controller, "anywhere", 0, 1, address=("0.0.0.0", 0), join_timeout=2)
    channel = grpc.insecure_channel(lossless.controller)
    request = pb.JoinJobRequest(
        name="anywhere", rank=0, world_size=1, address=pb.WorkerAddress(ipv4="0.0.0.0", udp_port=9)
    )
    with pytest.raises(grpc.RpcError) as refused:
        pb_grpc.JobServiceStub(channel).JoinJob(request, timeout=5)
    channel.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "ever see as a packet's source" in refused.value.details()  # type: ignore[attr-defined]


@pytest.mark.root
def test_a_forged_result_from_the_switchs_own_address_changes_nothing(lossless: Services) -> None:
    """Spoofed from the switch's IP and port (a raw socket), right job, right use, but no key."""
    world = 2
    go = threading.Event()
    forged_counts: list[int] = []

    def work(comm: Communicator, rank: int) -> bool:
        data = make_input(rank, 2000, "int32")
        if rank == 0:
            handle = comm.allreduce_async(data)
            time.sleep(0.2)  # its DATA is at the switch, waiting for rank 1's
            for use in range(16):
                forge_result(comm, lossless.switch_address, use)
            time.sleep(0.2)
            go.set()
            result = handle.wait(10)
            forged_counts.append(comm.stats().forged)
        else:
            go.wait(10)
            result = comm.allreduce(data)
        return check(result, world, 2000, "int32", k=comm.job.values_per_packet)[0]

    assert on_workers(lossless, "forged", world, work, first=90) == [True, True]
    assert forged_counts and forged_counts[0] >= 16


def forge_result(comm: Communicator, switch: tuple[str, int], use: int) -> None:
    """A RESULT for `use` of call 0 to rank 0, from the switch's address, with a guessed key."""
    payload = HEADER.pack(MsgType.RESULT, 1, comm.job.job_id, use % 16, 0, 0, use, 0xDEADBEEF, 0, 0)
    payload += np.full(comm.job.values_per_packet, 7, dtype=">i4").tobytes()
    (dst_ip, dst_port), (src_ip, src_port) = comm.sock.getsockname(), switch
    udp = struct.pack("!HHHH", src_port, dst_port, 8 + len(payload), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(dst_ip))  # fmt: skip
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
        raw.sendto(ip + udp + payload, (dst_ip, 0))


def test_the_demos_switch_runs_beside_a_quick_start_switch_on_127_0_0_1(tmp_path: Path) -> None:
    """`make demo` while the CLI quick start's switch holds 127.0.0.1:20562: the demo's switch takes
    a loopback address of its own instead of failing with "Address already in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as quick_start:
        try:
            quick_start.bind(("127.0.0.1", UDP_PORT))
        except OSError:
            pass  # something holds it already: the same situation
        with services(tmp_path, ROOT / "build", pool_size=16) as svc:
            assert svc.switch_address[0] != "127.0.0.1"

            def work(comm: Communicator, rank: int) -> list[int]:
                return comm.allreduce(np.full(100, rank + 1, dtype=np.int32)).tolist()

            assert on_workers(svc, "beside", 2, work, first=52) == [[3] * 100] * 2
