"""DDP without any hook: every gradient bucket's all-reduce goes through the p4reduce switch.

    torchrun --nproc-per-node 4 examples/train_ddp.py                 # P4REDUCE_CONTROLLER=host:port set
    python -m hostlib.torch.launch --nproc-per-node 4 examples/train_ddp.py   # starts switch + controller
    torchrun --nproc-per-node 4 examples/train_ddp.py --backend gloo  # the same training on Gloo
    python -m hostlib.torch.launch --nproc-per-node 4 examples/train_ddp.py --device cuda  # on the GPU(s)

Prints rank 0's loss per step, the step time and DDP's own measure of its
communication (from the first bucket's all-reduce to the last one's result),
then, on p4reduce, the switch's job counters: proof that every bucket crossed it.
"""

from __future__ import annotations

import gc
import time

import torch
import torch.distributed as dist
from training import Data, Log, device, model, parser


def communication_seconds(net: torch.nn.parallel.DistributedDataParallel) -> float:
    """DDP's own timing of this step's bucket all-reduces: first one started to last one reduced."""
    net.logger.set_runtime_stats_and_log()  # DDP does this at the next forward; the step is over now
    return net._get_ddp_logging_data().get("backward_comm_time", 0) / 1e9


def main() -> None:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument(
        "--bucket-cap-mb", type=float, default=0.1, help="DDP bucket size (several buckets)"
    )
    args = arguments.parse_args()
    where = device(args.device)  # before init_process_group: the rank's GPU, for NCCL and p4reduce
    dist.init_process_group(args.backend)
    net = torch.nn.parallel.DistributedDataParallel(
        model(args.width).to(where),
        device_ids=[where] if where.type == "cuda" else None,
        bucket_cap_mb=args.bucket_cap_mb,
    )
    net._set_ddp_runtime_logging_sample_rate(1)  # DDP times its communication at every step
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
    data, log = Data(args.width, args.batch, dist.get_rank(), where), Log(args, f"DDP ({where.type})")
    buckets = 0
    for step in range(args.steps):
        x, y = data(step)
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()  # DDP all-reduces the gradient buckets while backward runs
        optimizer.step()
        log.step(loss.item(), time.perf_counter() - started, communication_seconds(net))
        buckets += net._get_ddp_logging_data().get("num_buckets_reduced", 0)
    if dist.get_rank() == 0:
        print(f"DDP reduced {buckets} gradient buckets in {args.steps} steps", flush=True)
    log.finish("DDP's backward_comm_time: first bucket sent to last bucket reduced", buckets=buckets)
    dist.destroy_process_group()
    # Free the model's process-group references now, not in interpreter teardown, where torch 2.13's
    # Gloo threads sometimes abort the process ("terminate called without an active exception").
    del net, optimizer
    gc.collect()


if __name__ == "__main__":
    main()
