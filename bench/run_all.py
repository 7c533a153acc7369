"""Every SPEC §8 figure in one run: each benchmark of ``bench/`` in turn, then one table.

Run: bench/run_all [--quick] [--json PATH]

Installs h2load (``nghttp2-client``) and redis-benchmark (``redis-tools``) with apt-get if they are
missing. Each benchmark runs as its own process with its own private stack on free ports (so a
running ``socialgraph up`` is no obstacle), prints its JSON, and gives rows of (figure, service,
baseline, ratio, target, pass). The cached reads, their floor, the home timeline,
``GetRelationships`` and ``Follow`` run twice, on a single Redis and then on a 3-master Redis
Cluster (rows marked "(cluster)"); the fanout benchmark measures its cluster figure itself. The
table is printed and written as JSON (default ``.local/bench/run_all.json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    figure: str
    service: str
    baseline: str
    ratio: float | None
    target: str
    passed: bool | None


Extract = Callable[[dict[str, Any]], list[Row]]


CLUSTER = "--cluster"
"""The flag of the benchmarks that also run on a 3-master Redis Cluster."""


def at_least(ratio: float, target: float) -> bool:
    return ratio >= target


def reads_against_floor(report: dict[str, Any], how: str) -> list[Row]:
    """Each cached read against its floor (SPEC §8: at least 0.9), its ratio to the plain echo
    shown beside it; then the floor itself against the echo (at least 0.9)."""
    rows = [
        Row(f"cached {name} ({how})", f"{r['service_rps']} rps ({r['ratio_to_echo']:.2f} x echo)",
            f"floor {r['floor_rps']} rps", r["ratio"], ">= 0.9", at_least(r["ratio"], 0.9))
        for name, r in report["results"].items()
    ]  # fmt: skip
    fenced = report["echo_with_fence"]
    rows.append(
        Row(f"floor: echo IsFollowing after a near-cache read fence ({how})", f"{fenced['fenced_echo_rps']} rps",
            f"echo {fenced['echo_rps']} rps", fenced["ratio"], ">= 0.9", at_least(fenced["ratio"], 0.9))
    )  # fmt: skip
    return rows


def cached_h2load(report: dict[str, Any]) -> list[Row]:
    rows = reads_against_floor(report, "h2load")
    for n, r in report["serve_processes"].items():
        rows.append(
            Row(f"IsFollowing, SG_SERVE_PROCESSES={n} (h2load)", f"{r['is_following_rps']} rps", f"{n} x one process",
                r["ratio_to_n_x_one"], "reported", None)
        )  # fmt: skip
    return rows


def cached_python(report: dict[str, Any]) -> list[Row]:
    return reads_against_floor(report, "Python client")


def relationships(report: dict[str, Any]) -> list[Row]:
    return [
        Row("GetRelationships x100 targets/s", f"{report['get_relationships_targets_per_s']}",
            f"IsFollowing {report['is_following_targets_per_s']}", report["ratio"], ">= 30",
            at_least(report["ratio"], 30))
    ]  # fmt: skip


def follow_latency(report: dict[str, Any]) -> list[Row]:
    """``Follow`` p50 against its floor (SPEC §8: within 1.05x); the floor against the bare write."""
    ratio, floor, bare = report["p50_to_floor"], report["floor"], report["bare_transact_write_items"]
    rows = [
        Row("Follow p50", f"{report['follow']['p50_ms']} ms ({report['p50_ratio']:.2f} x the bare write)",
            f"floor {floor['p50_ms']} ms", ratio, "<= 1.05", ratio <= 1.05),
        Row("Follow p50 floor: the write + a gRPC round trip + a thread hop + 2 Redis round trips",
            f"{floor['p50_ms']} ms", f"TransactWriteItems {bare['p50_ms']} ms", report["floor_ratio"], "reported",
            None),
    ]  # fmt: skip
    if "follow_warm" in report:
        warm, read = report["follow_warm"]["p50_ms"], report["lifecycle_read_ms"]
        rows += [
            Row("Follow p50, the followers' states cached", f"{warm} ms", f"floor {floor['p50_ms']} ms",
                report["warm_p50_to_floor"], "reported", None),
            Row("Follow p50 (states cached) vs the floor + the post-commit state read (SPEC §3b)", f"{warm} ms",
                f"{round(floor['p50_ms'] + read, 3)} ms (read {read} ms)", report["p50_to_floor_with_lifecycle"],
                "reported", None),
        ]  # fmt: skip
    return rows


def fanout(report: dict[str, Any]) -> list[Row]:
    """The fanout against redis-benchmark, and (when ``bench/fanout.py`` measured it) on a 3-master
    Redis Cluster against the single node (SPEC §8: at least 0.5 each)."""
    ratio = report["ratio_vs_redis_benchmark"]
    rows = [
        Row(f"fanout of {report['followers']:,} entries", f"{report['service_entries_per_s']}/s",
            f"redis-benchmark {report['baseline_redis_benchmark_entries_per_s']}/s", ratio, ">= 0.5",
            at_least(ratio, 0.5)),
        Row("fanout vs Python pipelined LPUSH", f"{report['service_entries_per_s']}/s",
            f"{report['baseline_bare_lpush_entries_per_s']}/s", report["ratio"], "reported", None),
    ]  # fmt: skip
    cluster = report.get("cluster")
    if isinstance(cluster, dict):
        ratio = cluster["ratio_to_single_node"]
        rows.append(
            Row(f"fanout of {report['followers']:,} entries (cluster)", f"{cluster['entries_per_s']}/s",
                f"single node {report['service_entries_per_s']}/s", ratio, ">= 0.5", at_least(ratio, 0.5))
        )  # fmt: skip
    return rows


def home_timeline(report: dict[str, Any]) -> list[Row]:
    return [
        Row(f"home timeline first page of 20, {report['following']} followed ({how})", f"{r['service_rps']} rps",
            f"echo {r['echo_rps']} rps", r["ratio"], ">= 0.6", at_least(r["ratio"], 0.6))
        for how, r in report["results"].items()
    ]  # fmt: skip


def on_cluster(extract: Extract) -> Extract:
    """``extract``, its figures marked as measured on the Redis Cluster."""

    def marked(report: dict[str, Any]) -> list[Row]:
        return [replace(row, figure=f"{row.figure} (cluster)") for row in extract(report)]

    return marked


def single_and_cluster(
    module: str, args: list[str], extract: Extract, cluster_args: tuple[str, ...] = ()
) -> list[tuple[str, list[str], Extract]]:
    """``module`` on a single Redis, then on the cluster (with ``cluster_args`` besides)."""
    return [(module, args, extract), (module, [*args, CLUSTER, *cluster_args], on_cluster(extract))]


def import_edges(report: dict[str, Any]) -> list[Row]:
    ratio = report["ratio"]
    return [
        Row("import edges/s", f"{report['import_edges_per_second']}",
            f"TransactWriteItems {report['bare_transact_write_items_edges_per_second']}", ratio, ">= 0.5",
            at_least(ratio, 0.5))
    ]  # fmt: skip


def counts_convergence(report: dict[str, Any]) -> list[Row]:
    worst, target = report["max_s"], report["target_s"]
    return [
        Row(f"counts exact after a {report['follows_per_burst']:,}-follow burst (worst of {report['bursts']})",
            f"{worst} s (median {report['median_s']} s)", f"{target} s", round(worst / target, 3), "<= 1 s",
            worst <= target)
    ]  # fmt: skip


def account_jobs(report: dict[str, Any]) -> list[Row]:
    size = f"{report['followers']:,} followers + {report['followings']:,} followings"
    rows = []
    for kind, r in report["jobs"].items():
        rows.append(
            Row(f"account {kind} job edges/s ({size})", f"{r['job_edges_per_second']}",
                f"TransactWriteItems {r['bare_transact_write_items_edges_per_second']}", r["ratio"], ">= 0.5",
                at_least(r["ratio"], 0.5))
        )  # fmt: skip
        rows.append(
            Row(f"counts exact after the account {kind} job", f"{r['counts_exact_after_s']} s",
                f"after the bare batches {r['bare_counts_exact_after_s']} s", None, "reported", None)
        )  # fmt: skip
    return rows


def fanout_workers(report: dict[str, Any]) -> list[Row]:
    return [
        Row(f"fanout, 2 workers vs 1 on {report['partitions']} partitions", f"{report['two_workers_entries_per_s']}/s",
            f"one worker {report['one_worker_entries_per_s']}/s", report["ratio"], "reported", None)
    ]  # fmt: skip


def benchmarks(quick: bool) -> list[tuple[str, list[str], Extract]]:
    seconds = "2" if quick else "4"
    return [
        # The serving processes' scaling is a figure of its own, measured once (on the single Redis).
        *single_and_cluster("cached_reads_h2load", ["--seconds", seconds], cached_h2load, ("--processes", "")),
        *single_and_cluster("cached_reads", ["--seconds", seconds], cached_python),
        *single_and_cluster("relationships", ["--seconds", seconds], relationships),
        *single_and_cluster("follow_latency", ["--count", "150" if quick else "400"], follow_latency),
        ("fanout", ["--followers", "200000" if quick else "1000000", "--rounds", "1"], fanout),
        ("fanout_workers", ["--authors", "20", "--followers", "1000", "--tweets", "200"] if quick else [],
         fanout_workers),
        *single_and_cluster("home_timeline", ["--seconds", seconds], home_timeline),
        ("import_edges", ["--rows", "2000" if quick else "6000"], import_edges),
        ("counts_convergence", ["--followers", "30", "--followees", "30", "--bursts", "2"] if quick else [],
         counts_convergence),
        ("account_jobs", ["--followers", "300", "--followings", "30", "--sample", "20"] if quick else [],
         account_jobs),
    ]  # fmt: skip


def ensure_tools() -> None:
    """h2load and redis-benchmark, from Debian's packages, installed if missing."""
    wanted = {"h2load": "nghttp2-client", "redis-benchmark": "redis-tools"}
    missing = [package for tool, package in wanted.items() if shutil.which(tool) is None]
    if not missing:
        return
    print(f"installing {', '.join(missing)} (apt-get)", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True)


