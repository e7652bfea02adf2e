"""The layout is the architecture: imports point one way, between rooms and inside softswitch/.

docs/architecture.md (top-level rooms) and docs/softswitch.md (the switch's
rooms) state which room may import which; this test reads every module's
imports with `ast` and fails on an arrow pointing the wrong way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Top-level rooms and the project rooms (or single modules of them) each may import (docs/architecture.md).
ALLOWED = {
    "contracts": set(),
    "softswitch": {"contracts.lanes"},  # the shared-memory lanes it shares with the host engine, only
    "controller": {"contracts"},
    "hostlib": {"contracts"},
    "mininet": {"controller", "hostlib", "contracts"},
    "experiments": {"hostlib", "mininet", "controller", "contracts"},
    "examples": {"hostlib"},
}

# softswitch's rooms, highest first: a room imports only rooms after it (docs/softswitch.md).
SOFTSWITCH_ORDER = (
    ("daemon", "p4c", "metrics"),
    ("p4runtime",),
    ("dataplane",),
    ("backends",),
    ("runtime",),
    ("targets",),
    ("frontend", "p4info"),
    ("ir", "program"),
)
RANK = {room: rank for rank, rooms in enumerate(SOFTSWITCH_ORDER) for room in rooms}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _modules(room: str) -> list[Path]:
    return sorted((ROOT / room).rglob("*.py"))


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_top_level_rooms_import_only_what_the_architecture_allows(room: str) -> None:
    wrong = []
    for path in _modules(room):
        for name in _imports(path):
            target = name.split(".")[0]
            allowed = any(name == a or name.startswith(a + ".") for a in ALLOWED[room])
            if target in ALLOWED and target != room and not allowed:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_softswitch_rooms_import_downwards_only() -> None:
    wrong = []
    for path in _modules("softswitch"):
        parts = path.relative_to(ROOT / "softswitch").with_suffix("").parts
        if parts == ("__init__",):
            continue
        importer = RANK.get(parts[0])
        assert importer is not None, f"{path}: softswitch/{parts[0]} is not a room in docs/softswitch.md"
        for name in _imports(path):
            pieces = name.split(".")
            if pieces[0] != "softswitch" or len(pieces) < 2 or pieces[1] not in RANK:
                continue
            if pieces[1] != parts[0] and RANK[pieces[1]] < importer:
                wrong.append(f"{path.relative_to(ROOT)} imports {name} (an upper room)")
    assert not wrong, "\n".join(sorted(set(wrong)))
