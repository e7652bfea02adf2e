#!/usr/bin/env bash
# Issue 44's GPU checks in one run: the CUDA tests and every figure, written to files under OUT.
#
#   scripts/gpu_check.sh OUT               on a machine with a GPU: everything below, figures in OUT/
#   scripts/gpu_check.sh --dry-run OUT     anywhere: the steps that need no GPU (dependencies, the native
#                                          build, the copy benchmark on CPU), and the GPU steps printed
#   scripts/gpu_check.sh --fetch-wheels    on a machine with PyPI: the pure-Python dependencies the GPU
#                                          image lacks, as wheels in build/wheels (carry that folder)
#
# A GPU machine without network (this workplace's) has python3 with a CUDA torch, numpy, pytest, rich,
# pyyaml and prometheus-client, but not finsy, lark or pcpp: fetch their wheels here first, then carry
# build/wheels to it. Where the installed torch has no CUDA, `pip install torch` from PyPI (the CUDA
# build is PyPI's default on Linux).
#
# Files in OUT (at most 8, for the device tool): env.txt (GPU, driver, torch), tests.log (pytest on the
# CUDA tests), device_copy.json, bench_ddp.json, bench_fsdp_bf16.json (the figures), gpu_check.log
# (everything printed) and summary.txt (the issue's ratios against their targets, and the load average).
# Environment: PYTHON (default python3, or .venv/bin/python where it exists), RUNS (default 3), GB
# (default 1: the copy benchmark's tensor), STEPS (default 20).
# Planned length (not yet timed on a GPU): tests ~3 min (4-rank spawns, 4 example runs), copy benchmark
# ~1 min, bench_torch 2 examples x RUNS x 2 backends torchruns at ~15 s each (~3 min with RUNS=3): about
# 7-8 minutes, inside the device tool's 10 minutes per command; RUNS=2 shortens it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
wheels="$repo/build/wheels"
site="${TMPDIR:-/tmp}/p4reduce-gpu-site"
runs="${RUNS:-3}"
gb="${GB:-1}"
steps="${STEPS:-20}"
dry=0

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

fetch_wheels() {  # pure-Python wheels for Python 3.12 on x86-64 Linux, and grpcio/protobuf as pinned here
    local python="${PYTHON:-$repo/.venv/bin/python}" platforms=()
    for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do platforms+=(--platform "$p"); done
    mkdir -p "$wheels"
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${platforms[@]}" -d "$wheels" finsy==0.30.0 parsy pyee lark pcpp \
        "grpcio==$("$python" -c 'import grpc; print(grpc.__version__)')" \
        "protobuf==$("$python" -c 'import google.protobuf as p; print(p.__version__)')"
    ls "$wheels"
}

case "${1:-}" in
    --fetch-wheels) fetch_wheels; exit 0 ;;
    --dry-run) dry=1; shift ;;
    -h|--help|"") usage ;;
esac
[ $# -eq 1 ] || usage
out="$1"
mkdir -p "$out"
log="$out/gpu_check.log"
: >"$log"
say() { echo "==> $*" | tee -a "$log"; }
gpu_step() {  # gpu_step DESCRIPTION COMMAND...: run it (output to the log), or under --dry-run print it
    local what="$1"; shift
    if [ "$dry" = 1 ]; then say "would run ($what): $*"; return 0; fi
    say "$what: $*"
    "$@" 2>&1 | tee -a "$log"
}

if [ -n "${PYTHON:-}" ]; then python="$PYTHON"
elif [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"
else python="$(command -v python3)"; fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

# 1. torch with CUDA, and a GPU it sees
cuda="$("$python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo missing)"
if [ "$cuda" != 1 ] && [ "$dry" = 0 ]; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        say "torch here has no CUDA ($cuda) but there is a GPU: pip install torch (PyPI's CUDA build)"
        "$python" -m pip install -q --upgrade torch 2>&1 | tee -a "$log"
        cuda="$("$python" -c 'import torch; print(int(torch.cuda.is_available()))')"
    fi
    if [ "$cuda" != 1 ]; then
        seen="$( (command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | head -1) || echo 'not installed')"
        say "error: no usable GPU (torch.cuda.is_available() is false; nvidia-smi: $seen)"
        say "nothing measured; run with --dry-run to check the steps that need no GPU"
        exit 1
    fi
fi

# 2. the project's dependencies: installed, else the carried wheels, else PyPI
if ! "$python" -c 'import finsy, lark, pcpp, grpc, google.protobuf, yaml, numpy' 2>/dev/null; then
    if compgen -G "$wheels/*.whl" >/dev/null; then
        say "installing the carried wheels from $wheels into $site"
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" "$wheels"/*.whl 2>&1 | tee -a "$log"
        export PYTHONPATH="$PYTHONPATH:$site"
    else
        say "pip install -e . (the project's dependencies from PyPI)"
        "$python" -m pip install -q -e . 2>&1 | tee -a "$log"
    fi
fi
"$python" -c 'import finsy, lark, pcpp' || { say "error: the project's dependencies are missing (see above)"; exit 1; }

# 3. the native engine for this Python (a copy built for another Python does not load)
if ! "$python" -c 'import hostlib._native' 2>/dev/null; then
    say "building hostlib's native engine for $("$python" -V 2>&1)"
    "$python" setup.py -q build_ext --inplace 2>&1 | tail -20 | tee -a "$log"
fi
"$python" -c 'import hostlib._native' || { say "error: hostlib._native does not build here (a C compiler and Python.h are needed)"; exit 1; }

# 4. the environment, beside the figures
{
    date -u
    uname -a
    nvidia-smi 2>&1 || echo "nvidia-smi: not here"
    "$python" -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda,
"available", torch.cuda.is_available(), "nccl", torch.distributed.is_nccl_available()); print("numpy", numpy.__version__)
print("devices", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])'
    echo "cores $(nproc); load average $(cat /proc/loadavg)"
} >"$out/env.txt" 2>&1
say "environment in $out/env.txt"

