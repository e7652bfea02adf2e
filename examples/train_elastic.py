"""DDP that checkpoints and resumes: what torchrun's elastic restart (--max-restarts) needs from a script.

    python -m hostlib.torch.launch --nproc-per-node 4 --max-restarts 1 \\
        examples/train_elastic.py --checkpoint /tmp/ckpt.pt --die-at-step 12 --die-rank 2

Rank 0 saves the model and the step every --checkpoint-every steps (written
to a temporary file, then renamed: a rank killed mid-save leaves the last
whole checkpoint). At start every rank loads the checkpoint if there is one
and goes on from its step; the data of a step depends only on the step and
the rank, so a resumed run sees what an uninterrupted one would have.

--die-at-step N --die-rank R makes rank R SIGKILL itself at step N of the
first attempt only (TORCHELASTIC_RESTART_COUNT 0), after noting the time
in --events: the crash a restart must survive. Each rank appends JSON lines
to --events (kill time, a step that raised and how, each step's end), from
which the test measures how soon the survivors raised and how long the
restart took to the first step after it.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from training import Data, model, parser


def note(events: Path | None, **what: object) -> None:
    """One JSON line (with the wall-clock time and this process's attempt) appended to `events`."""
    if events is None:
        return
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    line = json.dumps({"t": time.time(), "rank": dist.get_rank(), "attempt": attempt, **what})
    with open(events, "a") as sink:  # short appends from several processes: one write each
        sink.write(line + "\n")


def init_this_attempt(backend: str) -> None:
    """init_process_group on a store of this attempt's own. torch 2.13's torchrun keeps one store across
    --max-restarts on one node, and a restarted group then reads the dead attempt's keys: Gloo's
    connectFullMesh dials the old processes' ports and init fails (Connection refused) for Gloo itself.
    The p4reduce backend prefixes its own keys either way (hostlib/torch/backend.py, _this_attempt);
    this gives Gloo, and the default group's own keys, the same."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None:  # not under torchrun's agent: the usual env:// rendezvous
        dist.init_process_group(backend)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    agent = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False)
    store = dist.PrefixStore(f"/worker/attempt_{attempt}", agent)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)


def save(net: torch.nn.Module, step: int, path: Path) -> None:
    partial = path.with_name(path.name + ".partial")
    torch.save({"step": step, "model": net.state_dict()}, partial)
    partial.replace(path)


def main() -> None:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--checkpoint", type=Path, required=True, help="the checkpoint file")
    arguments.add_argument("--checkpoint-every", type=int, default=5, help="steps between checkpoints")
    arguments.add_argument("--die-at-step", type=int, help="SIGKILL --die-rank at this step (first attempt)")
    arguments.add_argument("--die-rank", type=int, default=1)
    arguments.add_argument("--events", type=Path, help="append JSON lines of what happened here")
    arguments.add_argument("--bucket-cap-mb", type=float, default=0.1, help="DDP bucket size")
    args = arguments.parse_args()
    init_this_attempt(args.backend)
    rank, attempt = dist.get_rank(), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    student, start = model(args.width), 0
    if args.checkpoint.exists():
        state = torch.load(args.checkpoint)
        student.load_state_dict(state["model"])
        start = state["step"]
    note(args.events, resumed_from=start)
    net = torch.nn.parallel.DistributedDataParallel(student, bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)  # no state of its own to checkpoint
    data, losses = Data(args.width, args.batch, rank), []
    for step in range(start, args.steps):
        if step == args.die_at_step and rank == args.die_rank and attempt == 0:
            note(args.events, killed=step)
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = data(step)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        try:
            loss.backward()  # DDP all-reduces the gradient buckets while backward runs
        except RuntimeError as error:
            note(args.events, raised=step, error=str(error)[:400])
            raise
        optimizer.step()
        losses.append(loss.item())
        note(args.events, step=step, loss=losses[-1])
        if rank == 0:
            print(f"attempt {attempt} step {step} loss {losses[-1]:.9f}", flush=True)
            if (step + 1) % args.checkpoint_every == 0:
                save(net.module, step + 1, args.checkpoint)
    if args.json is not None:
        Path(f"{args.json}-{rank}.json").write_text(json.dumps({"losses": losses, "start": start}))
    dist.destroy_process_group()
    del net, optimizer  # as train_ddp.py: free the group's references before interpreter teardown
    gc.collect()


if __name__ == "__main__":
    main()
