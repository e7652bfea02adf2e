"""What a backend hands the packet loop and the P4Runtime server: a loaded program and its state."""

from __future__ import annotations

from typing import Protocol

from softswitch.runtime.state import RuntimeState

# What `process` returns for ports from here on are digest messages for the control plane, not
# frames: port DIGEST_PORT_BASE + i carries one message of the P4Info's i-th digest, its data each
# member's value big-endian in whole bytes (the layout PI's targets deliver samples in).
DIGEST_PORT_BASE = 1 << 32


class Pipeline(Protocol):
    """A loaded P4 program (softswitch.backends.python.executor.Pipeline or any equivalent)."""

    state: RuntimeState

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames out as (egress port, bytes) in emission order, digest messages among them."""
        ...