# 5. the CUDA tests (each skips with its reason where there is no GPU)
tests=(tests/torch_backend/test_device_quantize.py tests/torch_backend/test_staging.py
       tests/torch_backend/test_cuda_backend.py tests/torch_backend/test_torch_cuda.py)
if [ "$dry" = 1 ]; then
    say "would run (CUDA tests): $python -m pytest -q -rs ${tests[*]}"
else
    say "CUDA tests: ${tests[*]}"
    set +e
    "$python" -m pytest -q -rs -p no:cacheprovider "${tests[@]}" >"$out/tests.log" 2>&1
    echo "pytest exit $?" >>"$out/tests.log"
    set -e
    tail -5 "$out/tests.log" | tee -a "$log"
fi

# 6. the figures
if [ "$dry" = 1 ]; then  # the copy benchmark runs on CPU as well: a small one proves the step works
    say "copy benchmark on CPU (dry run): 0.002 GB, 1 run"
    "$python" benchmarks/bench_device_copy.py --device cpu --gb 0.002 --runs 1 --json "$out/device_copy.json" \
        2>&1 | tee -a "$log"
fi
gpu_step "device-to-host + quantization + host-to-device per GB" \
    "$python" benchmarks/bench_device_copy.py --device cuda --gb "$gb" --runs "$((runs + 2))" --json "$out/device_copy.json"
gpu_step "DDP step time, 4 ranks on one GPU" \
    "$python" benchmarks/bench_torch.py --device cuda --example ddp --runs "$runs" --steps "$steps" --json "$out/bench_ddp.json"
gpu_step "FSDP bf16 step time, 4 ranks on one GPU" \
    "$python" benchmarks/bench_torch.py --device cuda --example fsdp --bf16 --runs "$runs" --steps "$steps" \
    --json "$out/bench_fsdp_bf16.json"

# 7. the issue's ratios against their targets
"$python" - "$out" "$dry" <<'EOF' | tee "$out/summary.txt" | tee -a "$log"
import json, sys
from pathlib import Path
out, dry = Path(sys.argv[1]), sys.argv[2] == "1"
print("issue 44 figures" + (" (DRY RUN: nothing measured on a GPU)" if dry else ""))
copy = out / "device_copy.json"
if copy.exists():
    f = json.loads(copy.read_text())
    for way in ("device-quantized", "staged"):
        r = f[way]["ratio_to_copy"]
        print(f"{way} copy+quantize, {f['gb']} GB on {f['device']}: {r:.2f}x the plain copy (target <= 1.2x): "
              f"{'met' if r <= 1.2 else 'MISSED'}; load {min(f['loads']):.2f}-{max(f['loads']):.2f}")
for name, what in (("bench_ddp.json", "DDP"), ("bench_fsdp_bf16.json", "FSDP bf16")):
    path = out / name
    if not path.exists():
        print(f"{what}: not measured")
        continue
    f = json.loads(path.read_text())
    r = f["median_ratio"]
    loads = [x for pair in f["load_average_before_after"] for x in pair]
    print(f"{what}, {f['world']} ranks on {f['device']}: p4reduce/{f['baseline']} median {r:.2f}x "
          f"(spread {min(f['ratios']):.2f}-{max(f['ratios']):.2f}x over {len(f['ratios'])} runs; target <= 1x): "
          f"{'met' if r <= 1.0 else 'MISSED'}; load {min(loads):.2f}-{max(loads):.2f}")
EOF
say "done: files in $out"
