"""The v1model pipeline of the embedded switch: a compiled program plus its runtime state.

`Pipeline.process` runs one frame through parser → verify checksum →
ingress → traffic manager → egress (per copy) → compute checksum → deparser,
with bmv2's standard_metadata semantics:

* `egress_spec` 511 (what `mark_to_drop` writes) drops; `mark_to_drop` also
  clears `mcast_grp`;
* a non-zero `mcast_grp` replicates to the group's (port, rid) replicas and
  wins over `egress_spec`; replicas carry `instance_type` 5 (replication),
  `egress_rid` and their own copy of every header and metadata field;
* an ingress that leaves `egress_spec` at 0 sends to port 0, as bmv2 does;
* a parser error (frame too short for an `extract`, a failed `verify`, no
  matching `select` case) stops parsing and sets `parser_error`; the packet
  still goes through ingress, which decides;
* the payload after the last parsed header is carried through untouched;
* `resubmit_preserving_field_list` in ingress: at the end of ingress the
  packet (nothing else of this pass goes on) enters the parser again as it
  was received, with `instance_type` 6; `recirculate_preserving_field_list`:
  at the end of egress the deparsed frame enters the parser again instead
  of leaving, with `instance_type` 4. Either keeps the ingress port and the
  metadata fields of the field list (values at the end of the pass); other
  state starts fresh. New passes run at once, depth first (frames out in
  that order), at most MAX_PASSES per received frame.

The per-packet work is in the functions `softswitch.backends.python.codegen` generates.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.common import (
    DROP_PORT,
    INSTANCE_TYPE_RECIRC,
    INSTANCE_TYPE_REPLICATION,
    INSTANCE_TYPE_RESUBMIT,
    MAX_PASSES,
    UnsupportedError,
    check_v1model,
    initial_state,
)
from softswitch.backends.python.codegen import Compiler
from softswitch.runtime import state as st

__all__ = ["Pipeline", "UnsupportedError"]


class Pipeline:
    """A loaded program; `state` is what the P4Runtime server reads and writes."""

    def __init__(self, program: ir.Program, p4info: p4i.P4Info, state: st.RuntimeState | None = None) -> None:
        check_v1model(program)
        self.program = program
        self.p4info = p4info
        self.state = state if state is not None else initial_state(program, p4info)
        compiler = Compiler(program, p4info, self.state)
        namespace = compiler.compile()
        self.source: str = namespace["__source__"]
        layout = compiler.layout
        self._template = list(layout.initial)
        std = {
            path[1]: index for path, (index, _t) in layout.scalars.items() if path[0] == "standard_metadata"
        }
        self._ingress_port = std["ingress_port"]
        self._egress_spec = std["egress_spec"]
        self._egress_port = std["egress_port"]
        self._egress_rid = std["egress_rid"]
        self._mcast_grp = std["mcast_grp"]
        self._instance_type = std["instance_type"]
        self._packet_length = std["packet_length"]
        self._resubmit = compiler.resubmit_slot
        self._recirculate = compiler.recirculate_slot
        self._preserved = compiler.preserved_slots()
        self._parse = namespace["parse"]
        self._verify = namespace["verify_checksum"]
        self._ingress = namespace["ingress"]
        self._egress = namespace["egress"]
        self._compute = namespace["compute_checksum"]
        self._deparse = namespace["deparse"]

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames out as (egress port, bytes), in emission order; [] when dropped or consumed."""
        out: list[tuple[int, bytes]] = []
        self._pass(ingress_port, frame, 0, None, [1], out)
        return out

    def _pass(
        self,
        ingress_port: int,
        frame: bytes,
        instance_type: int,
        kept: tuple[list[int], list[object]] | None,
        passes: list[int],
        out: list[tuple[int, bytes]],
    ) -> None:
        """One pass of `frame` through the pipeline; frames out (and of the passes it starts) to `out`."""
        vector = self._template.copy()
        length = len(frame)
        vector[self._ingress_port] = ingress_port
        vector[self._packet_length] = length
        vector[self._instance_type] = instance_type
        if kept is not None:
            for slot, value in zip(*kept):
                vector[slot] = value
        payload_at = self._parse(vector, frame, length)
        self._verify(vector, length)
        self._ingress(vector, length)
        if vector[self._resubmit]:
            self._again(ingress_port, frame, INSTANCE_TYPE_RESUBMIT, vector, self._resubmit, passes, out)
            return
        payload = frame[payload_at:]
        group = vector[self._mcast_grp]
        if group:
            copies = []
            for replica in self.state.pre.replicas(group):
                copy = vector.copy()
                copy[self._egress_port] = replica.port
                copy[self._egress_spec] = replica.port
                copy[self._egress_rid] = replica.rid
                copy[self._instance_type] = INSTANCE_TYPE_REPLICATION
                copies.append(copy)
        elif vector[self._egress_spec] == DROP_PORT:
            return
        else:
            vector[self._egress_port] = vector[self._egress_spec]
            copies = [vector]
        egress, compute, deparse, drop_at = self._egress, self._compute, self._deparse, self._egress_spec
        for copy in copies:
            egress(copy, length)
            if copy[drop_at] == DROP_PORT:
                continue
            compute(copy, length)
            parts: list[bytes] = []
            deparse(copy, parts)
            parts.append(payload)
            if copy[self._recirculate]:
                again = b"".join(parts)
                self._again(ingress_port, again, INSTANCE_TYPE_RECIRC, copy, self._recirculate, passes, out)
            else:
                out.append((copy[self._egress_port], b"".join(parts)))

    def _again(
        self,
        ingress_port: int,
        frame: bytes,
        instance_type: int,
        vector: list[object],
        request: int,
        passes: list[int],
        out: list[tuple[int, bytes]],
    ) -> None:
        """Start the pass a resubmit or recirculate asked for, with its field list's values."""
        passes[0] += 1
        if passes[0] > MAX_PASSES:
            raise RuntimeError(f"more than {MAX_PASSES} passes (resubmit/recirculate loop)")
        slots = self._preserved.get(int(vector[request]) - 1, [])  # type: ignore[call-overload]
        kept = (slots, [vector[slot] for slot in slots])
        self._pass(ingress_port, frame, instance_type, kept, passes, out)
