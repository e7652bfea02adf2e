"""`python -m experiments.convergence`: does a network train as well with bf16 gradients summed at 16 bits?

A small classifier learns scikit-learn's handwritten digits (1,797 8×8
images that ship inside the package: nothing is downloaded) on 4 ranks,
data-parallel: each rank computes the gradients of its share of a batch,
casts them to bfloat16 and sums them with one all-reduce per step, as DDP's
bf16 compression hook does; the optimizer steps on the average, in float32.
The bf16 gradients are summed three ways, with the same seeds:

* `gloo`: torch.distributed's Gloo ring, which adds in bfloat16;
* `p4reduce-32`: through the switch at 32 bits per value;
* `p4reduce-16`: through the switch at 16 bits per value (docs/protocol.md,
  *Wire formats*), what the torch backend does by default.

Every run trains for the same number of steps. Rank 0 evaluates the whole
training set's loss and the held-out test accuracy every `--eval-every`
steps; the report gives, per way, the final accuracy and the step at which
the test accuracy first reached `--target`, over the seeds, and
`--plot` draws the curves (docs/performance.md, *16-bit gradients*).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hostlib.launch import ROOT, free_port, services

METHODS = ("gloo", "p4reduce-32", "p4reduce-16")
WORLD = 4


@dataclass
class Curve:
    """One training run as rank 0 saw it."""

    method: str
    seed: int
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)  # mean cross-entropy over the training set
    accuracy: list[float] = field(default_factory=list)  # on the held-out test set
    seconds: float = 0.0

    def reached(self, target: float) -> int | None:
        """The first evaluated step at which the test accuracy reached `target`."""
        return next((s for s, a in zip(self.steps, self.accuracy) if a >= target), None)


def digits(test_share: float = 0.2) -> tuple[Any, Any, Any, Any]:
    """scikit-learn's digits as float32 tensors, scaled to [0, 1], split once with a fixed seed."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))
    cut = int(len(order) * (1 - test_share))
    x = torch.from_numpy((data.data / 16.0).astype(np.float32))
    y = torch.from_numpy(data.target.astype(np.int64))
    train, test = torch.from_numpy(order[:cut]), torch.from_numpy(order[cut:])
    return x[train], y[train], x[test], y[test]


def train_rank(rank: int, method: str, port: int, controller: str, args: dict[str, Any]) -> list[Curve]:
    """One rank: every seed of one way of summing, in one process group."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the ranks share the machine's cores, as torchrun sets
    import torch
    import torch.distributed as dist

    import hostlib.torch  # noqa: F401  (registers the backend)
    from hostlib.torch import P4ReduceOptions

    backend = "gloo" if method == "gloo" else "p4reduce"
    options = None
    if backend == "p4reduce":
        bits = int(method.rsplit("-", 1)[1])
        options = P4ReduceOptions(controller=controller, wire_bits=bits, progress_timeout=30)
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD, pg_options=options
    )
    try:
        x, y, x_test, y_test = digits()
        curves = []
        for seed in args["seeds"]:
            curves.append(_train(rank, method, seed, x, y, x_test, y_test, args, torch, dist))
        return curves
    finally:
        dist.destroy_process_group()


def _train(rank, method, seed, x, y, x_test, y_test, args, torch, dist) -> Curve:  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(64, args["width"]), torch.nn.ReLU(), torch.nn.Linear(args["width"], 10)
    )
    optimizer = torch.optim.SGD(net.parameters(), lr=args["lr"], momentum=0.9)
    loss_of = torch.nn.CrossEntropyLoss()
    share = args["batch"] // WORLD
    generator = torch.Generator().manual_seed(seed)
    order, at = torch.randperm(len(y), generator=generator), 0
    curve, started = Curve(method, seed), time.perf_counter()
    for step in range(args["steps"] + 1):
        if step % args["eval_every"] == 0 and rank == 0:
            with torch.no_grad():
                curve.steps.append(step)
                curve.loss.append(float(loss_of(net(x), y)))
                curve.accuracy.append(float((net(x_test).argmax(1) == y_test).float().mean()))
        if step == args["steps"]:
            break
        if at + args["batch"] > len(order):  # a new epoch: the same permutation on every rank
            order, at = torch.randperm(len(y), generator=generator), 0
        mine = order[at + rank * share : at + (rank + 1) * share]
        at += args["batch"]
        optimizer.zero_grad()
        loss_of(net(x[mine]), y[mine]).backward()
        grads = [p.grad for p in net.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads]).to(torch.bfloat16)  # DDP's bf16 compression
        dist.all_reduce(flat)
        summed = flat.float() / WORLD
        offset = 0
        for g in grads:
            g.copy_(summed[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        optimizer.step()
    curve.seconds = time.perf_counter() - started
    return curve


def run_method(method: str, controller: str, args: dict[str, Any]) -> list[Curve]:
    """WORLD spawned ranks training every seed with one way of summing; rank 0's curves."""
    import multiprocessing

    port = free_port()
    with multiprocessing.get_context("spawn").Pool(WORLD) as pool:
        ranks = pool.starmap(train_rank, [(rank, method, port, controller, args) for rank in range(WORLD)])
    return ranks[0]


