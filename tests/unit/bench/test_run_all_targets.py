"""``bench/run_all`` judges each figure by SPEC §8's target as §8 states it (reads against their
floor, the floor against echo, ``Follow`` against its floor, the fanout on a cluster against the
single node), and runs the cluster figures a second time on a 3-master Redis Cluster."""

from __future__ import annotations

from typing import Any

from bench.run_all import CLUSTER, benchmarks, cached_h2load, cached_python, fanout, follow_latency, home_timeline


def reads(ratio: float, floor_ratio: float) -> dict[str, Any]:
    read = {"service_rps": 3600, "floor_rps": 4000, "echo_rps": 4500, "ratio": ratio, "ratio_to_echo": 0.8}
    return {
        "results": {"IsFollowing": read, "GetCounts": {**read, "ratio": 0.95}},
        "echo_with_fence": {"fenced_echo_rps": 4000, "echo_rps": 4500, "ratio": floor_ratio},
        "serve_processes": {"1": {"is_following_rps": 2000, "ratio_to_n_x_one": 1.0}},
    }


def test_a_cached_read_is_judged_against_its_floor_and_shows_its_ratio_to_echo() -> None:
    is_following, counts, floor, processes = cached_h2load(reads(0.9, 0.9))
    assert (is_following.passed, counts.passed, floor.passed, processes.passed) == (True, True, True, None)
    assert (is_following.ratio, is_following.baseline) == (0.9, "floor 4000 rps")
    assert "0.80 x echo" in is_following.service
    short, _, slow_floor = cached_python(reads(0.899, 0.899))
    assert (short.passed, slow_floor.passed) == (False, False)
    assert "Python client" in short.figure


def test_the_home_timeline_passes_at_six_tenths_of_echo() -> None:
    report: dict[str, Any] = {
        "following": 200,
        "results": {"h2load": {"service_rps": 600, "echo_rps": 1000, "ratio": 0.6}},
    }
    (row,) = home_timeline(report)
    assert (row.passed, row.target) == (True, ">= 0.6")
    report["results"]["h2load"]["ratio"] = 0.59
    assert home_timeline(report)[0].passed is False


def test_follow_is_judged_against_its_floor_and_the_floor_against_the_write_is_reported() -> None:
    report = {
        "follow": {"p50_ms": 14.7},
        "bare_transact_write_items": {"p50_ms": 11.0},
        "p50_ratio": 1.336,
        "floor": {"p50_ms": 14.0},
        "floor_ratio": 1.273,
        "p50_to_floor": 1.05,
    }
    judged, floor = follow_latency(report)
    assert (judged.passed, judged.ratio, judged.baseline) == (True, 1.05, "floor 14.0 ms")
    assert (floor.passed, floor.ratio, floor.baseline) == (None, 1.273, "TransactWriteItems 11.0 ms")
    assert follow_latency({**report, "p50_to_floor": 1.051})[0].passed is False
    *_, warm, with_read = follow_latency(
        {
            **report,
            "follow_warm": {"p50_ms": 14.2},
            "warm_p50_to_floor": 1.014,
            "lifecycle_read_ms": 3.5,
            "p50_to_floor_with_lifecycle": 0.811,
        }
    )
    assert (warm.passed, warm.ratio, warm.service) == (None, 1.014, "14.2 ms")
    assert (with_read.passed, with_read.ratio, with_read.baseline) == (None, 0.811, "17.5 ms (read 3.5 ms)")


def test_the_fanout_on_a_cluster_is_judged_against_the_single_node_when_measured() -> None:
    report: dict[str, Any] = {
        "followers": 200_000,
        "service_entries_per_s": 100_000,
        "baseline_redis_benchmark_entries_per_s": 150_000,
        "ratio_vs_redis_benchmark": 0.667,
        "baseline_bare_lpush_entries_per_s": 40_000,
        "ratio": 2.5,
    }
    assert len(fanout(report)) == 2
    *_, cluster = fanout({**report, "cluster": {"entries_per_s": 50_000, "ratio_to_single_node": 0.5}})
    assert (cluster.passed, cluster.baseline, cluster.figure) == (
        True,
        "single node 100000/s",
        "fanout of 200,000 entries (cluster)",
    )
    *_, slow = fanout({**report, "cluster": {"entries_per_s": 49_000, "ratio_to_single_node": 0.49}})
    assert slow.passed is False


def test_the_cluster_figures_run_again_on_the_cluster_and_are_marked() -> None:
    runs = benchmarks(quick=True)
    on_cluster = {module for module, args, _ in runs if CLUSTER in args}
    assert on_cluster == {"cached_reads_h2load", "cached_reads", "home_timeline", "relationships", "follow_latency"}
    for module, args, extract in runs:
        if module == "cached_reads_h2load":
            marked = [row.figure.endswith("(cluster)") for row in extract(reads(0.95, 0.95))]
            assert marked == [CLUSTER in args] * len(marked)
            assert (args[-2:] == ["--processes", ""]) == (CLUSTER in args)  # the processes' scaling: once
