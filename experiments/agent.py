"""One experiment worker inside a Mininet host: holds a p4reduce communicator and a Gloo group, runs orders.

The runner (experiments/cluster.py) starts one agent per host and then
speaks a line protocol over its stdin/stdout, so that every all-reduce is a
separate, synchronized step it can bracket with switch port counters:

    runner -> agent   {"system": "p4reduce" | "gloo", "elements": N, "dtype": "float32", "iteration": I}
    agent  -> runner  {"seconds": S, "ok": true, "retransmissions": R, "queries": Q,
                       "packets_sent": P, "ce_marks": C, "window_decreases": D, "error": ""}

The agent answers `{"ready": true}` once both the communicator and the Gloo
group exist, and exits on end of input. For each p4reduce step it also writes
its engine's counters for that step to stderr (the host's agent log, which
`--logs` keeps): how its losses were found (fast or by timer), how often the
window halved, and the round trips it measured. Every result is checked against
numpy's sum (hostlib.verify) before the answer is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta

from hostlib import Communicator
from hostlib.engine import EngineStats
from hostlib.launch import add_worker_arguments, worker_job
from hostlib.verify import call_options, check, check_float_sum, make_input


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log_engine(step: dict, seconds: float, before: EngineStats, after: EngineStats) -> None:
    """One line per p4reduce step: what the engine did about loss, for reading a slow step afterwards."""
    counters = {
        name: getattr(after, name) - getattr(before, name)
        for name in (
            "packets_sent", "queries", "fast_retransmissions", "timeouts", "missing_received",
            "missing_resends", "needless_questions", "window_decreases", "random_losses", "ce_marks",
            "ignored",
        )
    }  # fmt: skip
    rtts = sorted(after.rtt_samples[len(before.rtt_samples) :])
    if rtts:
        counters["rtt_ms"] = [round(1e3 * rtts[int(q * (len(rtts) - 1))], 2) for q in (0.0, 0.5, 0.9, 1.0)]
    counters["cwnd_after"] = after.cwnd
    print(f"step {step['iteration']}: {seconds:.3f} s {json.dumps(counters)}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_worker_arguments(parser)
    parser.add_argument("--gloo", help="Gloo rendezvous IP:PORT (rank 0's address); no Gloo if absent")
    args = parser.parse_args()
    job, rank, bind = worker_job(args)
    dist = None
    if args.gloo:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{args.gloo}",
            rank=args.rank,
            world_size=args.world,
            timeout=timedelta(seconds=120),
        )
    with Communicator(job, rank, bind, progress_timeout=60.0) as comm:
        reply({"ready": True})
        for line in sys.stdin:
            order = json.loads(line)
            data = make_input(args.rank, order["elements"], order["dtype"], order["iteration"])
            options = call_options(order["dtype"], 16)  # 16-bit dtypes at 16 bits, as the torch backend
            before = comm.stats()
            started = time.perf_counter()
            try:
                if order["system"] == "gloo":
                    if dist is None:
                        raise RuntimeError("this agent was started without --gloo")

                    from hostlib.torch.arrays import host_array, host_tensor

                    tensor = host_tensor(data.copy(), str(order["dtype"]))
                    dist.all_reduce(tensor)
                    result = host_array(tensor)
                else:
                    result = comm.allreduce(data, **options)  # type: ignore[arg-type]
            except Exception as error:  # reported to the runner, which marks the step failed
                reply({"seconds": 0.0, "ok": False, "error": f"{type(error).__name__}: {error}"})
                continue
            seconds = time.perf_counter() - started
            verify = check_float_sum if order["system"] == "gloo" and order["dtype"] != "int32" else check
            k = job.values_per_packet
            bits = int(options["wire_bits"]) if order["system"] == "p4reduce" else 32
            ok = verify(
                result, args.world, order["elements"], order["dtype"], order["iteration"], k=k, bits=bits
            )[0]
            after = comm.stats()
            reply(
                {
                    "seconds": seconds,
                    "ok": bool(ok),
                    "retransmissions": after.retransmissions - before.retransmissions,
                    "queries": after.queries - before.queries,
                    "packets_sent": after.packets_sent - before.packets_sent,
                    "ce_marks": after.ce_marks - before.ce_marks,
                    "window_decreases": after.window_decreases - before.window_decreases,
                    "error": "" if ok else "wrong sum",
                }
            )
            if order["system"] == "p4reduce":
                log_engine(order, seconds, before, after)
    if dist is not None:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
