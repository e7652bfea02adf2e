"""Step time of the training examples on p4reduce (embedded switch) against Gloo, on this machine.

    python benchmarks/bench_torch.py --example ddp --runs 5

Runs the example alternately on Gloo and on p4reduce (one switch and
controller for all runs), each run a fresh torchrun; per run, the median
step time of rank 0 over the steps after the first, and the CPU seconds
(user + sys, all threads) that all ranks together spent per step over the
same steps: the model's compute is the same on both backends, so the
difference is what each spends on communication. p4reduce's switch is a
process of its own on the same cores, so its CPU over the same steps is
counted too, in a column of its own and in p4reduce's total, the whole
system's, which is the figure to set against Gloo's ranks. Prints every run with the
machine's load average, then per backend the median over runs and the
spread (min-max), and the ratio p4reduce/Gloo: the machine is shared, so
only figures measured side by side in one session compare. `--hog N` runs
N busy processes at normal priority throughout, as a training host has.

`--device cuda` trains on the GPU(s), rank r on GPU r modulo their count,
and compares p4reduce with NCCL when every rank has a GPU of its own
(what a CUDA job would use), with Gloo's CUDA support when ranks share a
GPU (NCCL refuses that). `--bf16` gives FSDP bfloat16 parameters and
reductions. `--json FILE` writes every run's figures and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hostlib.contention import ENV_SWITCH_PID, Hog, load_average
from hostlib.launch import ROOT, services
from hostlib.torch.launch import torchrun_command
from hostlib.torch.options import ENV_CONTROLLER


def baseline(device: str, world: int) -> str:
    """The backend p4reduce is measured against: Gloo on CPU; on CUDA, NCCL when the ranks have a GPU
    each, else Gloo (NCCL refuses two ranks on one GPU). Exits with the reason when CUDA is missing."""
    if device == "cpu":
        return "gloo"
    import torch

    if not torch.cuda.is_available():
        sys.exit(
            f"--device cuda: torch.cuda.is_available() is false (torch {torch.__version__}); "
            "no GPU to benchmark on here"
        )
    return "nccl" if torch.cuda.device_count() >= world and torch.distributed.is_nccl_available() else "gloo"


def one_run(
    example: str, backend: str, args: argparse.Namespace, controller: str, out: Path, switch_pid: int
) -> tuple[float, float, float]:
    """Rank 0's median step time (s) of one torchrun of the example, all ranks' CPU seconds per step,
    and the switch process's CPU seconds per step (0 on Gloo, which does not use it)."""
    prefix = out / f"{backend}"
    command = torchrun_command(
        [
            f"--nproc-per-node={args.world}",
            str(ROOT / "examples" / f"train_{example}.py"),
            f"--backend={backend}",
            f"--steps={args.steps}",
            f"--width={args.width}",
            f"--json={prefix}",
            f"--device={args.device}",
            *(["--bf16"] if args.bf16 else []),
        ]
    )
    environment = dict(os.environ, **{ENV_CONTROLLER: controller, ENV_SWITCH_PID: str(switch_pid)})
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
    record = Path(f"{prefix}-0.json")
    if not record.exists():  # the run itself failed (a nonzero exit after the record is written is torch's)
        sys.exit(f"{backend} run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    steps = json.loads(record.read_text())["step_seconds"][1:]
    # every rank's CPU over the steps after the first (start-up and imports left out), per step
    cpu = 0.0
    for rank in range(args.world):
        seconds = json.loads(Path(f"{prefix}-{rank}.json").read_text())["cpu_seconds"]
        cpu += seconds[-1] - seconds[0]
    switch = json.loads(record.read_text()).get("switch_cpu_seconds") or [0.0]
    switch_cpu = switch[-1] - switch[0] if backend == "p4reduce" else 0.0
    return statistics.median(steps), cpu / len(steps), switch_cpu / len(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument(
        "--hog", type=int, default=0, metavar="N", help="N busy processes throughout (default 0)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="fsdp only: bfloat16 parameters and reductions (on p4reduce at 16 bits per value, its default)",
    )
    parser.add_argument("--json", type=Path, help="write every run's figures and the medians here")
    args = parser.parse_args()
    if args.hog < 0:
        parser.error("--hog takes a number of busy processes >= 0")
    if args.bf16 and args.example != "fsdp":
        parser.error("--bf16 is train_fsdp.py's option: use it with --example fsdp")
    other = baseline(args.device, args.world)
    backends = (other, "p4reduce")
    times: dict[str, list[float]] = {backend: [] for backend in backends}
    cpu: dict[str, list[float]] = {backend: [] for backend in backends}
    loads: list[tuple[float, float]] = []
    switch_cpu: list[float] = []  # p4reduce's switch process, per step
    hog = Hog(args.hog)
    with (
        tempfile.TemporaryDirectory() as scratch,
        hog,
        services(Path(scratch) / "logs", ROOT / "build", switch_ip="127.0.41.1", pool_size=256) as svc,
    ):
        print(
            f"{args.example}{' bf16' if args.bf16 else ''} on {args.device}, {args.world} ranks, "
            f"{args.steps} steps, width {args.width}; {os.cpu_count()} cores; {hog.describe()}"
        )
        print(
            f"{'run':>3} {other + ' ms':>8} {'p4reduce ms':>12} {'ratio':>6} {'cpu s/step ' + other:>16}"
            f" {'p4reduce':>9} {'switch':>7} {'total':>6}  load average (1 min) before/after"
        )
        for run in range(args.runs):
            before = load_average()
            for backend in backends:
                out = Path(scratch) / f"{run}"
                out.mkdir(exist_ok=True)
                step, per_step, switch = one_run(
                    args.example, backend, args, svc.controller, out, svc.switch_pid
                )
                times[backend].append(step)
                cpu[backend].append(per_step)
                if backend == "p4reduce":
                    switch_cpu.append(switch)
            gloo, ours = times[other][-1], times["p4reduce"][-1]
            loads.append((before, load_average()))
            print(
                f"{run:>3} {gloo * 1e3:>8.1f} {ours * 1e3:>12.1f} {ours / gloo:>6.1f}"
                f" {cpu[other][-1]:>16.3f} {cpu['p4reduce'][-1]:>9.3f} {switch_cpu[-1]:>7.3f}"
                f" {cpu['p4reduce'][-1] + switch_cpu[-1]:>6.3f}  {before:.2f}/{loads[-1][1]:.2f}",
                flush=True,
            )
    ratios = [ours / gloo for gloo, ours in zip(times[other], times["p4reduce"])]
    for backend in backends:
        values = times[backend]
        print(
            f"{backend:>8}: median {statistics.median(values) * 1e3:.1f} ms per step "
            f"(spread {min(values) * 1e3:.1f}-{max(values) * 1e3:.1f} ms over {len(values)} runs); "
            f"CPU {statistics.median(cpu[backend]):.3f} s per step, all ranks "
            f"({min(cpu[backend]):.3f}-{max(cpu[backend]):.3f})"
        )
    totals = [ranks + switch for ranks, switch in zip(cpu["p4reduce"], switch_cpu)]
    print(
        f"p4reduce's switch: CPU {statistics.median(switch_cpu):.3f} s per step "
        f"({min(switch_cpu):.3f}-{max(switch_cpu):.3f}); whole system (ranks + switch) "
        f"{statistics.median(totals):.3f} s per step ({min(totals):.3f}-{max(totals):.3f}), "
        f"against {other}'s ranks' {statistics.median(cpu[other]):.3f}"
    )
    print(
        f"p4reduce/{other}: median {statistics.median(ratios):.1f}x "
        f"(spread {min(ratios):.1f}-{max(ratios):.1f}x)"
    )
    if args.json is not None:
        figures = {
            "example": args.example,
            "device": args.device,
            "bf16": args.bf16,
            "world": args.world,
            "baseline": other,
            "step_seconds": times,
            "cpu_seconds_per_step": cpu,
            "switch_cpu_seconds_per_step": switch_cpu,
            "ratios": ratios,
            "median_ratio": statistics.median(ratios),
            "load_average_before_after": loads,
        }
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
