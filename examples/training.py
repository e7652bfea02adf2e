"""What the two training examples share: the model, synthetic data, options, and the end-of-run report.

The task is a teacher-student regression: a fixed random "teacher" MLP
labels Gaussian inputs, and the student, the same shape, learns to imitate
it. No dataset to download, the same data on every run, a loss that falls
steadily: what is needed to see that p4reduce trains exactly like Gloo.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist

import hostlib.torch  # noqa: F401  (registers the "p4reduce" backend; torch's entry point does too)
from hostlib.contention import ENV_SWITCH_PID, ProcessCpuClock
from hostlib.torch.report import switch_report

INPUTS = 64


def parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--backend", default="p4reduce", help="p4reduce (default), gloo, or nccl with --device cuda"
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="where the model and its gradients live"
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    parser.add_argument("--width", type=int, default=256, help="hidden width (the model has ~width² weights)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--json", type=Path, help="write each rank's losses and timings to JSON-{rank}.json")
    return parser


def device(name: str) -> torch.device:
    """The rank's device; for cuda, its GPU (LOCAL_RANK modulo the GPUs: ranks share one when there are
    fewer), made current before init_process_group, as NCCL and p4reduce's CUDA backend choice want."""
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise SystemExit(
            f"--device cuda: torch.cuda.is_available() is false (torch {torch.__version__}, {build}); "
            "this machine has no usable GPU, run with --device cpu"
        )
    index = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def model(width: int, seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(INPUTS, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, 1),
    )


class Data:
    """Each rank's batches: its own inputs per step, labelled by the teacher."""

    def __init__(self, width: int, batch: int, rank: int, where: torch.device | None = None) -> None:
        self.where = where or torch.device("cpu")
        self.teacher = model(width, seed=1234).requires_grad_(False).to(self.where)
        self.batch, self.rank = batch, rank

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(
            1000 * step + self.rank
        )  # on the CPU: the same on any device
        x = torch.randn(self.batch, INPUTS, generator=generator).to(self.where)
        return x, self.teacher(x)


class Log:
    """Loss, step time and communication time per step; rank 0 prints, every rank can write JSON."""

    def __init__(self, args: argparse.Namespace, what: str) -> None:
        self.args, self.rank = args, dist.get_rank()
        self.losses: list[float] = []
        self.step_seconds: list[float] = []
        self.comm_seconds: list[float] = []
        self.cpu_seconds: list[
            float
        ] = []  # this rank's process CPU (user + sys, all threads) at each step's end
        self._cpu_start = time.process_time()
        # the switch process's CPU at each step's end (rank 0, when the benchmark names the switch)
        self.switch_cpu_seconds: list[float] = []
        pid = int(os.environ.get(ENV_SWITCH_PID, "0") or 0)
        self._switch_cpu = ProcessCpuClock(pid) if pid and self.rank == 0 else None
        if self.rank == 0:
            print(
                f"{what} on backend {dist.get_backend()}, {dist.get_world_size()} ranks, {args.steps} steps"
                f"\n{'step':>4} {'loss (rank 0)':>14} {'step ms':>8} {'comm ms':>8}",
                flush=True,
            )

    def step(self, loss: float, seconds: float, comm: float) -> None:
        """One step's figures; on a GPU the caller synchronizes first (loss.item() does), so the time is
        the step's, not its launch's."""
        self.losses.append(loss)
        self.step_seconds.append(seconds)
        self.comm_seconds.append(comm)
        self.cpu_seconds.append(time.process_time() - self._cpu_start)
        if self._switch_cpu is not None:
            self.switch_cpu_seconds.append(self._switch_cpu.seconds())
        if self.rank == 0:
            print(
                f"{len(self.losses) - 1:>4} {loss:>14.6f} {seconds * 1e3:>8.1f} {comm * 1e3:>8.1f}",
                flush=True,
            )

    def finish(self, comm_meaning: str, **extra: object) -> None:
        """Medians (the first step warms up), the switch's proof, and the JSON file; exit 1 without proof."""
        steady = slice(1, None) if len(self.losses) > 1 else slice(None)
        if self.rank == 0:
            print(
                f"median step {statistics.median(self.step_seconds[steady]) * 1e3:.1f} ms, "
                f"median communication {statistics.median(self.comm_seconds[steady]) * 1e3:.1f} ms "
                f"({comm_meaning})",
                flush=True,
            )
        proof: dict[str, object] = {}
        if dist.get_backend() == "p4reduce":
            report = switch_report()
            proof = {
                "consistent": report.consistent,
                "uses": report.uses,
                "switch": report.switch,
                "collectives": {f"{route}:{name}": n for (route, name), n in report.collectives.items()},
            }
            if self.rank == 0:
                print("\n".join(report.lines()), flush=True)
        if self.args.json is not None:
            path = Path(f"{self.args.json}-{self.rank}.json")
            record = {
                "losses": self.losses,
                "step_seconds": self.step_seconds,
                "comm_seconds": self.comm_seconds,
                "cpu_seconds": self.cpu_seconds,
                "switch_cpu_seconds": self.switch_cpu_seconds,
                "switch": proof,
                **extra,
            }
            path.write_text(json.dumps(record))
        if proof and not proof["consistent"]:
            raise SystemExit("the switch's counters do not account for this rank's sums")
