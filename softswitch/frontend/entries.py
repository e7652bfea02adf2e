"""A table's entries in the program: which one wins a lookup, decided as p4c and bmv2 decide it.

The switch keeps entries as P4Runtime does: a priority per entry of a table
with a ternary, range or optional key, the larger winning. The program says
which entry wins in three ways, applied in p4c's and bmv2's order:

1. p4c's front end (P4_16 `entries` with `priority =`, and the table properties
   `largest_priority_wins` (default true) and `priority_delta` (default 1)):
   without any `priority =`, the entries get priorities by position, the first
   winning; with some, the first entry must have one, and each entry without one
   gets the previous one's minus (or, smallest winning, plus) the delta. The
   entries are then ordered best first. `const entries` take no `priority =`
   at all, and a table whose keys are all exact or lpm takes none either.
2. bmv2's JSON: each entry in that order gets its position (1, 2, ...) as its
   bmv2 priority, or the value of a non-standard `@priority(N)` annotation on
   the entry (which p4c passes on and simple_switch honours); the smallest wins,
   and of equal ones the first in that order.
3. Here: the P4Runtime priority of each entry. p4c's own values where they say
   the same (largest wins, all distinct and positive, no `@priority`), so that
   P4Runtime reads them back as written; otherwise n down to 1 in bmv2's order.

Entries whose matches are equal, whatever their priorities, are refused as p4c
refuses them ("Duplicate entry keys"): the second could never win.
"""

from __future__ import annotations

import dataclasses

from softswitch import ir
from softswitch.frontend.diagnostics import Diagnostic

NO_PRIORITIES = ("exact", "lpm")  # match kinds whose entries need no priority (p4c's EntryPriorities)


def _bmv2_annotation(entry: ir.TableEntry) -> tuple[int | None, str | None]:
    """(the value of the entry's `@priority(N)`, or None; a problem with it, or None)."""
    found = next((a for a in entry.annotations if a.name == "priority"), None)
    if found is None:
        return None, None
    if found.value is None or not found.value.isdigit():
        return None, f"invalid priority value {found.body}: must be a non-negative integer constant"
    return int(found.value), None


def _p4c_priorities(
    entries: tuple[ir.TableEntry, ...], largest_wins: bool, delta: int
) -> tuple[list[int], list[Diagnostic]]:
    """Each entry's priority as p4c's front end gives it (step 1 of the module docstring)."""
    n = len(entries)
    if all(e.priority is None for e in entries):
        return [1 + ((n - 1 - i) if largest_wins else i) * delta for i in range(n)], []
    if entries[0].priority is None:
        return [], [
            Diagnostic(entries[0].pos, "entry must have a priority (a later entry of the table has one)")
        ]
    out: list[int] = []
    for entry in entries:
        if entry.priority is not None:
            current = entry.priority
        else:
            current = out[-1] - delta if largest_wins else out[-1] + delta
            if current < 0:
                return [], [Diagnostic(entry.pos, "overflow in priority computation (below 0)")]
        out.append(current)
    return out, []


def resolve(
    table: str,
    keys: tuple[ir.TableKey, ...],
    entries: tuple[ir.TableEntry, ...],
    const: bool,
    largest_wins: bool = True,
    delta: int = 1,
) -> tuple[tuple[ir.TableEntry, ...], list[Diagnostic]]:
    """The entries with their P4Runtime priority set (None where the table takes none), or the problems."""
    given = next((e for e in entries if e.priority is not None), None)
    if given is not None and const:
        return entries, [Diagnostic(given.pos, f"{table}: a table with const entries cannot have priorities")]
    needs = any(k.match_kind not in NO_PRIORITIES for k in keys)
    if given is not None and not needs:
        message = f"{table}: its key match types need no priorities, but some are specified"
        return entries, [Diagnostic(given.pos, message)]
    problems: list[Diagnostic] = []
    if needs and entries:
        priorities, problems = _p4c_priorities(entries, largest_wins, delta)
        if problems:
            return entries, problems
        order = sorted(range(len(entries)), key=lambda i: -priorities[i] if largest_wins else priorities[i])
        bmv2: dict[int, int] = {}
        for place, i in enumerate(order):
            value, problem = _bmv2_annotation(entries[i])
            if problem:
                problems.append(Diagnostic(entries[i].pos, problem))
            bmv2[i] = place + 1 if value is None else value
        if problems:
            return entries, problems
        annotated = any(_bmv2_annotation(e)[0] is not None for e in entries)
        if largest_wins and not annotated and min(priorities) > 0 and len(set(priorities)) == len(entries):
            final = priorities
        else:
            best_first = sorted(range(len(order)), key=lambda place: (bmv2[order[place]], place))
            final = [0] * len(entries)
            for rank, place in enumerate(best_first):
                final[order[place]] = len(entries) - rank
        entries = tuple(dataclasses.replace(e, priority=p) for e, p in zip(entries, final, strict=True))
    return entries, _duplicates(keys, entries)


def _duplicates(keys: tuple[ir.TableKey, ...], entries: tuple[ir.TableEntry, ...]) -> list[Diagnostic]:
    seen: dict[object, ir.TableEntry] = {}
    problems = []
    for entry in entries:
        match = tuple(
            ir.keyset_match(k, key.match_kind, ir.width_of(key.expr.type))
            for k, key in zip(entry.keysets, keys, strict=True)
        )
        first = seen.setdefault(match, entry)
        if first is not entry:
            problems.append(
                Diagnostic(entry.pos, f"duplicate entry keys: the same as the entry at {first.pos}")
            )
    return problems
