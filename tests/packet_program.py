"""p4src/v1model/p4reduce.p4 as the packet-level tests compile it: K = 64, asked for with -D.

The program's default K follows its target (docs/protocol.md, *Values per packet*): 1024 values per
packet where p4reduce-p4c compiles it for the embedded switch, 64 on bmv2 and Tofino. The tests that
build frames by hand, count bytes, or share one scenario table with bmv2 and the byte-level model
(tests/protocol_scenarios.py) are written for K = 64: frames that fit a 1500-byte MTU and the K that
every target can run. They state that K through this module, so that what they test does not change
with the compiler's default, and so that a test that is about the default says so instead.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from contracts.protocol import DEFAULT_VALUES_PER_PACKET

if TYPE_CHECKING:
    from softswitch import ir

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "p4src" / "v1model" / "p4reduce.p4"
INCLUDE = ROOT / "p4src"

PACKET_K = DEFAULT_VALUES_PER_PACKET  # 64: bmv2's and Tofino's default, small frames
PACKET_DEFINES = {"VALUES_PER_PACKET": str(PACKET_K)}  # for softswitch.frontend.compile_file
PACKET_FLAGS = (f"-DVALUES_PER_PACKET={PACKET_K}",)  # for p4reduce-p4c and p4c command lines


def p4c_command(program: Path, p4info: Path) -> list[str]:
    """`python -m softswitch.p4c` (p4reduce-p4c) compiling p4reduce.p4 at PACKET_K for the embedded switch."""
    import sys

    return [
        sys.executable, "-m", "softswitch.p4c", str(PROGRAM), "-I", str(INCLUDE), *PACKET_FLAGS,
        "-o", str(program), "--p4runtime-files", str(p4info),
    ]  # fmt: skip


@functools.cache
def packet_program() -> ir.Program:
    """p4reduce.p4 through the embedded switch's front end at PACKET_K (once per test process)."""
    from softswitch.frontend import compile_file

    return compile_file(PROGRAM, include_dirs=[INCLUDE], defines=PACKET_DEFINES)
