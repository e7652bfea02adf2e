"""RECONCILE_AND_COMMIT: carry the runtime state over to a new pipeline.

What survives is what still means the same thing under the new P4Info:

- entries (and the default action) of a table with the same id, name and
  match fields (ids, kinds, widths), whose action still belongs to the
  table with the same parameter ids and widths; other entries are dropped;
- indexed counters and registers with the same id, name and size (and, for
  registers, width);
- all multicast groups and clone sessions (they do not depend on the
  program).

Direct counter values travel with their entries. Const entries are the new
program's own. Every dropped item is reported so the server can log it.
"""

from __future__ import annotations

from softswitch.p4runtime.entities import EntityStore
from softswitch.p4runtime.schema import TableInfo
from softswitch.runtime import state as st


def reconcile(old: EntityStore, new: EntityStore) -> list[str]:
    """Copy what fits from `old` into `new` (fresh); return notes on what did not."""
    notes: list[str] = []
    for table_id, info in new.schema.tables.items():
        old_info = old.schema.tables.get(table_id)
        if old_info is None:
            continue
        if not _same_key(old_info, info):
            notes.append(f"table {info.name}: key changed, {len(old.state.tables[table_id])} entries dropped")
            continue
        notes.extend(_copy_table(old, new, old_info, info))
    for ids, old_objects, new_objects in (
        (new.schema.counters, old.state.counters, new.state.counters),
        (new.schema.registers, old.state.registers, new.state.registers),
    ):
        for object_id, name in ids.items():
            before, after = old_objects.get(object_id), new_objects[object_id]
            if before is None:
                continue
            width_before, width_after = getattr(before, "width", 0), getattr(after, "width", 0)
            if before.name != after.name or before.size != after.size or width_before != width_after:
                notes.append(f"{name}: shape changed, values reset")
                continue
            if isinstance(before, st.Register) and isinstance(after, st.Register):
                after.values[:] = before.values
            elif isinstance(before, st.Counter) and isinstance(after, st.Counter):
                after.packets[:] = before.packets
                after.bytes[:] = before.bytes
    new.state.pre.groups = dict(old.state.pre.groups)
    new.state.pre.clone_sessions = dict(old.state.pre.clone_sessions)
    return notes


def _same_key(old: TableInfo, new: TableInfo) -> bool:
    return old.name == new.name and old.fields == new.fields


def _action_fits(old: EntityStore, new: EntityStore, info: TableInfo, call: st.ActionCall) -> bool:
    if call.action_id not in info.action_scopes:
        return False
    before = old.schema.actions.get(call.action_id)
    after = new.schema.actions[call.action_id]
    return before is not None and before.params == after.params


def _copy_table(old: EntityStore, new: EntityStore, old_info: TableInfo, info: TableInfo) -> list[str]:
    source, target = old.state.tables[info.id], new.state.tables[info.id]
    dropped = 0
    for entry in source.entries():
        if entry.is_const:
            continue
        if not _action_fits(old, new, info, entry.action):
            dropped += 1
            continue
        copy = st.Entry(
            match=entry.match,
            priority=entry.priority,
            action=entry.action,
            metadata=entry.metadata,
            packets=entry.packets,
            bytes=entry.bytes,
        )
        try:
            target.insert(copy)
        except st.StateError:
            dropped += 1
    if source.default_action != source.initial_default_action and not info.const_default_action_id:
        if _action_fits(old, new, info, source.default_action):
            target.default_action = source.default_action
        else:
            dropped += 1
    return [f"table {info.name}: {dropped} entries dropped (action changed)"] if dropped else []
