"""The p4reduce backend under 4 ranks: what goes through the switch is within its bound, the rest is Gloo's.

One job of 4 spawned ranks runs every collective once (process start-up
costs more than the collectives); each test below checks one behaviour of
what the ranks saw, against inputs it rebuilds itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from contracts import jobapi_pb2 as pb  # noqa: E402
from contracts import jobapi_pb2_grpc as pb_grpc  # noqa: E402
from hostlib import quantize as q  # noqa: E402
from hostlib.launch import ROOT, services  # noqa: E402
from tests.torch_backend.ranks import init, run_ranks, values  # noqa: E402

WORLD, N = 4, 1000  # N: not a multiple of K, so the last packet is partial
ROUNDS = 200  # of Gloo collectives that are not sums: enough to meet a GIL deadlock (it did)


def gradients(rank: int, n: int = N, dtype: Any = None) -> Any:
    """Gradient-like values spanning four decades, the same on every call for a rank."""
    generator = torch.Generator().manual_seed(rank + 1)
    values = torch.randn(n, generator=generator) * 10 ** (torch.rand(n, generator=generator) * 4 - 3)
    return values.to(dtype or torch.float32)


def integers(rank: int) -> Any:
    """int32 values near the limits, so that their sum wraps."""
    rng = np.random.default_rng(rank + 7)
    return torch.from_numpy(rng.integers(-(2**31), 2**31, size=N, dtype=np.int64).astype(np.int32))


def collectives(rank: int, world: int, port: int, controller: str) -> dict[str, Any]:
    import torch.distributed as dist

    init("p4reduce", rank, world, port, controller=controller, progress_timeout=30)
    group = dist.group.WORLD
    seen: dict[str, Any] = {"job": group.job, "k": group.comm.job.values_per_packet}

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        tensor = gradients(rank, dtype=dtype)
        dist.all_reduce(tensor)
        seen[str(dtype)] = (tensor.dtype, tensor.float().numpy())
    strided = gradients(rank).reshape(N // 20, 20).t()  # not contiguous: summed into a copy, written back
    dist.all_reduce(strided)
    seen["strided"] = strided.reshape(-1).numpy()  # in the view's element order
    tensor = gradients(rank)
    dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
    seen["avg float32"] = tensor.numpy()
    tensor = integers(rank)
    dist.all_reduce(tensor)
    seen["int32"] = tensor.numpy()
    tensor = integers(rank)
    dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
    seen["avg int32"] = tensor.numpy()

    output = torch.zeros(N // world)
    dist.reduce_scatter_single(output, gradients(rank)[: N // world * world], op=dist.ReduceOp.AVG)
    seen["reduce_scatter_single avg"] = output.numpy()
    output = torch.zeros(N // world)
    dist.reduce_scatter(output, list(gradients(rank)[: N // world * world].chunk(world)))
    seen["reduce_scatter"] = output.numpy()

    work = dist.all_reduce(torch.full((3,), float(rank)), async_op=True)
    result = work.get_future().wait()
    seen["future"] = [t.tolist() for t in result]
    seen["completed"] = work.is_completed()

    # Delegated: a dtype and an op the switch does not sum, and collectives that are not sums.
    tensor = gradients(rank, dtype=torch.float64)
    dist.all_reduce(tensor)
    seen["float64"] = tensor.numpy()
    tensor = gradients(rank)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    seen["max"] = tensor.numpy()
    tensor = torch.full((4,), float(rank))
    dist.broadcast(tensor, src=2)
    seen["broadcast"] = tensor.tolist()
    gathered = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    seen["all_gather"] = [t.tolist() for t in gathered]
    dist.barrier()
    for _ in range(ROUNDS):  # temporaries Gloo alone holds, freed while the next collective starts
        dist.all_gather([torch.zeros(2) for _ in range(world)], torch.full((2,), float(rank)))
        dist.broadcast(torch.zeros(4), src=1)
        dist.barrier()
    seen["rounds"] = ROUNDS

    # Ranks that disagree on the dtype (the descriptor names bfloat16) all fail, then go on.
    tensor = torch.ones(8, dtype=torch.bfloat16 if rank == 0 else torch.float32)
    try:
        dist.all_reduce(tensor)
        seen["mismatch"] = "no error"
    except dist.DistBackendError as error:
        seen["mismatch"] = str(error)
    tensor = torch.ones(8)
    dist.all_reduce(tensor)
    seen["after mismatch"] = tensor.tolist()

    subgroup = dist.new_group(backend="p4reduce")
    tensor = torch.ones(2)
    dist.all_reduce(tensor, group=subgroup)
    seen["subgroup"] = (subgroup.job, tensor.tolist())

    # Ranks that disagree on the wire format of bfloat16 (rank 0 forces 32 bits) all fail, then go on.
    from hostlib.torch import P4ReduceOptions

    options = P4ReduceOptions(controller=controller, progress_timeout=30, wire_bits=32 if rank == 0 else 16)
    mixed = dist.new_group(backend="p4reduce", pg_options=options)
    try:
        dist.all_reduce(torch.ones(8, dtype=torch.bfloat16), group=mixed)
        seen["wire mismatch"] = "no error"
    except dist.DistBackendError as error:
        seen["wire mismatch"] = str(error)
    tensor = torch.ones(3)
    dist.all_reduce(tensor, group=mixed)  # float32 travels at 32 bits whatever wire_bits says
    seen["after wire mismatch"] = tensor.tolist()
    seen["collectives"] = dict(group.collectives)
    dist.destroy_process_group()  # leaves both jobs
    return seen


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """What each rank saw, and per job it used, what the controller says of each rank after
    destroy_process_group: "left", or "gone" once the job itself is."""
    logs: Path = tmp_path_factory.mktemp("torch-collectives")
    with services(logs, ROOT / "build", switch_ip="127.0.40.1", pool_size=16) as svc:
        seen = values(run_ranks(collectives, WORLD, svc.controller), WORLD)
        with grpc.insecure_channel(svc.controller) as channel:
            stub = pb_grpc.JobServiceStub(channel)
            listed = {job.name for job in stub.ListJobs(pb.Empty(), timeout=10).jobs}
            after = {
                job: [_rank_after(stub, job, rank) if job in listed else "gone" for rank in range(WORLD)]
                for job in (seen[0]["job"], seen[0]["subgroup"][0])
            }
    return seen, after


def _rank_after(stub: pb_grpc.JobServiceStub, job: str, rank: int) -> str:
    """A rank that left may not join again: the controller's refusal says it left."""
    request = pb.JoinJobRequest(
        name=job, rank=rank, world_size=WORLD, address=pb.WorkerAddress(ipv4="127.0.0.1", udp_port=9)
    )
    try:
        stub.JoinJob(request, timeout=5)
    except grpc.RpcError as error:
        return "left" if "has left" in (error.details() or "") else error.details() or ""
    return "joined again"