def run(module: str, args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.{module} failed ({done.returncode}): {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return report


def table(rows: list[Row]) -> str:
    head = ("figure", "service", "baseline", "ratio", "target", "pass")
    cells = [
        (r.figure, r.service, r.baseline, "-" if r.ratio is None else f"{r.ratio:.3f}", r.target,
         "-" if r.passed is None else ("PASS" if r.passed else "FAIL"))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    lines = ["  ".join(str(c[i]).ljust(widths[i]) for i in range(len(head))) for c in [head, *cells]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs and smaller scales (a smoke run)")
    parser.add_argument("--json", type=Path, default=ROOT / ".local" / "bench" / "run_all.json")
    args = parser.parse_args()
    ensure_tools()
    rows: list[Row] = []
    reports: dict[str, Any] = {}
    started = time.monotonic()
    for module, bench_args, extract in benchmarks(args.quick):
        print(f"== bench.{module} {' '.join(bench_args)}", file=sys.stderr, flush=True)
        name = f"{module} (cluster)" if CLUSTER in bench_args else module
        try:
            reports[name] = run(module, bench_args)
            rows.extend(extract(reports[name]))
        except (RuntimeError, ValueError, KeyError) as exc:
            rows.append(Row(f"bench.{name}", "failed", " ".join(str(exc).split())[-80:], None, "-", False))
    print(table(rows))
    machine = {"cpus": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
               "python": platform.python_version(), "platform": platform.platform()}  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"machine": machine, "seconds": round(time.monotonic() - started), "rows": [asdict(r) for r in rows],
             "reports": reports},
            indent=2,
        )
    )  # fmt: skip
    print(f"written: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
