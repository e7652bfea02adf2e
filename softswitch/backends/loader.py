"""P4Info + device config bytes -> a runnable pipeline (the compiled executor).

The device config is the JSON program written by p4reduce-p4c; this is the
one place the P4Runtime side meets the compiler and executor halves. Any
exception raised here means "this config cannot run" and the server turns
it into INVALID_ARGUMENT.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch import program
from softswitch.backends.python import executor
from softswitch.runtime.pipeline import Pipeline


def load_pipeline(p4info: p4i.P4Info, device_config: bytes) -> Pipeline:
    return executor.Pipeline(program.loads(device_config), p4info)
