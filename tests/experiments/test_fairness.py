"""The fairness experiment's arithmetic: Jain's index and the TCP flow's share of iperf3's report."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mininet") is None,
    reason="experiments.fairness imports the lab (Debian's mininet)",
)


def test_jain_is_one_for_equal_shares_and_one_over_n_when_one_flow_takes_all() -> None:
    from experiments.fairness import jain

    assert jain([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain([6.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain([1.0, 1.0, 2.0]) == pytest.approx(16 / 18)
    assert jain([0.0, 0.0, 0.0]) == 0.0


def test_tcp_counts_only_what_arrived_while_the_jobs_ran() -> None:
    from experiments.fairness import tcp_received

    intervals = [{"sum": {"start": t / 2, "end": t / 2 + 0.5, "bytes": 1000}} for t in range(16)]  # 8 s
    assert tcp_received(json.dumps({"intervals": intervals}), 5.0) == (10_000, 5.0)
    assert tcp_received("iperf3: error - unable to connect", 5.0) == (0, 0.0)
