"""p4reduce-bench: its figures come from the samples it measured, and --hog really loads the machine."""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.synchronize import Event

import pytest

from hostlib.bench import Row, Sample, baseline_verdict, main, print_medians, print_rows, rows_of
from hostlib.contention import CpuClock, Hog, ProcessCpuClock, seconds_per_gb


def sample(rank: int, iteration: int, seconds: float, **extra: object) -> Sample:
    fields: dict = dict(retransmissions=0, queries=2, ok=True, data_sent=100, cpu_seconds=0.004)
    fields.update(extra)
    return Sample(rank, 1 << 20, "float32", iteration, seconds, **fields)


def test_a_call_takes_its_slowest_rank_and_the_figure_is_the_median_over_calls() -> None:
    samples = [sample(0, 0, 0.010), sample(1, 0, 0.030), sample(0, 1, 0.020), sample(1, 1, 0.025)]
    samples.append(sample(0, 2, 0.100))
    samples.append(sample(1, 2, 0.001))
    [row] = rows_of(samples, [1 << 20], ["float32"], gloo=False).values()
    assert row.seconds == 0.030  # max per call: 0.030, 0.025, 0.100; their median
    assert row.asked_per_data == pytest.approx(12 / 600)
    # six calls' CPU over six workers' 4 MiB inputs
    assert row.cpu_per_gb == pytest.approx(6 * 0.004 / (6 * 4 * (1 << 20) / 1e9))


def test_gloo_figures_come_from_the_same_samples() -> None:
    samples = [sample(r, 0, 0.020, gloo_seconds=0.010, gloo_cpu_seconds=0.002) for r in range(2)]
    [row] = rows_of(samples, [1 << 20], ["float32"], gloo=True).values()
    assert row.vs_gloo == pytest.approx(2.0)
    assert row.gloo_cpu_per_gb == pytest.approx(seconds_per_gb(0.004, 2 * 4 * (1 << 20)))


def test_gloo_s_call_also_takes_its_slowest_rank_so_both_systems_are_timed_alike() -> None:
    # Gloo's ranks leave a call at different times too: the figure is its slowest rank's, as p4reduce's
    samples = [
        sample(0, 0, 0.020, gloo_seconds=0.010),
        sample(1, 0, 0.020, gloo_seconds=0.016),
        sample(0, 1, 0.020, gloo_seconds=0.011),
        sample(1, 1, 0.020, gloo_seconds=0.012),
        sample(0, 2, 0.020, gloo_seconds=0.009),
        sample(1, 2, 0.020, gloo_seconds=0.030),
    ]
    [row] = rows_of(samples, [1 << 20], ["float32"], gloo=True).values()
    assert row.gloo_seconds == 0.016  # max per call: 0.016, 0.012, 0.030; their median (all six's: 0.0115)
    assert row.vs_gloo == pytest.approx(0.020 / 0.016)


def test_a_wrong_gloo_sum_fails_the_run_and_is_named_apart_from_p4reduce_s() -> None:
    assert baseline_verdict([sample(0, 0, 0.020)]) == (0, "")  # no baseline, nothing to say
    right = [sample(r, 0, 0.020, gloo_seconds=0.010, gloo_ok=True) for r in range(2)]
    assert baseline_verdict(right) == (0, " (Gloo's: 2 verified, 0 wrong)")
    wrong = right + [sample(0, 1, 0.020, gloo_seconds=0.010, gloo_ok=False)]
    assert baseline_verdict(wrong) == (1, " (Gloo's: 3 verified, 1 wrong)")


