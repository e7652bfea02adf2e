"""p4runtime-shell (the P4Runtime project's own client, its own venv) drives the switch.

The venv comes from scripts/p4runtime-shell.sh; without it the test skips.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from google.protobuf import text_format
from switch_support import DEVICE_ID, Server, make_p4info

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("P4RT_VENV", ROOT / ".venv-p4rt"))
SESSION = Path(__file__).with_name("p4rt_shell_session.py")


def shell_session(
    address: str, p4info: Path, device_config: Path, spec: dict[str, object]
) -> dict[str, object]:
    python = VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no p4runtime-shell venv at {VENV} (create it with scripts/p4runtime-shell.sh)")
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [
            str(python),
            str(SESSION),
            address,
            str(DEVICE_ID),
            str(p4info),
            str(device_config),
            json.dumps(spec),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_p4runtime_shell_sets_the_pipeline_writes_and_reads(server: Server, tmp_path: Path) -> None:
    p4info = tmp_path / "test.p4info.txtpb"
    p4info.write_text(text_format.MessageToString(make_p4info()))
    blob = tmp_path / "test.bin"
    blob.write_bytes(b"reflector")
    spec = {
        "table": "t_exact",
        "match": {"f16": "0x0007", "f9": "1"},
        "action": "set_port",
        "params": {"port": "3"},
        "group": 5,
        "replicas": [[1, 0], [2, 1]],
    }
    out = shell_session(server.address, p4info, blob, spec)
    assert out["tables"] == ["t_const", "t_exact", "t_lpm", "t_ternary"]
    assert out["entries"] == [["07", "01", "03"]]  # canonical bytestrings
    assert out["duplicate"] == [[0, 6]]  # ALREADY_EXISTS, parsed by the shell from our status details
    assert [sorted(g) for g in out["groups"]] == [[[1, 0], [2, 1]]]  # replicas in PI's order


def test_p4runtime_shell_drives_the_real_program(real_server: Server, compiled: tuple[Path, Path]) -> None:
    program, p4info = compiled
    spec = {
        "table": "MyIngress.l2_forward",
        "match": {"hdr.ethernet.dst_addr": "02:00:7f:00:00:0b"},
        "action": "MyIngress.forward",
        "params": {"port": "3"},
        "group": 1,
        "replicas": [[1, 0], [2, 0]],
    }
    out = shell_session(real_server.address, p4info, program, spec)
    assert "MyIngress.job_table" in out["tables"] and "MyEgress.result_dest" in out["tables"]
    assert out["entries"] == [["02007f00000b", "03"]]
    assert out["duplicate"] == [[0, 6]]
    assert out["groups"] == [[[1, 0], [2, 0]]]