def exact_sum(inputs: list[Any]) -> np.ndarray:
    return np.sum([x.double().numpy() for x in inputs], axis=0)


def quantization_error(inputs: list[Any], k: int, bits: int = 32) -> np.ndarray:
    """Per element, the largest error of the switch's fixed-point sum (docs/protocol.md), for its block
    (of 2K values at 16 bits)."""
    block = k * q.lanes(bits)
    exponents = np.max([q.wire_exponents(q.as_chunks(x.float().numpy(), block)) for x in inputs], axis=0)
    return np.repeat([q.error_bound(int(e), WORLD, bits) for e in exponents], block)[:N]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_float_sums_are_the_exact_sum_within_the_quantization_error_rounded_once(
    ranks: Any, dtype: str
) -> None:
    """docs/torch.md's bound: the result is the exact sum, moved by at most the quantization error (at 16
    bits for float16 and bfloat16, by default; and for them by float32's rounding), rounded to the
    dtype."""
    seen, _ = ranks
    torch_dtype = getattr(torch, dtype)
    inputs = [gradients(rank, dtype=torch_dtype) for rank in range(WORLD)]
    want = exact_sum(inputs)
    slack = quantization_error(inputs, seen[0]["k"], 32 if torch_dtype == torch.float32 else 16)
    if torch_dtype != torch.float32:
        slack = slack + np.abs(want) * float(np.finfo(np.float32).eps) / 2
    lowest, highest = (torch.from_numpy(want + d).to(torch_dtype).float().numpy() for d in (-slack, slack))
    for rank_seen in seen:
        got_dtype, got = rank_seen[str(torch_dtype)]
        assert got_dtype == torch_dtype
        assert np.all((lowest <= got) & (got <= highest))
    assert all(np.array_equal(s[str(torch_dtype)][1], seen[0][str(torch_dtype)][1]) for s in seen)


