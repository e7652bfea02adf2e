"""Run one function as the ranks of a torch.distributed job, each in its own spawned process.

Unlike a multiprocessing Pool, a rank that dies (as the killed-rank test
wants) does not hang the others' results: each rank reports through a
queue, and a rank that reports nothing is simply missing from the answer.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
from collections.abc import Callable
from typing import Any

from hostlib.launch import free_port


def init(backend: str, rank: int, world: int, port: int, **options: Any) -> None:
    """init_process_group on a TCP store at `port`; options go to P4ReduceOptions for p4reduce."""
    import torch.distributed as dist

    from hostlib.torch import P4ReduceOptions

    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        pg_options=P4ReduceOptions(**options) if backend == "p4reduce" else None,
    )


def _rank(target: Callable[..., Any], rank: int, args: tuple[Any, ...], results: Any) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: ranks share 2 cores
    try:
        results.put((rank, True, target(rank, *args)))
    except BaseException as error:  # the parent asserts on it
        results.put((rank, False, f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))


def run_ranks(
    target: Callable[..., Any], world: int, *args: Any, timeout: float = 240.0
) -> dict[int, tuple[bool, Any]]:
    """{rank: (returned normally, value or error text)} for every rank that reported within `timeout`.

    `target(rank, world, port, *args)` runs in each rank; `port` is a free port for the TCP store.
    """
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=_rank, args=(target, rank, (world, port, *args), results), daemon=True)
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    answers: dict[int, tuple[bool, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(answers) < world and time.monotonic() < deadline:
            try:
                rank, ok, value = results.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in processes) and results.empty():
                    break
                continue
            answers[rank] = (ok, value)
    finally:
        for process in processes:  # ranks end by themselves once they have reported; the silent are killed
            process.join(timeout=10 if len(answers) == world else 1)
            if process.is_alive():
                process.kill()
                process.join()
    return answers


def values(answers: dict[int, tuple[bool, Any]], world: int) -> list[Any]:
    """Every rank's return value, or an assertion error showing the ranks that failed."""
    failed = {rank: value[-2000:] for rank, (ok, value) in answers.items() if not ok}
    missing = sorted(set(range(world)) - set(answers))
    assert not failed and not missing, f"ranks failed: {failed}; ranks silent: {missing}"
    return [answers[rank][1] for rank in range(world)]
