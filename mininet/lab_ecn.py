"""ECN marking on the lab's rate-limited links, so that ECN congestion control has marks to answer.

The embedded switch has no queues (its `enq_qdepth` is always 0), so in the
lab the links' own queues must mark CE (docs/protocol.md, *Congestion*).
fq_codel, RED, CoDel and PIE are the usual qdiscs for that, but kernels
built without them (the lab's machines: only htb, tbf and the fifos) have
none, and Mininet's TCLink only knows htb. So the marker is a small BPF
program at each limited interface's egress hook (clsact, `tc filter ... bpf
da`): a phantom queue drained at the link's rate, marking ECN-capable
packets while it holds more than `mark_ms` of the link's time
(mininet/ecn_marker.c). It marks as a step-marking RED with `ecn` would,
and works on every kernel with BPF and clsact; it needs clang (installed by
`make install`) and tc built with libbpf (Debian's is).

No module here imports Mininet, so tests can attach the marker to plain
veths in namespaces of their own.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("ecn_marker.c")
DEFAULT_MARK_MS = 5.0  # CoDel's target delay: a queue held longer than this is congestion
MTU_FRAME = 1514


class EcnError(RuntimeError):
    """The marker cannot be built or attached; the message says what is missing."""


def threshold_bytes(rate_mbit: float, mark_ms: float) -> int:
    """Bytes of queue above which packets are marked: `mark_ms` at the link rate, at least two full frames
    (below that, htb's own burst would mark a link that is not congested)."""
    return max(int(rate_mbit * 1e6 / 8 * mark_ms / 1000), 2 * MTU_FRAME)


def marker_object(rate_mbit: float, mark_ms: float, build: Path, burst: int) -> Path:
    """The marker compiled for this rate, threshold and htb burst in bytes (cached in `build`: one object
    per triple)."""
    rate = int(rate_mbit * 1e6 / 8)
    threshold = threshold_bytes(rate_mbit, mark_ms)
    target = build / f"ecn-marker-{rate}-{threshold}-{burst}.o"
    if target.exists() and target.stat().st_mtime >= SOURCE.stat().st_mtime:
        return target
    clang = shutil.which("clang")
    if clang is None:
        raise EcnError("ECN-marking links need clang (apt-get install clang, or `make install` as root)")
    build.mkdir(parents=True, exist_ok=True)
    command = [clang, "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu",
               f"-DRATE={rate}ULL", f"-DTHRESHOLD={threshold}ULL", f"-DBURST={burst}ULL", f"-DCAP={2 * threshold}ULL",
               "-c", str(SOURCE), "-o", str(target)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise EcnError(f"clang could not build the ECN marker: {done.stderr.strip()[-500:]}")
    return target


def attach(intf: str, program: Path, netns: str | None = None) -> None:
    """Mark at `intf`'s egress, ahead of its htb (clsact's egress hook runs before the qdisc).

    `netns`: the path of the interface's network namespace (a Mininet host's /proc/PID/ns/net), None
    for this one. tc is run from here with only the network namespace entered: it loads the program
    through the BPF file system, which a Mininet host's own view of /sys does not have.
    """
    enter = ["nsenter", f"--net={netns}"] if netns else []

    def tc(*args: str) -> str:
        done = subprocess.run([*enter, "tc", *args], capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr

    tc("qdisc", "add", "dev", intf, "clsact")
    out = tc("filter", "add", "dev", intf, "egress", "bpf", "da", "obj", str(program), "sec", "tc")
    shown = tc("filter", "show", "dev", intf, "egress")
    if "direct-action" not in shown:
        raise EcnError(f"tc could not attach the ECN marker to {intf}: {out.strip() or shown.strip()}")


def namespace_of(node: object) -> str | None:
    """A Mininet node's network namespace as a path for `attach` (None: the node shares this one)."""
    return f"/proc/{node.pid}/ns/net" if getattr(node, "inNamespace", False) else None  # type: ignore[attr-defined]
