"""The native parts of hostlib, built by `pip install -e .` (make install) with the system compiler.

Everything else about the project is in pyproject.toml. -ffp-contract=off keeps every float64
operation separately rounded, as numpy's, so the native quantization is bit-identical to
hostlib/quantize.py; CFLAGS/LDFLAGS from the environment are added (make asan adds sanitizers).
Python's own flags include -fwrapv: a loop that indexes bytes with `4 * i` must count in size_t, or
GCC cannot vectorize it (the int product may wrap).
"""

from setuptools import Extension, setup

NATIVE = "hostlib/csrc"
FLAGS = ["-std=gnu11", "-O3", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall", "-Wextra",
         "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-Wno-cast-function-type"]  # fmt: skip
ENGINE = ["quantize.c", "plan.c", "overtaking.c", "engine.c", "udp.c", "driver.c", "module.c"]
HEADERS = ["protocol.h", "quantize.h", "plan.h", "overtaking.h", "engine.h", "udp.h", "driver.h", "clock.h"]
CONTRACTS = "contracts"  # lanes.h: the shared-memory lanes' layout, which the switch's loop compiles too

setup(
    ext_modules=[
        Extension(
            "hostlib._native",
            sources=[f"{NATIVE}/{name}" for name in ENGINE],
            depends=[f"{NATIVE}/{name}" for name in HEADERS] + [f"{CONTRACTS}/lanes.h"],
            include_dirs=[CONTRACTS],
            extra_compile_args=FLAGS,
            libraries=["m"],
        ),
        Extension(  # benchmarks' switch stand-in and native UDP loop (hostlib/reflector.py)
            "hostlib._reflector",
            sources=[f"{NATIVE}/reflector.c", f"{NATIVE}/udp.c"],
            depends=[f"{NATIVE}/protocol.h", f"{NATIVE}/clock.h", f"{NATIVE}/udp.h"],
            extra_compile_args=FLAGS,
            libraries=["m"],
        ),
    ],
)
