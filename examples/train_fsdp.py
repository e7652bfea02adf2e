"""FSDP2 (fully_shard) on CPU or CUDA: gradient reduce-scatters through the switch, all-gathers via Gloo.

    torchrun --nproc-per-node 4 examples/train_fsdp.py                 # P4REDUCE_CONTROLLER=host:port set
    python -m hostlib.torch.launch --nproc-per-node 4 examples/train_fsdp.py --bf16
    torchrun --nproc-per-node 4 examples/train_fsdp.py --backend gloo  # the same training on Gloo
    python -m hostlib.torch.launch --nproc-per-node 4 examples/train_fsdp.py --bf16 --device cuda

Each Linear layer is its own FSDP unit: its parameters are sharded over the
ranks, all-gathered for forward and backward, and its gradients
reduce-scattered (averaged) back to the shards. With --bf16, parameters and
gradient reductions are bfloat16 (torch's MixedPrecisionPolicy), so the
switch sums bfloat16. Prints rank 0's loss per step, the step time and the
time its collectives took (launch to completion, each counted), then, on
p4reduce, the switch's job counters.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

# torch 2.13 documents these interfaces with FSDPModule.set_custom_all_gather / set_custom_reduce_scatter.
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
from training import Data, Log, device, model, parser


class CommClock:
    """Adds up the time from launching each collective FSDP starts to the end of FSDP's wait for it."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def track(self, work: dist.Work, async_op: bool) -> dist.Work | None:
        timed = TimedWork(work, self)
        if async_op:
            return timed
        timed.wait()
        return None


class TimedWork(dist.Work):
    """A collective in flight; its first wait() ends the clock for it (Gloo's works have no future)."""

    def __init__(self, work: dist.Work, clock: CommClock) -> None:
        super().__init__()
        self.work, self.clock, self.started = work, clock, time.perf_counter()
        self.timed = False

    def wait(self, timeout: timedelta | None = None) -> bool:
        self.work.wait() if timeout is None else self.work.wait(timeout)
        if not self.timed:
            self.clock.seconds += time.perf_counter() - self.started
            self.timed = True
        return True


class Timed:
    """FSDP's default buffers (plain tensors), and the clock the collectives report to."""

    def __init__(self, clock: CommClock) -> None:
        self.clock = clock

    def allocate(self, size: Sequence[int], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)


class TimedAllGather(Timed, AllGather):
    def __call__(self, output_tensor, input_tensor, group, async_op=False):  # type: ignore[no-untyped-def]
        work = dist.all_gather_single(output_tensor, input_tensor, group=group, async_op=True)
        return self.clock.track(work, async_op)


class TimedReduceScatter(Timed, ReduceScatter):
    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):  # type: ignore[no-untyped-def]
        work = dist.reduce_scatter_single(output_tensor, input_tensor, op=op, group=group, async_op=True)
        return self.clock.track(work, async_op)


def main() -> None:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--bf16", action="store_true", help="bfloat16 parameters and gradient reductions")
    args = arguments.parse_args()
    where = device(args.device)  # before init_process_group: the rank's GPU, for NCCL and p4reduce
    dist.init_process_group(args.backend)
    mesh = init_device_mesh(where.type, (dist.get_world_size(),))  # the model's device, not torch's guess
    net = model(args.width).to(where)
    precision = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16) if args.bf16 else None
    )
    clock = CommClock()
    units = [layer for layer in net if isinstance(layer, torch.nn.Linear)] + [net]
    for unit in units:
        fully_shard(unit, mesh=mesh, mp_policy=precision or MixedPrecisionPolicy())
    for unit in units:
        assert isinstance(unit, FSDPModule)
        unit.set_custom_all_gather(TimedAllGather(clock))
        unit.set_custom_reduce_scatter(TimedReduceScatter(clock))
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
    data, log = (
        Data(args.width, args.batch, dist.get_rank(), where),
        Log(args, "FSDP2" + (" bf16" if args.bf16 else "") + f" ({where.type})"),
    )
    for step in range(args.steps):
        x, y = data(step)
        started, comm_before = time.perf_counter(), clock.seconds
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x).float(), y)
        loss.backward()
        optimizer.step()
        log.step(loss.item(), time.perf_counter() - started, clock.seconds - comm_before)
    log.finish("all-gathers and reduce-scatters, launch to the end of the wait for each")
    dist.destroy_process_group()
    # Free the model's process-group references now, not in interpreter teardown, where torch 2.13's
    # Gloo threads sometimes abort the process ("terminate called without an active exception").
    del net, optimizer, units
    gc.collect()


if __name__ == "__main__":
    main()
