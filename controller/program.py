"""What the controller learns from the pipeline a switch runs: K and the size of its slot pool.

Both are compile-time parameters of the P4 program (-DVALUES_PER_PACKET,
-DSLOT_COUNT), stated in the P4Info as annotations of the job table
(docs/protocol.md, *Values per packet*). The controller reads them from the
pipeline it pushed (or found) and hands K to workers in the job
description, so neither it nor any host hard-codes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import finsy as fy

from contracts.protocol import P4INFO_SLOTS_ANNOTATION, P4INFO_VALUES_ANNOTATION, SUPPORTED_VALUES_PER_PACKET
from controller.errors import SwitchError
from controller.tables.job_table import JobTable
from controller.tables.p4names import INGRESS


@dataclass(frozen=True)
class ProgramFacts:
    values_per_packet: int
    slot_count: int
    trees: bool = False  # has the child role of aggregation trees (table upstream: v1model and TNA)


def program_facts(schema: fy.P4Schema, where: str) -> ProgramFacts:
    """K and the slot count from a p4reduce pipeline's P4Info; a clear error for any other program."""
    try:
        table = schema.tables[JobTable.TABLE]
    except (KeyError, ValueError):
        raise SwitchError(
            f"{where} runs a program without {JobTable.TABLE}: not a p4reduce pipeline"
        ) from None
    found = {a.name: a.body.strip() for a in table.annotations or ()}
    values: dict[str, int] = {}
    for name in (P4INFO_VALUES_ANNOTATION, P4INFO_SLOTS_ANNOTATION):
        text = found.get(name)
        if text is None or not text.isdigit():
            raise SwitchError(
                f"{where}: the pipeline's P4Info lacks @{name}(N) on {JobTable.TABLE}: it was compiled "
                "from an older p4reduce program (protocol version 1); rebuild it (`make build`)"
            )
        values[name] = int(text)
    k, slots = values[P4INFO_VALUES_ANNOTATION], values[P4INFO_SLOTS_ANNOTATION]
    if k not in SUPPORTED_VALUES_PER_PACKET:
        raise SwitchError(
            f"{where}: the pipeline carries {k} values per packet, not one of {SUPPORTED_VALUES_PER_PACKET}"
        )
    if not 2 <= slots <= 1 << 15:
        raise SwitchError(f"{where}: the pipeline's slot count {slots} is outside 2..32768")
    try:
        trees = bool(schema.tables[f"{INGRESS}.upstream"])
    except (KeyError, ValueError):
        trees = False
    return ProgramFacts(values_per_packet=k, slot_count=slots, trees=trees)
