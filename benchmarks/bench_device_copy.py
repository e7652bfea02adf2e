"""Device-to-host, quantization and host-to-device per GB, against a plain copy of the bytes there and back.

    python benchmarks/bench_device_copy.py --device cuda --gb 1 --runs 5 --json figures.json

Issue 44's first figure. Three ways of moving a float32 tensor of `--gb`
GB to pinned host memory and a result of the same size back:

* `copy`: a plain device-to-host and host-to-device copy of the bytes;
* `device-quantized`: quantize on the device (hostlib.torch.device_quantize,
  each block with its own exponent, as a rank would with agreed ones),
  copy the int32 blocks and their exponents to the host and back, and
  dequantize on the device: the cost of quantizing where the tensor is;
* `staged` (what hostlib.torch.staging does): copy the raw values to the
  host, quantize there with hostlib.quantize (numpy; the native engine
  quantizes inside its packet loop, faster), and copy the dequantized
  result back.

Each is timed end to end (the device synchronized) over `--runs` runs
after a warm-up; the figures are the median and the spread (min-max) in
seconds per GB and the ratio to `copy`. Every run's result is checked: the
device-quantized round trip must equal hostlib.quantize's bit for bit, or
the benchmark exits non-zero. Runs on `--device cpu` too (the copies are
memory copies there), which is how CI exercises it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from hostlib import quantize as host_quantize
from hostlib.contention import load_average
from hostlib.torch import device_quantize as dq

K = 64
WORLD = 4


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pinned(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.empty(n, dtype=dtype, pin_memory=device.type == "cuda")


def plain_copy(x: torch.Tensor) -> torch.Tensor:
    host = pinned(x.numel(), x.dtype, x.device)
    host.copy_(x, non_blocking=True)
    back = torch.empty_like(x)
    back.copy_(host, non_blocking=True)
    return back


def device_quantized(x: torch.Tensor) -> torch.Tensor:
    chunks = dq.as_chunks(x, K)
    wire = dq.wire_exponents(chunks)
    blocks = dq.quantize(chunks, wire, WORLD)
    host_blocks = pinned(blocks.numel(), torch.int32, x.device).view(blocks.shape)
    host_wire = pinned(wire.numel(), torch.int64, x.device)
    host_blocks.copy_(blocks, non_blocking=True)
    host_wire.copy_(wire, non_blocking=True)
    back_blocks = torch.empty_like(blocks).copy_(host_blocks, non_blocking=True)
    back_wire = torch.empty_like(wire).copy_(host_wire, non_blocking=True)
    return dq.dequantize(back_blocks, back_wire, WORLD).reshape(-1)[: x.numel()].float()


def staged(x: torch.Tensor) -> torch.Tensor:
    host = pinned(x.numel(), x.dtype, x.device)
    host.copy_(x, non_blocking=True)
    synchronize(x.device)  # the host quantizes what has landed
    chunks = host_quantize.as_chunks(host.numpy(), K)
    wire = host_quantize.wire_exponents(chunks)
    scales = (host_quantize.INT32_MAX // WORLD) / np.exp2(wire - 128.0)
    blocks = np.rint(chunks.astype(np.float64) * scales[:, None]).astype(np.int32)  # every block finite here
    result = host_quantize.dequantize(blocks, wire, WORLD).reshape(-1)[: x.numel()].astype(np.float32)
    back_host = pinned(x.numel(), x.dtype, x.device)
    back_host.copy_(torch.from_numpy(result))
    return torch.empty_like(x).copy_(back_host, non_blocking=True)


WAYS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "copy": plain_copy,
    "device-quantized": device_quantized,
    "staged": staged,
}


def check(x: torch.Tensor, out: torch.Tensor) -> None:
    """The device-quantized round trip is hostlib.quantize's, bit for bit (on a sample of blocks)."""
    sample = x[: 1024 * K].cpu().numpy()
    chunks = host_quantize.as_chunks(sample, K)
    wire = host_quantize.wire_exponents(chunks)
    blocks = np.stack([host_quantize.quantize(c, int(e), WORLD) for c, e in zip(chunks, wire, strict=True)])
    expected = host_quantize.dequantize(blocks.astype(np.int32), wire, WORLD).reshape(-1).astype(np.float32)
    if not np.array_equal(out[: sample.size].cpu().numpy().view(np.int32), expected.view(np.int32)):
        sys.exit("device-quantized round trip differs from hostlib.quantize's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--gb", type=float, default=1.0, help="tensor size in GB (10^9 bytes) of float32")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"--device cuda: torch.cuda.is_available() is false (torch {torch.__version__})")
    if args.runs < 1 or args.gb <= 0:
        parser.error("--runs must be >= 1 and --gb > 0")
    device = torch.device(args.device)
    n = int(args.gb * 1e9) // 4
    generator = torch.Generator().manual_seed(0)
    x = (torch.randn(n, generator=generator) * 10 ** (torch.rand(n, generator=generator) * 6 - 3)).to(device)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    loads = []
    for run in range(args.runs + 1):  # run 0 warms up (allocator, pinned pool, kernels)
        loads.append(load_average())
        for way, move in WAYS.items():
            synchronize(device)
            started = time.perf_counter()
            out = move(x)
            synchronize(device)
            if run:
                seconds[way].append((time.perf_counter() - started) / args.gb)
            if way == "device-quantized":
                check(x, out)
            del out
    copy = statistics.median(seconds["copy"])
    figures: dict[str, object] = {"device": args.device, "gb": args.gb, "runs": args.runs, "loads": loads}
    print(
        f"{args.gb:g} GB of float32 on {args.device}, {args.runs} runs; "
        f"load average {min(loads):.2f}-{max(loads):.2f}"
    )
    for way, values in seconds.items():
        median = statistics.median(values)
        figures[way] = {"seconds_per_gb": values, "median": median, "ratio_to_copy": median / copy}
        print(
            f"{way:>17}: median {median:.4f} s/GB (spread {min(values):.4f}-{max(values):.4f}), "
            f"{median / copy:.2f}x the plain copy"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
