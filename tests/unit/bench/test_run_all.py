"""``bench/run_all``'s table: each benchmark's report becomes rows that pass or fail against the
SPEC §8 target, reported figures have no verdict, and the table shows them all."""

from __future__ import annotations

from bench.run_all import (
    account_jobs,
    benchmarks,
    counts_convergence,
    fanout,
    fanout_workers,
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
