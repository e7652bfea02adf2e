"""Human tables and JSON for the CLI: the same rows either way."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
