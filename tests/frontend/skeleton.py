"""The skeleton program (skeleton.p4.in: header h {a: bit<8>, b: bit<16>}) edited per test, and run.

BODY is the ingress apply block (it ends by sending to port 1), TOP goes
before the parser, LOCAL into the ingress control's declarations, before its
action `a`.
"""

from __future__ import annotations

from pathlib import Path

from softswitch.backends.loader import new_pipeline
from softswitch.p4c import compile_program

SKELETON = (Path(__file__).parent / "skeleton.p4.in").read_text()


def program(tmp_path: Path, body: str, top: str = "", local: str = "") -> Path:
    text = SKELETON.replace("BODY", body + " sm.egress_spec = 1;")
    text = text.replace("parser P(", top + "\nparser P(", 1)
    text = text.replace("    action a(", local + "\n    action a(", 1)
    path = tmp_path / "prog.p4"
    path.write_text(text)
    return path


def run(path: Path, backend: str, a: int, b: int) -> tuple[int, int]:
    """Header h (a, b) after one packet with those values through `backend`."""
    pipe = new_pipeline(*compile_program(path), backend)
    ((_, frame),) = pipe.process(0, bytes([a]) + b.to_bytes(2, "big"))
    return frame[0], int.from_bytes(frame[1:3], "big")
