"""The compiled-program file (device config): the checked IR as JSON, with a format tag and version.

`p4reduce-p4c -o OUT.json` writes it; the switch loads it (from disk or from
SetForwardingPipelineConfig's p4_device_config bytes). Anything that is not
such a file, or has another format version, is refused with a clear
ProgramFormatError instead of failing later inside the executor.
"""

from __future__ import annotations

import json
from pathlib import Path

from softswitch import ir


class ProgramFormatError(ValueError):
    """The bytes are not a p4reduce-p4c compiled program of a supported version."""


def dumps(program: ir.Program) -> bytes:
    doc = {"format": ir.FORMAT, "version": ir.FORMAT_VERSION, "program": ir.to_json(program)}
    return json.dumps(doc, separators=(",", ":")).encode()


def loads(data: bytes | str) -> ir.Program:
    corrupt: ir.FormatError | None = None
    try:
        doc = json.loads(data, object_hook=ir.json_object)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProgramFormatError(f"not a p4reduce-p4c program: not JSON ({exc})") from None
    except ir.FormatError as exc:  # the plain tree, so that a foreign or newer file is named as such first
        doc, corrupt = json.loads(data), exc
    if not isinstance(doc, dict) or doc.get("format") != ir.FORMAT:
        raise ProgramFormatError(
            'not a p4reduce-p4c program (no "format": "p4reduce-softswitch-program"; '
            "a bmv2 JSON from p4c cannot run on p4reduce-switch)"
        )
    version = doc.get("version")
    if version != ir.FORMAT_VERSION:
        raise ProgramFormatError(
            f"compiled program has format version {version!r}, this switch reads "
            f"version {ir.FORMAT_VERSION}: "
            "recompile it with this p4reduce-p4c"
        )
    if corrupt is not None:
        raise ProgramFormatError(f"corrupt p4reduce-p4c program: {corrupt}")
    program = doc.get("program")
    if not isinstance(program, ir.Program):
        raise ProgramFormatError("corrupt p4reduce-p4c program: the top node is not a Program")
    return program


def save(program: ir.Program, path: str | Path) -> None:
    Path(path).write_bytes(dumps(program))


def load(path: str | Path) -> ir.Program:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ProgramFormatError(f"cannot read {path}: {exc.strerror}") from None
    return loads(data)
