"""Check a device config before it is pushed: the kind its target runs, the program of the P4Info.

bmv2 takes any bytes as a device config: a file that is not p4c's bmv2
JSON is accepted, and only later reads and writes fail with UNKNOWN
"Error when reading table entries from target". So the controller looks at
the file itself first: it must be one of the two kinds it knows (p4c's
bmv2 JSON, recognized by its `pipelines` and `header_types`; the embedded
switch's program from p4reduce-p4c, recognized by its `format` tag), the
kind the switch's target runs when the config names the target, and it
must name every table, action, counter and register of the P4Info (a
P4Info and a device config compiled from different programs fail here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import finsy as fy

from controller.errors import SwitchError

SOFT_FORMAT = "p4reduce-softswitch-program"  # the `format` tag p4reduce-p4c writes


class Target(Enum):
    """A switch the controller drives, with the device config it runs."""

    BMV2 = "bmv2"
    SOFT = "p4reduce-switch"

    @property
    def device_config(self) -> str:
        return {
            Target.BMV2: "a bmv2 JSON from p4c (`p4c --target bmv2`)",
            Target.SOFT: "a p4reduce-switch program from p4reduce-p4c",
        }[self]


def check_device_config(path: Path, schema: fy.P4Schema, target: Target | None = None) -> Target:
    """The target `path` is for; SwitchError (one line) when it is unusable with `schema` or `target`."""
    try:
        document = json.loads(path.read_bytes())
    except OSError as exc:
        raise SwitchError(f"cannot read device config {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SwitchError(f"device config {path} is not JSON ({exc}); build it with `make build`") from None
    kind = _kind(document)
    if kind is None:
        raise SwitchError(
            f"device config {path} is neither {Target.BMV2.device_config} nor {Target.SOFT.device_config}"
        )
    if target is not None and kind is not target:
        raise SwitchError(
            f"device config {path} is {kind.device_config}, but the switch is {target.value}, "
            f"which runs {target.device_config}"
        )
    names = set(_strings(document))
    missing = [name for name in _p4info_names(schema) if name not in names]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise SwitchError(
            f"device config {path} does not match the P4Info: it has no {missing[0]}{more} "
            "(compile both files from the same program)"
        )
    return kind


def _kind(document: object) -> Target | None:
    if not isinstance(document, dict):
        return None
    if document.get("format") == SOFT_FORMAT:
        return Target.SOFT
    if isinstance(document.get("pipelines"), list) and isinstance(document.get("header_types"), list):
        return Target.BMV2
    return None


def _p4info_names(schema: fy.P4Schema) -> Iterator[str]:
    for objects in (schema.tables, schema.actions, schema.counters, schema.direct_counters, schema.registers):
        for obj in objects:
            yield obj.name


def _strings(node: object) -> Iterator[str]:
    """Every string in a JSON document (object names sit at different places in the two formats)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
