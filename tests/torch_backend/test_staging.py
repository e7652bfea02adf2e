"""The staged pipeline of device tensors (hostlib.torch.staging), run on host memory against a real switch.

The CUDA path cuts a collective into pieces, starts each piece's all-reduce
from a staging thread once its copy has landed, and writes each result back
as it comes: all of that is the same with `HostLanes`, whose copies are
plain host copies, so it runs here on 3 worker threads (each with its own
Communicator and address) against the real switch and controller. With a
GPU, the CUDA lanes run the same checks (skipped with the reason otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from contracts.jobapi_metadata import CREDENTIAL_ENV  # noqa: E402
from hostlib import Communicator  # noqa: E402
from hostlib.launch import ROOT, Services, services  # noqa: E402
from hostlib.torch.staging import PIECE_ELEMENTS, StagedSums, piece_bounds  # noqa: E402
from tests.hostlib.test_through_switch import on_workers  # noqa: E402
from tests.torch_backend.devices import DEVICES  # noqa: E402

WORLD = 3


@pytest.mark.parametrize("total", [0, 1, 191, 192, 193, 383, 384, 385, 1000, 5 * 192])
def test_pieces_cover_the_collective_and_only_the_last_differs_from_the_piece_size(total: int) -> None:
    bounds = piece_bounds(total, 192)
    assert [b for _, b in bounds[:-1]] == [a for a, _ in bounds[1:]]  # contiguous
    assert (bounds[0][0], bounds[-1][1]) == (0, total) if total else bounds == []
    assert all(b - a == 192 for a, b in bounds[:-1])
    if len(bounds) > 1:
        assert 192 < bounds[-1][1] - bounds[-1][0] <= 2 * 192


def test_collectives_of_different_sizes_differ_in_some_piece_both_have() -> None:
    """What makes ranks that disagree on the size all raise AllreduceMismatch (the cut's one blind spot:
    a collective of exactly one piece against a larger one)."""
    piece = 192
    for a in range(1, 5 * piece):
        for b in range(a + 1, 5 * piece):
            if a == piece:
                continue
            sizes_a = [e - s for s, e in piece_bounds(a, piece)]
            sizes_b = [e - s for s, e in piece_bounds(b, piece)]
            assert any(x != y for x, y in zip(sizes_a, sizes_b, strict=False)), (a, b)


def test_the_default_piece_ends_on_block_boundaries_of_every_k_and_a_last_piece_is_one_call() -> None:
    assert all(PIECE_ELEMENTS % (2 * k) == 0 for k in (32, 64, 128, 256, 512, 1024))  # 16 bits: 2K
    assert 2 * PIECE_ELEMENTS <= (65536 - 1024) * 32  # K = 32, the largest pool's priming


@pytest.fixture(scope="module")
def switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """A switch and controller of this module's own (loopback address 127.0.44.1)."""
    logs = tmp_path_factory.mktemp("staging")
    with services(logs, ROOT / "build", switch_ip="127.0.44.1", pool_size=16) as svc:
        yield svc


def on_ranks(svc: Services, job: str, work: Callable[[Communicator, int], Any]) -> list[Any]:
    return on_workers(svc, job, WORLD, work, first=70)