def test_the_switch_s_cpu_is_counted_beside_the_workers_and_in_the_total(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # rank 0 carries the switch's CPU over each call; the others have none to report
    samples = [sample(0, i, 0.020, switch_cpu_seconds=0.006) for i in range(2)]
    samples += [sample(1, i, 0.020) for i in range(2)]
    [row] = rows_of(samples, [1 << 20], ["float32"], gloo=False).values()
    reduced = 4 * 4 * (1 << 20)  # four calls' inputs
    assert row.switch_cpu_per_gb == pytest.approx(seconds_per_gb(0.012, reduced))
    assert row.total_cpu_per_gb == pytest.approx(seconds_per_gb(4 * 0.004 + 0.012, reduced))
    print_rows({(1 << 20, "float32"): row}, gloo=False)
    assert "switch s/GB" in capsys.readouterr().out
    print_medians([{(1 << 20, "float32"): row}] * 3, gloo=False)
    assert "total cpu s/GB" in capsys.readouterr().out


def test_without_the_benchmark_s_own_switch_there_is_no_switch_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --controller: the switch is someone else's process, so nothing is claimed about its CPU
    [row] = rows_of([sample(0, 0, 0.020)], [1 << 20], ["float32"], gloo=False).values()
    assert row.switch_cpu_per_gb is None and row.total_cpu_per_gb is None
    print_rows({(1 << 20, "float32"): row}, gloo=False)
    assert "switch s/GB" not in capsys.readouterr().out


def _work_then_wait(cpu_seconds: float, go: Event, done: Event, stop: Event) -> None:
    """Once told to go, spin for `cpu_seconds` of this process's CPU (however busy the machine), then idle."""
    go.wait(30)
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass
    done.set()
    stop.wait(30)


def test_process_cpu_clock_counts_another_process_s_work_and_not_its_sleep() -> None:
    ctx = multiprocessing.get_context("spawn")
    go, done, stop = ctx.Event(), ctx.Event(), ctx.Event()
    go.set()
    idle = ctx.Process(target=_work_then_wait, args=(0.0, go, done, stop))
    idle.start()
    try:
        assert done.wait(30) and idle.pid is not None  # started, and now only waits: its clock stands still
        clock = ProcessCpuClock(idle.pid)
        time.sleep(0.3)
        assert clock.seconds() < 0.05
    finally:
        stop.set()
        idle.join()
    for event in (go, done, stop):
        event.clear()
    busy = ctx.Process(target=_work_then_wait, args=(0.5, go, done, stop))
    busy.start()
    try:
        assert busy.pid is not None
        clock = ProcessCpuClock(busy.pid)  # before it is told to go: every second of its work is counted
        go.set()
        assert done.wait(60)
        assert clock.seconds() >= 0.5
    finally:
        stop.set()
        busy.join()
    with pytest.raises(ProcessLookupError):
        ProcessCpuClock(busy.pid)
    assert ProcessCpuClock(os.getpid()).seconds() >= 0.0


def test_medians_print_the_spread_of_the_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [{(1 << 20, "float32"): Row(s, 1.0, 0, 0, 0.01, 1.5)} for s in (0.03, 0.01, 0.02)]
    print_medians(runs, gloo=False)
    out = capsys.readouterr().out
    assert "median of 3 runs" in out and "0.020 (0.010-0.030) s" in out


def test_hog_keeps_its_processes_busy_for_the_block_and_stops_them() -> None:
    hog = Hog(1)
    with hog:
        processes = list(hog._processes)
        time.sleep(0.5)
        assert all(p.is_alive() for p in processes)
    assert not any(p.is_alive() for p in processes)
    assert Hog(0).describe().startswith("idle") and "--hog 2" in Hog(2).describe()


def test_cpu_clock_counts_this_process_only_while_it_works() -> None:
    clock = CpuClock()
    time.sleep(0.2)
    assert clock.seconds() < 0.1
    end = time.monotonic() + 5.0  # on a busy host the loop gets a share of a core, not a whole one
    while time.monotonic() < end and clock.seconds() <= 0.1:
        pass
    assert clock.seconds() > 0.1


def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--hog", "-1"], ["--runs", "0"], ["--values-per-packet", "100"]):
        with pytest.raises(SystemExit) as exit:
            main(argv)
        assert exit.value.code == 2
    assert "--hog" in capsys.readouterr().err


@pytest.mark.slow
def test_a_small_run_under_hog_through_the_switch_verifies_every_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--sizes", "4K", "--dtypes", "int32", "--iters", "2", "--runs", "2", "--hog", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 busy process (--hog 1)" in out and "asked/DATA" in out and "median of 2 runs" in out
    assert "PASS: 16 verified all-reduces, 0 wrong" in out


@pytest.mark.slow
def test_a_run_against_gloo_verifies_both_systems_sums(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch.distributed", reason="--baseline gloo needs PyTorch")
    argv = ["--sizes", "4K", "--dtypes", "float32,int32", "--iters", "2", "--baseline", "gloo"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vs gloo" in out
    assert "PASS: 16 verified all-reduces, 0 wrong (Gloo's: 16 verified, 0 wrong)" in out
