#!/usr/bin/env bash
# Memory-safety checks of the native engine (hostlib/csrc): `make asan` and `make fuzz`.
#
#   scripts/native-checks.sh asan   build hostlib._native with AddressSanitizer and UBSan into
#                                   build/asan/ and run the engine tests against it
#   scripts/native-checks.sh fuzz   build the libFuzzer targets (clang, ASan, UBSan): the receive path
#                                   and the lanes' rings, and run each for FUZZ_SECONDS (default 60)
#                                   from its seed corpus
#
# As root, installs what it needs from Debian (clang for fuzz); as a user, names it.
# Environment: PYTHON (default .venv/bin/python), FUZZ_SECONDS.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
python="${PYTHON:-$repo/.venv/bin/python}"
csrc=hostlib/csrc
engine_sources=("$csrc/quantize.c" "$csrc/plan.c" "$csrc/overtaking.c" "$csrc/engine.c" "$csrc/udp.c" "$csrc/driver.c")

need() {  # need COMMAND PACKAGE
    command -v "$1" >/dev/null && return 0
    if [ "$(id -u)" = 0 ]; then
        echo "==> apt-get install $2" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
    else
        echo "error: $1 is missing; as root run: apt-get install $2" >&2
        exit 1
    fi
}

asan() {
    need gcc build-essential
    local out=build/asan
    rm -rf "$out" && mkdir -p "$out"
    CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1" \
    LDFLAGS="-fsanitize=address,undefined" \
        "$python" setup.py -q build_ext --build-lib "$out" --build-temp "$out/temp" >/dev/null
    local library
    library="$(ls "$out"/hostlib/_native*.so)"
    echo "==> engine tests against $library"
    # Python itself is not instrumented: the ASan runtime must be loaded first. Python's own
    # allocations are not ours to judge at exit, so leak detection is off; any error aborts.
    LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
    ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    P4REDUCE_NATIVE_LIBRARY="$repo/$library" \
        "$python" -m pytest -q -p no:cacheprovider tests/hostlib/test_native_engine.py \
        tests/hostlib/test_engine.py tests/hostlib/test_worker_arguments.py tests/hostlib/test_lanes.py
}

fuzz() {
    need clang clang
    local out=build/fuzz seconds="${FUZZ_SECONDS:-60}"
    local flags=(-g -O1 -std=gnu11 -D_GNU_SOURCE -ffp-contract=off -Icontracts -fsanitize=fuzzer,address,undefined
                 -fno-sanitize-recover=undefined)
    mkdir -p "$out/corpus" "$out/lane-corpus"
    clang "${flags[@]}" -o "$out/fuzz_receive" "$csrc/fuzz/fuzz_receive.c" "${engine_sources[@]}" -lm
    clang "${flags[@]}" -o "$out/fuzz_lane" "$csrc/fuzz/fuzz_lane.c"
    # The first directory collects new inputs; the committed seeds are only read.
    echo "==> fuzzing the receive path for ${seconds} s (seeds: $csrc/fuzz/seeds, new inputs: $out/corpus)"
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        "$out/fuzz_receive" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" "$csrc/fuzz/seeds"
    echo "==> fuzzing the lanes' rings for ${seconds} s (seeds: $csrc/fuzz/lane-seeds, new inputs: $out/lane-corpus)"
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        "$out/fuzz_lane" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/lane-" "$out/lane-corpus" "$csrc/fuzz/lane-seeds"
}

case "${1:-}" in
    asan) asan ;;
    fuzz) fuzz ;;
    *) echo "usage: $0 asan|fuzz" >&2; exit 2 ;;
esac
