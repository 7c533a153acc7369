"""``bench/run_all``'s table: each benchmark's report becomes rows that pass or fail against the
SPEC §8 target, reported figures have no verdict, and the table shows them all."""

from __future__ import annotations

from bench.run_all import (
    account_jobs,
    benchmarks,
    cached_h2load,
    counts_convergence,
    fanout,
    fanout_workers,
    follow_latency,
    table,
)

FANOUT = {
    "followers": 1_000_000,
    "service_entries_per_s": 108_963,
    "baseline_redis_benchmark_entries_per_s": 173_100,
    "ratio_vs_redis_benchmark": 0.629,
    "baseline_bare_lpush_entries_per_s": 44_560,
    "ratio": 2.445,
}


def test_ratios_pass_at_the_target_and_fail_below_it() -> None:
    passed, reported = fanout(FANOUT)
    assert (passed.ratio, passed.passed, reported.passed) == (0.629, True, None)
    (short, _) = fanout({**FANOUT, "ratio_vs_redis_benchmark": 0.499})
    assert short.passed is False


def test_a_latency_passes_at_most_its_target_and_its_floor_is_reported() -> None:
    report = {
        "follow": {"p50_ms": 12.0},
        "bare_transact_write_items": {"p50_ms": 10.0},
        "p50_ratio": 1.2,
        "floor": {"p50_ms": 11.9},
        "floor_ratio": 1.19,
    }
    judged, floor = follow_latency(report)
    assert judged.passed is True
    assert (floor.ratio, floor.passed, floor.service) == (1.19, None, "11.9 ms")
    assert follow_latency({**report, "p50_ratio": 1.287})[0].passed is False


def test_cached_reads_are_judged_and_their_floor_and_processes_reported() -> None:
    report = {
        "results": {"IsFollowing": {"service_rps": 4000, "echo_rps": 5000, "ratio": 0.8}},
        "echo_with_fence": {"fenced_echo_rps": 3500, "echo_rps": 5000, "ratio": 0.7},
        "serve_processes": {"1": {"is_following_rps": 2000, "ratio_to_n_x_one": 1.0}},
    }
    judged, floor, processes = cached_h2load(report)
    assert (judged.passed, floor.passed, processes.passed) == (True, None, None)
    assert (floor.ratio, floor.service) == (0.7, "3500 rps")


def test_counts_convergence_is_judged_by_its_worst_burst() -> None:
    report = {"follows_per_burst": 10_000, "bursts": 3, "median_s": 0.05, "max_s": 0.094, "target_s": 1.0}
    (row,) = counts_convergence(report)
    assert (row.passed, row.ratio) == (True, 0.094)
    assert counts_convergence({**report, "max_s": 1.2})[0].passed is False


def test_each_account_job_is_judged_by_its_ratio_and_its_convergence_reported() -> None:
    job = {
        "job_edges_per_second": 53.5,
        "bare_transact_write_items_edges_per_second": 65.7,
        "ratio": 0.814,
        "counts_exact_after_s": 0.095,
        "bare_counts_exact_after_s": 0.476,
    }
    report = {"followers": 1000, "followings": 100, "jobs": {"deactivate": job, "delete": {**job, "ratio": 0.499}}}
    deactivate, converged, delete, _ = account_jobs(report)
    assert (deactivate.passed, delete.passed, converged.passed) == (True, False, None)
    assert "1,000 followers + 100 followings" in deactivate.figure
    assert converged.service == "0.095 s"


def test_reported_figures_have_no_verdict_and_every_row_is_in_the_table() -> None:
    workers = {
        "partitions": 4,
        "one_worker_entries_per_s": 104_198,
        "two_workers_entries_per_s": 116_113,
        "ratio": 1.114,
    }
    rows = fanout(FANOUT) + fanout_workers(workers)
    assert rows[-1].passed is None
    text = table(rows).splitlines()
    assert len(text) == 2 + len(rows)
    assert text[2].rstrip().endswith("PASS")
    assert text[-1].rstrip().endswith("-")


def test_every_benchmark_runs_in_both_modes() -> None:
    full, quick = benchmarks(quick=False), benchmarks(quick=True)
    assert [m for m, _, _ in full] == [m for m, _, _ in quick]
    assert {"counts_convergence", "fanout_workers", "home_timeline", "fanout"} <= {m for m, _, _ in full}
