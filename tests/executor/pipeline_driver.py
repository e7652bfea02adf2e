"""A protocol_scenarios Driver over an in-process softswitch Pipeline (no sockets, no gRPC).

Names are resolved through the P4Info exactly as a P4Runtime client would,
so the scenarios exercise the same ids the switch serves.
"""

from __future__ import annotations

from finsy.proto import p4i

from softswitch.runtime import state as st
from softswitch.runtime.pipeline import Pipeline


class PipelineDriver:
    def __init__(self, pipeline: Pipeline, info: p4i.P4Info) -> None:
        self.pipeline = pipeline
        self.tables = {t.preamble.name: t for t in info.tables}
        self.actions = {a.preamble.name: a for a in info.actions}
        self.counters = {c.preamble.name: c.preamble.id for c in info.counters}
        self.registers = {r.preamble.name: r.preamble.id for r in info.registers}

    def _action(self, action: str, params: dict[str, int]) -> st.ActionCall:
        decl = self.actions[action]
        names = [p.name for p in decl.params]
        assert sorted(names) == sorted(params), f"{action} takes {names}, got {sorted(params)}"
        return st.ActionCall(decl.preamble.id, tuple(params[n] for n in names))

    def table_add(self, table: str, match: dict[str, int], action: str, params: dict[str, int]) -> None:
        info = self.tables[table]
        key = tuple(match[f.name] for f in info.match_fields)
        self.pipeline.state.tables[info.preamble.id].insert(st.Entry(key, 0, self._action(action, params)))

    def table_delete(self, table: str, match: dict[str, int]) -> None:
        info = self.tables[table]
        self.pipeline.state.tables[info.preamble.id].delete(
            tuple(match[f.name] for f in info.match_fields), 0
        )

    def set_default(self, table: str, action: str, params: dict[str, int]) -> None:
        self.pipeline.state.tables[self.tables[table].preamble.id].default_action = self._action(
            action, params
        )

    def multicast_group(self, group: int, replicas: list[tuple[int, int]]) -> None:
        self.pipeline.state.pre.groups[group] = tuple(st.Replica(port, rid) for port, rid in replicas)

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.pipeline.process(port, frame)

    def counter(self, name: str, index: int) -> tuple[int, int]:
        counter = self.pipeline.state.counters[self.counters[name]]
        return counter.packets[index], counter.bytes[index]

    def register(self, name: str, index: int) -> int:
        return self.pipeline.state.registers[self.registers[name]].values[index]
