"""P4Info + device config bytes -> a runnable pipeline, on the backend asked for.

The device config is the JSON program written by p4reduce-p4c; this is the
one place the P4Runtime side meets the compiler and the backends. Any
exception raised here means "this config cannot run" and the server turns
it into INVALID_ARGUMENT.

Backends: `c` (the program compiled to C and run natively; needs a C
compiler), `python` (the reference: the program compiled to Python), and
`auto`, the default: `c` when a compiler is present and the program is
within what the C backend runs, else `python`, saying why in one line.
`$P4REDUCE_SWITCH_BACKEND` changes the default (tests run both backends so).
"""

from __future__ import annotations

import logging
import os

from finsy.proto import p4i

from softswitch import ir, program
from softswitch.backends.common import UnsupportedError
from softswitch.runtime.pipeline import Pipeline

BACKENDS = ("auto", "c", "python")
ENVIRONMENT = "P4REDUCE_SWITCH_BACKEND"
log = logging.getLogger("softswitch.backends")


def default_backend() -> str:
    chosen = os.environ.get(ENVIRONMENT, "auto") or "auto"
    if chosen not in BACKENDS:
        raise UnsupportedError(f"${ENVIRONMENT}={chosen}: expected one of {', '.join(BACKENDS)}")
    return chosen


def compiler_notice() -> str | None:
    """The one-line notice `auto` gives when it must run Python for want of a compiler, else None."""
    from softswitch.backends.c.build import compiler

    if compiler() is not None:
        return None
    return (
        "no C compiler found (cc): running the Python backend, tens of times slower (install build-essential)"
    )


def new_pipeline(checked: ir.Program, p4info: p4i.P4Info, backend: str | None = None) -> Pipeline:
    """A loaded pipeline of `checked` on `backend` (None: the default); UnsupportedError if it cannot run."""
    from softswitch.backends.python import executor

    chosen = backend or default_backend()
    if chosen == "python":
        return executor.Pipeline(checked, p4info)
    if chosen not in BACKENDS:
        raise UnsupportedError(f"backend {chosen!r}: expected one of {', '.join(BACKENDS)}")
    from softswitch.backends.c.build import CompilerMissing
    from softswitch.backends.c.pipeline import Pipeline as NativePipeline

    try:
        return NativePipeline(checked, p4info)
    except UnsupportedError as refusal:
        if chosen == "c":
            raise UnsupportedError(f"the C backend cannot run this program: {refusal}") from None
        if isinstance(refusal, CompilerMissing):
            log.info("running the Python backend: %s", refusal)
        else:
            log.warning("running the Python backend: the C backend cannot run this program: %s", refusal)
        return executor.Pipeline(checked, p4info)


def load_pipeline(p4info: p4i.P4Info, device_config: bytes, backend: str | None = None) -> Pipeline:
    return new_pipeline(program.loads(device_config), p4info, backend)
