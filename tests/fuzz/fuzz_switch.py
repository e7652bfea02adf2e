"""Fuzz the C backend's data plane (parser first of all) with libFuzzer, for a bounded time.

    python tests/fuzz/fuzz_switch.py [--seconds 20] [--program NAME ...] [--keep DIR]

For each program (ours, the constructs program, the tutorials'), the
generated C is compiled with clang together with a libFuzzer harness, under
AddressSanitizer and UndefinedBehaviorSanitizer: every input is one frame
(its first byte chooses the ingress port) copied to a buffer of exactly
its size, so any read past the end of a frame is caught. The corpus starts
from valid frames of each program. Exits non-zero, with the crashing input
kept, when a run fails. `make fuzz-switch` runs it; CI runs it after
`make test`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from softswitch.backends.c.build import HEADER  # noqa: E402
from softswitch.backends.c.codegen import generate  # noqa: E402
from softswitch.p4c import compile_program  # noqa: E402
from tests import protocol_scenarios as ps  # noqa: E402
from tests.packet_program import PACKET_DEFINES  # noqa: E402

# p4reduce at the scenarios' K (tests/packet_program.py), whose frames seed its corpus
PROGRAMS = {
    "p4reduce": (ROOT / "p4src/v1model/p4reduce.p4", [ROOT / "p4src"]),
    "constructs": (ROOT / "tests/executor/constructs.p4", []),
    "source_routing": (ROOT / "tests/tutorials/source_routing.p4", []),
    "calc": (ROOT / "tests/tutorials/calc.p4", []),
    "passes": (ROOT / "tests/executor/passes.p4", []),  # resubmit and recirculate (frames in the arena)
    "clones": (ROOT / "tests/executor/clones.p4", []),  # clone at ingress and egress
    "digests": (ROOT / "tests/executor/digests.p4", []),  # digest messages out of the pipeline
    "replicas": (ROOT / "tests/executor/replicas.p4", []),  # headers shared by replicas, clones
    "words": (ROOT / "tests/executor/words.p4", []),  # runs of bit<32> fields swapped as blocks
}
# C run once after p4_create, per program: what the control plane would have configured.
SETUP = {
    "clones": "uint64_t port[2] = {3, 4}, rid[2] = {1, 2};\n"
    "    p4_set_clone_session(ctx, 5, 2, port, rid);\n"
    "    p4_set_clone_session(ctx, 6, 1, port, rid);",
    "replicas": "uint64_t port[4] = {4, 5, 6, 7}, rid[4] = {0, 1, 2, 3};\n"
    "    p4_set_group(ctx, 1, 4, port, rid);\n"
    "    p4_set_group(ctx, 2, 1, port, rid);\n"
    "    p4_set_clone_session(ctx, 5, 2, port, rid);",
}
HARNESS = """
#include "program.c"

static ctx_t *ctx;

/* One frame per input: byte 0 is the ingress port, the rest the frame, in a buffer of exactly its size. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ctx) {
        ctx = p4_create();
        SETUP
    }
    if (size < 1 || size > 65536) return 0;
    uint8_t *frame = malloc(size - 1 ? size - 1 : 1);
    memcpy(frame, data + 1, size - 1);
    int n = p4_process(ctx, data[0] & 7, frame, (uint32_t)(size - 1));
    if (n > 0) {
        const p4_out_t *outs = p4_outputs(ctx);
        const uint8_t *arena = p4_arena(ctx);
        volatile uint8_t sink = 0;
        for (int i = 0; i < n; i++)
            for (uint32_t k = 0; k < outs[i].length; k++) sink ^= arena[outs[i].offset + k];
    }
    free(frame);
    return 0;
}
"""


def seeds(name: str) -> list[bytes]:
    """Valid frames to start from: the protocol's packets for our program, simple ones otherwise."""
    if name == "p4reduce":
        job = ps.JOB_A
        frames = [ps.contribution(job, rank, 1, ps.vector(rank), seq=ps.SEQ) for rank in range(3)]
        return [bytes([1 + i]) + f for i, f in enumerate(frames)] + [bytes([1]) + f[:60] for f in frames]
    return [bytes([1]) + bytes(range(64)), bytes([2]) + bytes([0x12, 0x34] * 40), bytes([0])]


def fuzz(name: str, seconds: int, work: Path) -> bool:
    source, includes = PROGRAMS[name]
    defines = PACKET_DEFINES if name == "p4reduce" else None
    program, info = compile_program(source, include_dirs=includes, defines=defines)
    c_source, _ = generate(program, info)
    folder = work / name
    corpus = folder / "corpus"
    corpus.mkdir(parents=True)
    (folder / "program.c").write_text(c_source)
    (folder / "harness.c").write_text(HARNESS.replace("SETUP", SETUP.get(name, "")))
    for i, frame in enumerate(seeds(name)):
        (corpus / f"seed{i}").write_bytes(frame)
    binary = folder / "fuzz"
    command = [
        "clang",
        "-g",
        "-O1",
        "-fsanitize=fuzzer,address,undefined",
        "-fno-sanitize-recover=undefined",
        "-I",
        str(HEADER.parent),
        "-o",
        str(binary),
        str(folder / "harness.c"),
    ]
    subprocess.run(command, check=True)
    print(f"fuzzing {name} for {seconds} s", flush=True)
    result = subprocess.run(
        [
            str(binary),
            f"-max_total_time={seconds}",
            "-max_len=2048",
            f"-artifact_prefix={folder}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
    )
    summary = [line for line in result.stderr.splitlines() if line.startswith(("#", "Done", "=="))]
    print("\n".join(summary[-2:]))
    if result.returncode != 0:
        print(result.stderr[-4000:], file=sys.stderr)
        print(f"{name}: FAILED; the crashing input is in {folder}", file=sys.stderr)
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="time per program (default 20)")
    parser.add_argument("--program", action="append", choices=sorted(PROGRAMS), help="default: all")
    parser.add_argument("--keep", type=Path, help="keep harnesses, corpora and crashes in this folder")
    args = parser.parse_args()
    if shutil.which("clang") is None:
        print("fuzz-switch: clang is missing (as root: apt-get install clang)", file=sys.stderr)
        return 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="fuzz-switch-"))
    work.mkdir(parents=True, exist_ok=True)
    ok = all([fuzz(name, args.seconds, work) for name in args.program or sorted(PROGRAMS)])
    if ok and args.keep is None:
        shutil.rmtree(work)
    print("fuzz-switch:", "no crash" if ok else "a crash was found")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