def report(curves: list[Curve], target: float) -> list[str]:
    """One line per way of summing: final accuracy and loss, and the step that reached the target."""
    lines = [f"{'method':>12} {'final accuracy':>22} {'final loss':>24} {f'steps to {target:.0%}':>18}"]
    for method in METHODS:
        mine = [c for c in curves if c.method == method]
        if not mine:
            continue
        accuracy = [c.accuracy[-1] for c in mine]
        loss = [c.loss[-1] for c in mine]
        reached = [c.reached(target) for c in mine]
        steps = [r for r in reached if r is not None]
        steps_text = (
            f"{statistics.median(steps):.0f} ({min(steps)}-{max(steps)})" if len(steps) == len(mine) else
            f"{len(steps)}/{len(mine)} runs"
        )  # fmt: skip
        lines.append(
            f"{method:>12} {statistics.median(accuracy):>8.4f} ({min(accuracy):.4f}-{max(accuracy):.4f}) "
            f"{statistics.median(loss):>9.5f} ({min(loss):.5f}-{max(loss):.5f}) {steps_text:>18}"
        )
    return lines


def plot(curves: list[Curve], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip(METHODS, ("tab:gray", "tab:blue", "tab:red")))
    figure, (losses, accuracies) = plt.subplots(1, 2, figsize=(11, 4))
    for c in curves:
        label = c.method if c.seed == min(x.seed for x in curves) else None
        losses.plot(c.steps, c.loss, color=colours[c.method], alpha=0.7, label=label)
        accuracies.plot(c.steps, c.accuracy, color=colours[c.method], alpha=0.7, label=label)
    losses.set(xlabel="step", ylabel="training loss", yscale="log", title="bf16 gradients, 4 ranks")
    accuracies.set(xlabel="step", ylabel="test accuracy", ylim=(0.8, 1.0), title="digits (scikit-learn)")
    losses.legend()
    accuracies.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.convergence", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    parser.add_argument("--steps", type=int, default=600, help="optimizer steps per run (default 600)")
    parser.add_argument("--batch", type=int, default=64, help="samples per step over all ranks (default 64)")
    parser.add_argument("--width", type=int, default=128, help="hidden units (default 128)")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD's learning rate (momentum 0.9)")
    parser.add_argument("--eval-every", type=int, default=20, help="steps between evaluations (default 20)")
    parser.add_argument(
        "--target", type=float, default=0.95, help="the test accuracy to reach (default 0.95)"
    )
    parser.add_argument("--methods", default=",".join(METHODS), help=f"of {', '.join(METHODS)}")
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "convergence", help="results directory")
    parser.add_argument("--plot", action="store_true", help="also draw the curves (needs matplotlib)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",")]
    if unknown := [m for m in methods if m not in METHODS]:
        parser.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    if args.batch % WORLD or args.steps < 1 or args.eval_every < 1:
        parser.error(f"--batch must be a multiple of {WORLD}; --steps and --eval-every positive")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        parser.error("the digits come with scikit-learn: pip install 'p4reduce[experiments]'")
    settings = dict(
        seeds=[int(s) for s in args.seeds.split(",")], steps=args.steps, batch=args.batch,
        width=args.width, lr=args.lr, eval_every=args.eval_every,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"convergence: {WORLD} ranks, {settings}; load average {os.getloadavg()[0]:.2f}", flush=True)
    curves: list[Curve] = []
    with services(args.out / "services", ROOT / "build", pool_size=64) as svc:  # a free loopback address
        for method in methods:
            started = time.perf_counter()
            curves += run_method(method, svc.controller, settings)
            print(f"  {method}: {time.perf_counter() - started:.0f} s", flush=True)
    (args.out / "curves.json").write_text(json.dumps([asdict(c) for c in curves], indent=1))
    print("\n".join(report(curves, args.target)))
    if args.plot:
        plot(curves, args.out / "convergence.png")
        print(f"plot: {args.out / 'convergence.png'}")
    print(f"curves: {args.out / 'curves.json'}; load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
