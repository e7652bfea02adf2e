"""What a backend hands the packet loop and the P4Runtime server: a loaded program and its state."""

from __future__ import annotations

from typing import Protocol

from softswitch.runtime.state import RuntimeState


class Pipeline(Protocol):
    """A loaded P4 program (softswitch.backends.python.executor.Pipeline or any equivalent)."""

    state: RuntimeState

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]: ...