def test_a_strided_tensor_is_summed_within_the_bound_alike_on_every_rank(ranks: Any) -> None:
    """A contiguous tensor is summed in place; a strided view goes through a copy in its own element
    order, and is written back into the view."""
    seen, _ = ranks
    inputs = [gradients(rank) for rank in range(WORLD)]
    strided_inputs = [x.reshape(N // 20, 20).t().reshape(-1) for x in inputs]
    limit = quantization_error(strided_inputs, seen[0]["k"])
    want = exact_sum(strided_inputs)
    for rank_seen in seen:
        assert np.all(np.abs(rank_seen["strided"] - want) <= limit + np.abs(want) * 2**-23)
        assert np.array_equal(rank_seen["strided"], seen[0]["strided"])


def test_avg_divides_by_the_world_size_and_integers_are_exact(ranks: Any) -> None:
    seen, _ = ranks
    inputs = [gradients(rank) for rank in range(WORLD)]
    want = exact_sum(inputs) / WORLD
    limit = quantization_error(inputs, seen[0]["k"]) / WORLD + np.abs(want) * float(np.finfo(np.float32).eps)
    wrapped = np.sum([integers(r).numpy().astype(np.int64) for r in range(WORLD)], axis=0)
    wrapped = ((wrapped + 2**31) % 2**32 - 2**31).astype(np.int32)
    for rank_seen in seen:
        assert np.all(np.abs(rank_seen["avg float32"] - want) <= limit)
        assert np.array_equal(rank_seen["int32"], wrapped), "int32 sums exactly, wrapping like the switch"
        assert np.array_equal(rank_seen["avg int32"], np.trunc(wrapped / WORLD).astype(np.int32))


def test_reduce_scatter_through_the_switch_gives_each_rank_its_part(ranks: Any) -> None:
    seen, _ = ranks
    part = N // WORLD
    inputs = [gradients(rank)[: part * WORLD] for rank in range(WORLD)]
    full = np.sum([x.double().numpy() for x in inputs], axis=0)
    for rank, rank_seen in enumerate(seen):
        mine = full[rank * part : (rank + 1) * part]
        assert rank_seen["reduce_scatter_single avg"] == pytest.approx(mine / WORLD, rel=1e-6, abs=1e-7)
        assert rank_seen["reduce_scatter"] == pytest.approx(mine, rel=1e-6, abs=1e-7)
        assert rank_seen["collectives"]["switch", "reduce_scatter"] == 2


def test_collectives_passed_to_gloo_never_deadlock_on_the_gil(ranks: Any) -> None:
    """all_gather, broadcast and barrier, over and over: torch's C++ dispatch would reach Gloo holding the
    GIL, and Gloo's worker needs it to free the temporaries it holds (docs/torch.md, Limitations)."""
    seen, _ = ranks
    assert [s["rounds"] for s in seen] == [ROUNDS] * WORLD


def test_async_work_has_a_real_future(ranks: Any) -> None:
    seen, _ = ranks
    for rank_seen in seen:
        assert rank_seen["future"] == [[6.0, 6.0, 6.0]]  # 0 + 1 + 2 + 3
        assert rank_seen["completed"]


def test_other_dtypes_ops_and_collectives_are_delegated_to_gloo_exactly(ranks: Any) -> None:
    seen, _ = ranks
    float64 = np.sum([gradients(r, dtype=torch.float64).numpy() for r in range(WORLD)], axis=0)
    largest = np.max([gradients(r).numpy() for r in range(WORLD)], axis=0)
    for rank_seen in seen:
        assert rank_seen["float64"] == pytest.approx(float64, rel=1e-12)
        assert np.array_equal(rank_seen["max"], largest)
        assert rank_seen["broadcast"] == [2.0] * 4
        assert rank_seen["all_gather"] == [[float(r)] * 2 for r in range(WORLD)]
        assert rank_seen["collectives"]["gloo", "all_reduce"] == 2  # float64 and MAX; nothing else
        assert rank_seen["collectives"]["switch", "all_reduce"] == 10


def test_a_bfloat16_rank_and_a_float32_rank_are_refused_as_a_mismatch(ranks: Any) -> None:
    seen, _ = ranks
    for rank_seen in seen:
        assert "AllreduceMismatch" in rank_seen["mismatch"]
        assert "bfloat16" in rank_seen["mismatch"] and "float32" in rank_seen["mismatch"]
        assert rank_seen["after mismatch"] == [4.0] * 8, "the next call works"


def test_ranks_that_disagree_on_the_wire_format_are_refused_as_a_mismatch(ranks: Any) -> None:
    """P4REDUCE_WIRE_BITS=32 on one rank only: its bfloat16 call differs from the others' (the
    descriptor names the format), so every rank raises; float32, at 32 bits on every rank, goes on."""
    seen, _ = ranks
    for rank_seen in seen:
        assert "AllreduceMismatch" in rank_seen["wire mismatch"], rank_seen["wire mismatch"]
        assert "bfloat16 at 16 bits" in rank_seen["wire mismatch"], rank_seen["wire mismatch"]
        assert rank_seen["after wire mismatch"] == [4.0] * 3


def test_each_group_is_its_own_job_and_destroy_leaves_them(ranks: Any) -> None:
    seen, after = ranks
    job, (subjob, total) = seen[0]["job"], seen[0]["subgroup"]
    assert all(s["job"] == job and s["subgroup"][0] == subjob for s in seen), "every rank in the same jobs"
    assert subjob != job and total == [4.0, 4.0]
    for states in after.values():
        assert states in (["left"] * WORLD, ["gone"] * WORLD), after
