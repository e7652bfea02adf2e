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
  that order), at most MAX_PASSES per received frame;
* `clone`/`clone_preserving_field_list` (session, as bmv2: the last call of
  the pass wins, whatever its CloneType): at the end of ingress, before the
  packet goes on, each replica of the clone session gets a copy of the
  packet as it began this ingress pass (the frame parsed again), with fresh
  metadata except the field list's values at the end of ingress,
  `instance_type` 1, and the replica's `egress_port` and `egress_rid`; at
  the end of egress, before the packet is deparsed (and even when it is
  dropped), each replica gets its headers as egress left them, fresh
  metadata except the field list's values, `instance_type` 2. Clones run
  egress at once, before the packet they were cloned from goes on; a clone
  operation whose session has replicas counts as a pass against MAX_PASSES
  (an egress clone of egress clones would loop for ever); an unknown
  session clones nothing;
* `digest(receiver, data)` in ingress: at the end of ingress (after the
  clones, before resubmit, even when the packet is dropped) one message of
  the data as it was at the call (the last call of the pass wins, as bmv2
  keeps one request) comes out as a "frame" to port DIGEST_PORT_BASE + the
  digest's P4Info index (runtime.pipeline.DIGEST_PORT_BASE); a digest requested in
  egress is ignored, as bmv2 only looks at the end of ingress.

The per-packet work is in the functions `softswitch.backends.python.codegen` generates.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch import ir
from softswitch.backends.common import (
    DROP_PORT,
    INSTANCE_TYPE_EGRESS_CLONE,
    INSTANCE_TYPE_INGRESS_CLONE,
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
from softswitch.runtime.pipeline import DIGEST_PORT_BASE

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
        self._clone = compiler.clone_slot
        self._clone_list = compiler.clone_list_slot
        self._digest = compiler.digest_slot
        self._headers = range(*layout.composites[("hdr",)])
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
        if vector[self._clone]:
            self._clone_at_ingress(ingress_port, frame, vector, passes, out)
        if vector[self._digest]:
            index, data = vector[self._digest]  # type: ignore[misc]
            out.append((DIGEST_PORT_BASE + index, data))
        if vector[self._resubmit]:
            self._again(ingress_port, frame, INSTANCE_TYPE_RESUBMIT, vector, self._resubmit, passes, out)
            return
        payload = frame[payload_at:]
        group = vector[self._mcast_grp]
        if group:
            for replica in self.state.pre.replicas(group):
                copy = vector.copy()
                self._to_replica(copy, replica, INSTANCE_TYPE_REPLICATION)
                self._egress_copy(ingress_port, copy, length, payload, passes, out)
        elif vector[self._egress_spec] != DROP_PORT:
            vector[self._egress_port] = vector[self._egress_spec]
            self._egress_copy(ingress_port, vector, length, payload, passes, out)

    def _egress_copy(
        self,
        ingress_port: int,
        copy: list[object],
        length: int,
        payload: bytes,
        passes: list[int],
        out: list[tuple[int, bytes]],
    ) -> None:
        """Egress, compute checksum and deparser for one copy; it leaves, recirculates or is dropped."""
        self._egress(copy, length)
        if copy[self._clone]:
            self._clone_at_egress(ingress_port, copy, length, payload, passes, out)
        if copy[self._egress_spec] == DROP_PORT:
            return
        self._compute(copy, length)
        parts: list[bytes] = []
        self._deparse(copy, parts)
        parts.append(payload)
        if copy[self._recirculate]:
            again = b"".join(parts)
            self._again(ingress_port, again, INSTANCE_TYPE_RECIRC, copy, self._recirculate, passes, out)
        else:
            out.append((copy[self._egress_port], b"".join(parts)))

    def _to_replica(self, copy: list[object], replica: st.Replica, instance_type: int) -> None:
        copy[self._egress_port] = replica.port
        copy[self._egress_spec] = replica.port
        copy[self._egress_rid] = replica.rid
        copy[self._instance_type] = instance_type

    def _clone_request(self, vector: list[object], passes: list[int]) -> tuple[st.Replicas, list[int]]:
        """The clone session's replicas and the field list's slots; the request is cleared (as bmv2)."""
        session = int(vector[self._clone]) - 1  # type: ignore[call-overload]
        index = int(vector[self._clone_list]) - 1  # type: ignore[call-overload]
        vector[self._clone] = vector[self._clone_list] = 0
        replicas = self.state.pre.clone_sessions.get(session, ())
        if replicas:
            self._count_pass(passes)
        return replicas, self._preserved.get(index, [])

    def _clone_at_ingress(
        self,
        ingress_port: int,
        frame: bytes,
        vector: list[object],
        passes: list[int],
        out: list[tuple[int, bytes]],
    ) -> None:
        """I2E: the frame this pass began with, parsed again, with the field list's values."""
        replicas, slots = self._clone_request(vector, passes)
        if not replicas:
            return
        length = len(frame)
        parsed = self._template.copy()
        parsed[self._ingress_port] = ingress_port
        parsed[self._packet_length] = length
        payload_at = self._parse(parsed, frame, length)
        self._verify(parsed, length)
        clone = self._cloned(parsed, vector, slots, INSTANCE_TYPE_INGRESS_CLONE, length)
        for replica in replicas:
            copy = clone.copy()
            self._to_replica(copy, replica, INSTANCE_TYPE_INGRESS_CLONE)
            self._egress_copy(ingress_port, copy, length, frame[payload_at:], passes, out)

    def _clone_at_egress(
        self,
        ingress_port: int,
        vector: list[object],
        length: int,
        payload: bytes,
        passes: list[int],
        out: list[tuple[int, bytes]],
    ) -> None:
        """E2E: the headers as egress left them, with the field list's values."""
        replicas, slots = self._clone_request(vector, passes)
        clone = self._cloned(vector, vector, slots, INSTANCE_TYPE_EGRESS_CLONE, length)
        for replica in replicas:
            copy = clone.copy()
            self._to_replica(copy, replica, INSTANCE_TYPE_EGRESS_CLONE)
            self._egress_copy(ingress_port, copy, length, payload, passes, out)

    def _cloned(
        self, headers: list[object], kept: list[object], slots: list[int], instance_type: int, length: int
    ) -> list[object]:
        """Fresh state with the headers of `headers` and the field list's slots of `kept`."""
        clone = self._template.copy()
        for slot in self._headers:
            clone[slot] = headers[slot]
        for slot in slots:
            clone[slot] = kept[slot]
        clone[self._instance_type] = instance_type
        clone[self._packet_length] = length
        return clone

    def _count_pass(self, passes: list[int]) -> None:
        passes[0] += 1
        if passes[0] > MAX_PASSES:
            raise RuntimeError(f"more than {MAX_PASSES} passes (resubmit/recirculate/clone loop)")

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
        self._count_pass(passes)
        slots = self._preserved.get(int(vector[request]) - 1, [])  # type: ignore[call-overload]
        kept = (slots, [vector[slot] for slot in slots])
        self._pass(ingress_port, frame, instance_type, kept, passes, out)
