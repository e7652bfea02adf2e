"""How large a block may share one exponent at 16 bits? The error of summing real bf16 gradients.

    python benchmarks/block_error.py [--ranks 4] [--steps 200]

Trains the digits classifier of experiments.convergence on one process for
`--steps` steps, keeping every 20th step's gradients of `--ranks` shares of
the batch (bf16, as DDP's compression hook sends them). For each, it sums the
ranks' gradients exactly (float64) and then as each contender would, and
prints, per contender, the error relative to the exact sum: the median over
the steps of the RMS error over the RMS of the sum, and of the largest error
over the largest magnitude. The contenders:

* `bf16 ring`: the ranks' values added one after another in bfloat16, as
  a ring all-reduce of bf16 adds (Gloo's);
* `exact`: the float64 sum, whose rounding to bf16 is the floor any bf16
  result has;
* `32 bits, block B` and `16 bits, block B`: the switch's block floating
  point (hostlib.quantize, the same code the engines are tested against)
  with B values sharing an exponent; rounded to bf16 as the backend hands
  results back (the right-hand columns), or not (what a float32 or float16
  output would keep). B = 2K is the 16-bit format's (docs/protocol.md,
  *Wire formats*); smaller B is what sub-block exponents (OCP MX shares one
  per 32 values) would buy.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from hostlib import quantize as q


def gradients(ranks: int, steps: int, every: int = 20) -> list[list[np.ndarray]]:
    """Per kept step, each rank's flat bf16 gradient (as float32 values)."""
    import torch

    from experiments.convergence import digits

    x, y, _, _ = digits()
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_of = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(1)
    kept = []
    for step in range(steps):
        batch = torch.randperm(len(y), generator=generator)[: 16 * ranks]
        per_rank = []
        for share in batch.chunk(ranks):
            optimizer.zero_grad()
            loss_of(net(x[share]), y[share]).backward()
            flat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
            per_rank.append(flat.to(torch.bfloat16).float().numpy())
        if step % every == 0:
            kept.append(per_rank)
        optimizer.zero_grad()
        loss_of(net(x[batch]), y[batch]).backward()
        optimizer.step()
    return kept


def to_bf16(values: np.ndarray) -> np.ndarray:
    return q.bfloat16_to_float32(q.float_to_bfloat16(values)).astype(np.float64)


def switch_sum(ranks: list[np.ndarray], block: int, bits: int) -> np.ndarray:
    """The block floating point sum of the ranks' values, `block` values per exponent."""
    n = len(ranks)
    chunks = [q.as_chunks(r, block) for r in ranks]
    agreed = np.max([q.wire_exponents(c) for c in chunks], axis=0)
    levels = [q.scale(int(e) - q.EXP_BIAS, n, bits) for e in agreed]
    total = np.zeros(chunks[0].shape)
    for c in chunks:
        total += np.rint(c.astype(np.float64) * np.array(levels)[:, None])
    return (total / np.array(levels)[:, None]).reshape(-1)[: ranks[0].size]


def ring_sum(ranks: list[np.ndarray]) -> np.ndarray:
    total = ranks[0].astype(np.float64)
    for r in ranks[1:]:
        total = to_bf16(total + r)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    kept = gradients(args.ranks, args.steps)
    contenders = {
        "bf16 ring": ring_sum,
        "exact": lambda r: np.sum(r, axis=0, dtype=np.float64),
        "32 bits, block 64": lambda r: switch_sum(r, 64, 32),
        "32 bits, block 1024": lambda r: switch_sum(r, 1024, 32),
    }
    for block in (32, 64, 128, 512, 2048):
        contenders[f"16 bits, block {block}"] = lambda r, b=block: switch_sum(r, b, 16)
    print(f"{len(kept)} gradients of {kept[0][0].size} values, {args.ranks} ranks; medians over them")
    print(f"{'':>22} {'the sum':>25} {'rounded to bf16':>25}")
    print(
        f"{'contender':>22} {'RMS err/RMS':>12} {'max err/max':>12} {'RMS err/RMS':>12} {'max err/max':>12}"
    )
    for name, summed in contenders.items():
        figures: list[list[float]] = [[], [], [], []]
        for ranks in kept:
            exact = np.sum(ranks, axis=0, dtype=np.float64)
            raw = summed(ranks)
            for column, result in ((0, raw), (2, to_bf16(raw))):
                error = result - exact
                figures[column].append(float(np.sqrt(np.mean(error**2)) / np.sqrt(np.mean(exact**2))))
                figures[column + 1].append(float(np.max(np.abs(error)) / np.max(np.abs(exact))))
        print(f"{name:>22} " + " ".join(f"{statistics.median(f):>12.2e}" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
