"""DDP with the p4reduce hook overlaps communication with backward: step < compute + all-reduce.

    python benchmarks/bench_ddp_overlap.py [--steps 6] [--width 1024] [--layers 4] [--batch 256]

One DDP rank (torch.distributed gloo group for DDP's set-up, one intra-op thread) trains an MLP
whose gradients go through the native reflector (`python -m hostlib.reflector --native`, its own
process) with hostlib.torch.p4reduce_hook. Measured in this one run, median over `steps` rounds,
each timing the three in turn:

- compute: a training step whose hook returns each gradient bucket at once (no communication);
- all-reduce: the same buckets averaged through the Communicator alone, as the hook does
  (allreduce_async per bucket, then wait for all), with nothing else running;
- step: a training step with p4reduce_hook.

The engine carries out each call in C with the GIL released, so buckets are reduced while
backward computes the next ones: the step takes less than compute + all-reduce. (No `from
__future__ import annotations`: DDP checks that a hook's `bucket` annotation *is* dist.GradBucket.)
"""

import argparse
import copy
import os

# numpy's OpenBLAS keeps worker threads spinning for a while after it starts; on two cores they take
# CPU from what is measured here (which uses no BLAS). Before numpy is imported (spawned processes
# inherit the environment):
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.protocol import DEFAULT_VALUES_PER_PACKET as K  # noqa: E402
from hostlib import Communicator, JobSpec  # noqa: E402
from hostlib.torch import P4ReduceState, p4reduce_hook  # noqa: E402


def no_communication(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def interleaved_medians(steps: int, measured: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Median seconds of each callable, timed in turn (one of each per round), so that a change in the
    machine's load during the run weighs on all of them alike."""
    for call in measured.values():
        call()  # warm up
    times: dict[str, list[float]] = {name: [] for name in measured}
    for _ in range(steps):
        for name, call in measured.items():
            started = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--pool", type=int, default=512)
    parser.add_argument(
        "--bucket-mb", type=float, default=1.0, help="DDP's bucket_cap_mb: buckets to overlap"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    reflector = subprocess.Popen(
        [sys.executable, "-m", "hostlib.reflector", "--native"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    rendezvous = tempfile.mkdtemp()
    try:
        host, port = reflector.stdout.readline().strip().rsplit(":", 1)  # type: ignore[union-attr]
        dist.init_process_group("gloo", init_method=f"file://{rendezvous}/rdv", rank=0, world_size=1)
        layers: list[torch.nn.Module] = []
        for _ in range(args.layers):
            layers += [torch.nn.Linear(args.width, args.width), torch.nn.Tanh()]
        net = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 1))
        x, y = torch.randn(args.batch, args.width), torch.randn(args.batch, 1)
        job = JobSpec(1, 1, args.pool, (host, int(port)), K, key=7)
        with Communicator(job, 0) as comm:
            buckets: list[int] = []

            def recording(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
                buckets.append(bucket.buffer().numel())
                return no_communication(state, bucket)

            def trainer(hook: Callable, state: object) -> Callable[[], None]:  # type: ignore[type-arg]
                model = torch.nn.parallel.DistributedDataParallel(
                    copy.deepcopy(net), bucket_cap_mb=args.bucket_mb
                )
                model.register_comm_hook(state, hook)
                optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

                def step() -> None:
                    optimizer.zero_grad()
                    torch.nn.functional.mse_loss(model(x), y).backward()
                    optimizer.step()

                return step

            recorded = trainer(recording, None)
            recorded()  # DDP rebuilds its buckets after the first step: record the second
            buckets.clear()
            recorded()
            grads = [
                np.random.default_rng(i).standard_normal(n).astype(np.float32) for i, n in enumerate(buckets)
            ]

            def allreduce_alone() -> None:
                for handle in [comm.allreduce_async(g, op="avg") for g in grads]:
                    handle.wait()

            medians = interleaved_medians(
                args.steps,
                {
                    "compute": trainer(no_communication, None),
                    "all-reduce": allreduce_alone,
                    "step": trainer(p4reduce_hook, P4ReduceState(comm)),
                },
            )
            compute, communication, step = medians["compute"], medians["all-reduce"], medians["step"]
        dist.destroy_process_group()
    finally:
        reflector.terminate()
        reflector.wait()
    parameters = sum(p.numel() for p in net.parameters())
    print(
        f"load average {os.getloadavg()[0]:.2f}; {parameters / 1e6:.1f}M parameters in {len(buckets)} "
        f"buckets, batch {args.batch}, 1 intra-op thread, median of {args.steps} steps"
    )
    print(f"compute (no communication): {compute * 1e3:8.1f} ms")
    print(f"all-reduce of the buckets:  {communication * 1e3:8.1f} ms")
    print(f"step with p4reduce_hook:    {step * 1e3:8.1f} ms")
    hidden = compute + communication - step
    print(
        f"step / (compute + all-reduce) = {step / (compute + communication):.2f}: "
        f"{hidden * 1e3:.1f} ms of communication hidden behind backward"
        + ("" if step < compute + communication else "  (NO OVERLAP)")
    )
    return 0 if step < compute + communication else 1


if __name__ == "__main__":
    sys.exit(main())
