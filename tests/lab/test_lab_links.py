"""Limited links: htb's rate, its burst at rate and at ceiling, and the queue under it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.test_lab_startup import needs_mininet

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))  # the lab's modules (a folder of scripts)
from topology import generate  # noqa: E402


def shaping(lab: object, burst: int) -> str:
    """`tc` of the switch side of a 100 Mbit/s link with a 100-packet queue and `burst` KB bursts."""
    net = lab.build_network(generate("star", 1), "soft", {"s1": 1}, 100.0, 0.0, queue=100, burst=burst)  # type: ignore[attr-defined]
    try:
        dev = net.get("s1").intfs[1].name
        return subprocess.run(
            f"tc class show dev {dev}; tc qdisc show dev {dev}", shell=True, capture_output=True, text=True
        ).stdout
    finally:
        net.stop()


@needs_mininet
@pytest.mark.root
def test_a_busy_link_sends_bursts_at_its_ceiling_as_at_its_rate() -> None:
    # Mininet's htb releases one frame per timer once the link is busy (cburst of one frame): the
    # emulation then wakes every process once per 322-byte frame, while TCP's 64 KB GSO packets pass
    # whole. The lab gives the ceiling the same 15 KB burst as the rate; 0 keeps Mininet's.
    lab = pytest.importorskip("lab", reason="the lab needs Debian's mininet")
    ours = shaping(lab, 15)
    assert re.search(r"rate 100Mbit ceil 100Mbit burst (15\d\d\d)b cburst \1b", ours), ours
    assert "pfifo 10: parent 5:1 limit 100p" in ours
    mininets = shaping(lab, 0)
    assert re.search(r"burst 15\d\d\db cburst 1600b", mininets), mininets


@needs_mininet
@pytest.mark.root
def test_limited_links_mark_ecn_at_both_ends_when_asked_and_only_then() -> None:
    # The embedded switch has no queue to mark at: the links' own egress marks (mininet/lab_ecn.py),
    # on the switch's side and in the host's namespace alike, ahead of htb.
    lab = pytest.importorskip("lab", reason="the lab needs Debian's mininet")
    for ecn_ms, marks in ((5.0, True), (0.0, False)):
        net = lab.build_network(generate("star", 1), "soft", {"s1": 1}, 10.0, 0.0, queue=100, ecn_ms=ecn_ms)
        try:
            switch_side, host = net.get("s1").intfs[1].name, net.get("h1")
            shown = subprocess.run(f"tc filter show dev {switch_side} egress", shell=True,
                                   capture_output=True, text=True).stdout  # fmt: skip
            shown_in_host = host.cmd("tc filter show dev h1-eth0 egress")
            assert ("direct-action" in shown and "name mark" in shown) == marks, shown
            assert ("name mark" in shown_in_host) == marks, shown_in_host
        finally:
            net.stop()
