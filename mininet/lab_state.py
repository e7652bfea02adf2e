"""What a lab or experiment of this checkout started, so that `make stop` removes exactly that.

A lab interrupted hard (kill -9, a lost terminal) leaves switch daemons,
its controller, Mininet's host shells and their links behind. Instead of
killing every process whose command line looks like a lab's and deleting
every `*-ethN` interface on the machine (another checkout's lab, or another
user's, among them), each run records in `.lab-state.json` at the root of
its checkout the processes it started (pid with the command line it had,
so a pid the kernel has since given to another program is left alone) and
the links it made, and removes its record when it tears down cleanly.
`make stop` (`mininet/lab.py --clean`) then ends the recorded processes that
still run as recorded and deletes the recorded links that still exist.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

STATE = Path(os.environ.get("P4REDUCE_LAB_STATE", Path(__file__).resolve().parents[1] / ".lab-state.json"))


def command_line(pid: int) -> str | None:
    """The command line of a running process, or None when there is none."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


@dataclass
class Record:
    """One run: the processes it started and the links it made."""

    owner: int = field(default_factory=os.getpid)
    processes: dict[int, str] = field(default_factory=dict)  # pid -> its command line when recorded
    links: list[str] = field(default_factory=list)


class LabState:
    def __init__(self, path: Path = STATE) -> None:
        self.path = path
        self.record = Record()
        self.add([self.record.owner])  # the runner itself: `make stop` ends a hung run too

    def add(self, pids: Iterable[int], links: Iterable[str] = ()) -> None:
        """Remember processes (while they run) and links of this run, on disk at once."""
        for pid in pids:
            line = command_line(pid)
            if line:
                self.record.processes[pid] = line
        self.record.links += [name for name in links if name not in self.record.links]
        self._save(self._others() + [self.record])

    def done(self) -> None:
        """The run tore down cleanly: nothing of it is left to remove."""
        self._save(self._others())

    def _others(self) -> list[Record]:
        return [r for r in load(self.path) if r.owner != self.record.owner]

    def _save(self, records: list[Record]) -> None:
        save(records, self.path)


def save(records: list[Record], path: Path = STATE) -> None:
    if not records:
        path.unlink(missing_ok=True)
        return
    data = [{"owner": r.owner, "processes": r.processes, "links": r.links} for r in records]
    path.write_text(json.dumps(data, indent=1) + "\n")


def load(path: Path = STATE) -> list[Record]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    records = []
    for item in data if isinstance(data, list) else []:
        processes = {int(pid): str(line) for pid, line in dict(item.get("processes", {})).items()}
        records.append(Record(int(item.get("owner", 0)), processes, [str(n) for n in item.get("links", [])]))
    return records


def clean(path: Path = STATE) -> list[str]:
    """End the recorded processes still running as recorded, delete the recorded links; what was done."""
    done = []
    for record in load(path):
        for pid, line in record.processes.items():
            if pid != os.getpid() and command_line(pid) == line:
                os.kill(pid, signal.SIGKILL)
                done.append(f"killed {pid} ({line[:60]})")
        for name in record.links:
            if subprocess.run(["ip", "link", "del", name], capture_output=True).returncode == 0:
                done.append(f"deleted link {name}")
    path.unlink(missing_ok=True)
    return done
