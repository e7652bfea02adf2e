"""The experiments' arithmetic: sizes, ideal figures, target choice, and the baseline's verification."""

from __future__ import annotations

import argparse
import csv
import math
import os
from pathlib import Path

import numpy as np
import pytest

from experiments.report import (
    Report,
    describe_machine,
    human,
    ideal_goodput,
    ideal_speedup,
    p4reduce_efficiency,
    p4reduce_frame,
    parse_sizes,
    progress,
    targets,
    tcp_efficiency,
)
from experiments.step import Step
from hostlib.verify import check_float_sum, make_input


def test_sizes_parse_with_units_and_bad_ones_are_named() -> None:
    assert parse_sizes("64K,1M,100") == [65536, 1 << 20, 100]
    with pytest.raises(argparse.ArgumentTypeError, match="'12Q'"):
        parse_sizes("12Q")
    assert human(16 << 20) == "16 MB" and human(65536) == "64 KB" and human(100) == "100 B"


def test_ideal_speedup_of_in_network_aggregation_over_a_ring() -> None:
    assert ideal_speedup(2) == 1.0
    assert ideal_speedup(4) == 1.5
    assert ideal_speedup(8) == 1.75


def test_ideal_goodput_is_flat_for_p4reduce_and_falls_for_a_ring() -> None:
    link = 500_000.0  # 4 Mbit/s in bytes per second
    flat = {ideal_goodput("p4reduce", n, link, 64, 1500) for n in (2, 4, 8)}
    assert flat == {link * 256 / 322}  # 4·64 bytes of values in a frame of 66 bytes of headers more
    ring = [ideal_goodput("gloo", n, link, 64, 1500) for n in (2, 4, 8)]
    assert ring == sorted(ring, reverse=True) and ring[-1] > link / 2 * 0.95


def test_wire_efficiency_follows_k_and_the_links_mtu() -> None:
    """The embedded switch's default K = 1024 sends 4,162-byte frames; TCP gets the 9000-byte MTU too."""
    assert p4reduce_frame(1024) == 14 + 20 + 8 + 24 + 4096
    assert p4reduce_efficiency(64) < p4reduce_efficiency(1024)
    assert tcp_efficiency() == 1448 / 1514 and tcp_efficiency(9000) == 8948 / 9014


def test_bmv2_is_refused_clearly_when_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("experiments.report.bmv2_available", lambda: False)
    assert targets("auto") == ["soft"]
    with pytest.raises(SystemExit, match="simple_switch_grpc and p4c"):
        targets("bmv2")


def test_a_float32_ring_sum_passes_the_baseline_check_and_a_wrong_sum_fails() -> None:
    world, elements = 4, 4096
    inputs = [make_input(rank, elements, "float32") for rank in range(world)]
    ring_order = inputs[0].copy()
    for x in inputs[1:]:
        ring_order = (ring_order + x).astype(np.float32)  # rounded to float32 at every step
    assert check_float_sum(ring_order, world, elements, "float32")[0]
    wrong = ring_order.copy()
    wrong[17] += np.float32(abs(wrong[17]) * 1e-3 + 1e-3)
    assert not check_float_sum(wrong, world, elements, "float32")[0]


def test_every_figure_names_the_machine_it_ran_on() -> None:
    line = describe_machine()
    assert f"{os.cpu_count()} cores" in line and "Python 3." in line


def test_a_cluster_refuses_to_start_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = pytest.importorskip("experiments.cluster", reason="the cluster needs Debian's mininet")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(cluster.ExperimentError, match="needs root"):
        cluster.StarCluster(2)


def test_each_point_is_the_median_of_its_verified_iterations(tmp_path: Path) -> None:
    report = Report("unit", tmp_path)
    report.rows = [
        {"system": s, "loss": p, "seconds": t, "ok": ok}
        for s, p, t, ok in [
            ("p4reduce", 0.0, 3.0, True),
            ("p4reduce", 0.0, 1.0, True),
            ("p4reduce", 0.0, 2.0, True),
            ("p4reduce", 0.0, 0.0, False),  # a failed all-reduce has no time worth a median
            ("gloo", 0.0, 5.0, True),
            ("gloo", 0.05, 0.0, False),
        ]
    ]
    assert report.medians("seconds", "system", "loss") == {("p4reduce", 0): 2.0, ("gloo", 0): 5.0}
    assert report.medians("seconds", "system") == {"p4reduce": 2.0, "gloo": 5.0}
    failed_point = report.medians("seconds", "system", "loss")["gloo", 0.05]
    assert math.isnan(failed_point)  # tables print it as nan and plots leave it out, instead of a crash


def test_rows_reach_the_csv_as_they_come_and_an_abort_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = Report("unit", tmp_path)
    report.add(_step(seconds=2.0), loss=0.0)
    report.add(_step(seconds=0.0, ok=False, error="AllreduceTimeout: no progress"), loss=0.05)
    with open(tmp_path / "unit.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(row["loss"], row["ok"], row["error"]) for row in rows] == [
        ("0.0", "True", ""),
        ("0.05", "False", "AllreduceTimeout: no progress"),
    ]
    assert report.abort(RuntimeError("agent h2 exited")) == 1
    captured = capsys.readouterr()
    assert "experiments.unit: agent h2 exited" in captured.err
    assert f"2 all-reduce(s) so far are in {tmp_path / 'unit.csv'}" in captured.out


def _step(seconds: float, ok: bool = True, error: str = "") -> Step:
    return Step(
        system="p4reduce",
        workers=2,
        elements=1024,
        dtype="float32",
        iteration=0,
        tensor_bytes=4096,
        seconds=seconds,
        ok=ok,
        retransmissions=0,
        queries=0,
        up_bytes=5800.0,
        down_bytes=5800.0,
        switch_packets=64,
        switch_cpu=0.5,
        error=error,
    )


def test_progress_in_a_log_is_one_line_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    with progress(2, "unit") as advance:
        advance()
        advance()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" after ")[0] for line in lines] == ["unit: 1/2", "unit: 2/2"]


def test_the_hierarchy_experiment_counts_each_leafs_spine_link_at_the_spine_end() -> None:
    """rx of the spine's port is what the leaf sent up, tx what came down: one port per leaf."""
    hierarchy = pytest.importorskip("experiments.hierarchy", reason="the cluster needs Debian's mininet")
    from topology import load

    topos = Path(__file__).resolve().parents[2] / "mininet" / "topos"
    assert hierarchy.spine_links(load(topos / "leafspine8.json")) == [
        ("leaf1", "spine-eth1"),
        ("leaf2", "spine-eth2"),
    ]
    three = hierarchy.spine_links(load(topos / "leafspine12.json"))
    assert [port for _, port in three] == ["spine-eth1", "spine-eth2", "spine-eth3"]