def values(rank: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(rank + 11)
    if dtype == torch.int32:
        return torch.randint(-(2**31), 2**31 - 1, (n,), generator=generator, dtype=torch.int32)
    spread = 10 ** (torch.rand(n, generator=generator) * 6 - 3)
    return (torch.randn(n, generator=generator) * spread).to(dtype)


def whole_sum(comm: Communicator, tensor: torch.Tensor, op: str) -> torch.Tensor:
    """What the CPU path computes (backend._through_switch): one call of the whole tensor, bfloat16 as its
    bits, float16 and bfloat16 at 16 bits per value (the backend's default)."""
    bits = 16 if tensor.dtype in (torch.float16, torch.bfloat16) else 32
    if tensor.dtype == torch.bfloat16:
        array = tensor.view(torch.int16).numpy().view(np.uint16)
        result = comm.allreduce(array, op=op, logical_dtype="bfloat16", wire_bits=bits)  # type: ignore[arg-type]
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(comm.allreduce(tensor.numpy(), op=op, wire_bits=bits))  # type: ignore[arg-type]


@pytest.mark.parametrize("device", DEVICES)
def test_staged_sums_are_the_cpu_paths_bit_for_bit_piece_by_piece(switch: Services, device: str) -> None:
    n = 1000  # with pieces of 4K (2 blocks at 16 bits): 2 pieces, the last of 488, not a multiple of K

    def work(comm: Communicator, rank: int) -> list[tuple[str, bool]]:
        staged = StagedSums(comm, piece=4 * comm.job.values_per_packet)
        checks = []
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32):
            for op in ("sum", "avg"):
                tensor = values(rank, n, dtype).to(device)
                work = staged.start("all_reduce", tensor, op, tensor)
                work.wait()
                expected = whole_sum(comm, values(rank, n, dtype), op)
                same = bool(
                    torch.equal(
                        tensor.cpu().view(torch.int16 if dtype.itemsize == 2 else torch.int32),
                        expected.view(torch.int16 if dtype.itemsize == 2 else torch.int32),
                    )
                )
                checks.append((f"{dtype} {op}", same))
        staged.close()
        return checks

    for checks in on_ranks(switch, f"staged-bits-{device}", work):
        assert all(same for _, same in checks), checks


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_scatter_keeps_each_ranks_part_even_in_a_strided_output(switch: Services, device: str) -> None:
    part = 350

    def work(comm: Communicator, rank: int) -> tuple[bool, bool, list[torch.Tensor]]:
        staged = StagedSums(comm, piece=2 * comm.job.values_per_packet)
        source = values(rank, part * WORLD, torch.float32).to(device)
        expected = whole_sum(comm, values(rank, part * WORLD, torch.float32), "sum")[
            rank * part : (rank + 1) * part
        ]
        grid = torch.zeros(part, 2, device=device)
        output = grid[:, 1]  # every other element: not contiguous
        work = staged.start("reduce_scatter", source, "sum", output, rank * part)
        outputs = work.get_future().wait()  # the future's value is the output tensors, as Gloo's
        work.wait()
        staged.close()
        return torch.equal(output.cpu(), expected), bool((grid[:, 0] == 0).all()), outputs

    for parted, untouched, outputs in on_ranks(switch, f"staged-scatter-{device}", work):
        assert parted and untouched
        assert len(outputs) == 1


def test_a_rank_with_a_larger_collective_makes_every_rank_raise_a_mismatch(switch: Services) -> None:
    def work(comm: Communicator, rank: int) -> tuple[str, list[float]]:
        piece = 2 * comm.job.values_per_packet
        staged = StagedSums(comm, piece=piece)
        tensor = torch.ones(piece * (4 if rank == 0 else 3))  # 2 pieces of which the last is longer, or 1
        try:
            staged.start("all_reduce", tensor, "sum", tensor).wait()
            outcome = "no error"
        except dist.DistBackendError as error:
            outcome = str(error)
        after = torch.ones(10)  # the next collective works on every rank
        staged.start("all_reduce", after, "sum", after).wait()
        staged.close()
        return outcome, after.tolist()

    for outcome, after in on_ranks(switch, "staged-mismatch", work):
        assert "AllreduceMismatch" in outcome, outcome
        assert after == [float(WORLD)] * 10


def test_staged_and_direct_calls_keep_one_call_order_when_drained(switch: Services) -> None:
    """The backend drains the staging thread before a CPU call: its call number comes after the pieces'."""

    def work(comm: Communicator, rank: int) -> tuple[list[float], list[float], list[float]]:
        staged = StagedSums(comm, piece=comm.job.values_per_packet)
        first = torch.full((5 * comm.job.values_per_packet,), float(rank))
        empty = torch.empty(0)
        staged.start("all_reduce", empty, "sum", empty).wait()  # no call at all, as the host library
        pending = staged.start("all_reduce", first, "sum", first)
        staged.drain()
        direct = comm.allreduce(np.full(7, rank + 1.0, dtype=np.float32))
        pending.wait()
        staged.close()
        return sorted(set(first.tolist())), direct.tolist(), empty.tolist()

    for first, direct, empty in on_ranks(switch, "staged-order", work):
        assert first == [float(sum(range(WORLD)))]
        assert direct == [float(sum(range(1, WORLD + 1)))] * 7
        assert empty == []


def test_a_closed_communicator_fails_the_work_with_its_message_instead_of_hanging(switch: Services) -> None:
    def work(comm: Communicator, rank: int) -> str:
        staged = StagedSums(comm, piece=comm.job.values_per_packet)
        comm.close()
        tensor = torch.ones(3 * comm.job.values_per_packet)
        try:
            staged.start("all_reduce", tensor, "sum", tensor).wait()
        except dist.DistBackendError as error:
            return str(error)
        finally:
            staged.close()
        return "no error"

    for message in on_ranks(switch, "staged-closed", work):
        assert "communicator is closed" in message, message


@pytest.fixture(autouse=True)
def job_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CREDENTIAL_ENV, "staging-tests-job-credential")
