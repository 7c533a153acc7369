"""The soak's report: the figures gathered by ``bench.soak`` (a JSON-ready dict) as text, ending
with ``violations: N``."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from bench.soak_faults import DESCRIPTIONS, Crash, Fault
from bench.soak_load import Failure, Record

__all__ = ["call_table", "error_examples", "error_split", "render"]


def _ms(ordered: list[float], q: float) -> float:
    return round(ordered[max(0, math.ceil(len(ordered) * q) - 1)] * 1000, 1) if ordered else 0.0  # nearest rank


def call_table(record: Record) -> dict[str, dict[str, float]]:
    """Per RPC: calls, errors, p50 and p99 of the successful calls (ms)."""
    errors = Counter(f.rpc for f in record.failures)
    table = {}
    for rpc in sorted(record.calls):
        ordered = sorted(record.latencies.get(rpc, []))
        table[rpc] = {
            "calls": record.calls[rpc],
            "errors": errors[rpc],
            "p50_ms": _ms(ordered, 0.5),
            "p99_ms": _ms(ordered, 0.99),
        }
    return table


def error_examples(failures: list[Failure]) -> dict[str, str]:
    """The first message of each (RPC, code), as the caller saw it."""
    examples: dict[str, str] = {}
    for failure in failures:
        examples.setdefault(f"{failure.rpc} {failure.code}", failure.detail)
    return examples


def error_split(
    failures: list[Failure], windows: list[tuple[float, float]], origin: float
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]], list[str]]:
    """Errors by code and RPC inside the fault windows and outside them (a call counts as inside
    when it overlaps a window), and the first few unexpected ones (outside, or not UNAVAILABLE)."""
    inside: dict[str, Counter[str]] = {}
    outside: dict[str, Counter[str]] = {}
    unexpected: list[str] = []
    for failure in failures:
        start, end = failure.started - origin, failure.ended - origin
        within = any(start <= to and end >= since for since, to in windows)
        (inside if within else outside).setdefault(failure.code, Counter())[failure.rpc] += 1
        if (not within or failure.code != "UNAVAILABLE") and len(unexpected) < 10:
            unexpected.append(f"{failure.rpc} {failure.code} at {start:.1f}-{end:.1f} s: {failure.detail}")
    return (
        {code: dict(by_rpc) for code, by_rpc in inside.items()},
        {code: dict(by_rpc) for code, by_rpc in outside.items()},
        unexpected,
    )


def _errors(by_code: dict[str, dict[str, int]]) -> str:
    if not by_code:
        return "none"
    return "; ".join(
        f"{code} {sum(by_rpc.values())} ({', '.join(f'{rpc} {n}' for rpc, n in sorted(by_rpc.items()))})"
        for code, by_rpc in sorted(by_code.items())
    )


def _time(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _faults(faults: list[dict[str, Any]]) -> list[str]:
    if not faults:
        return ["faults: none (--no-faults)"]
    lines = ["faults (seconds into the run; ready = every affected process's /readyz 200 again):"]
    lines.append(f"  {'planned':>8} {'injected':>9} {'healed':>8} {'ready':>8}  fault")
    for f in faults:
        fault = Fault(**f)
        line = (
            f"  {_time(fault.planned):>8} {_time(fault.injected):>9} {_time(fault.healed):>8} {_time(fault.ready):>8}"
        )
        lines.append(f"{line}  {DESCRIPTIONS[fault.kind]}" + (f"  FAILED: {fault.error}" if fault.error else ""))
    return lines


def _missing(tweets: dict[str, Any]) -> list[str]:
    if not tweets["count"]:
        return []
    first, last = tweets["posted_s"]
    return [f"  {tweets['count']} distinct tweets missing, posted between {first:.1f} s and {last:.1f} s into the run"]


def _crashes(crashes: list[dict[str, Any]]) -> list[str]:
    if not crashes:
        return ["unprompted exits: none"]
    lines = ["unprompted exits (seconds into the run; the service's processes are started again with backoff):"]
    for c in (Crash(**fields) for fields in crashes):
        back = f"up again at {_time(c.up)}" if c.up is not None else "NOT up again"
        lines.append(f"  {c.component} exited {c.exit_code} at {_time(c.at)}, {back}: {c.last_words}")
        lines.extend(f"    then {line}" for line in c.again)
    return lines


def render(report: dict[str, Any]) -> str:
    run, capacity, checks = report["run"], report["capacity"], report["timelines"]
    lines = [
        f"soak: {report['minutes']} min at {report['load']:.0%} of capacity, {report['users']} users "
        f"(each follows {report['stable']} accounts for the whole run, toggles {report['toggled']} more), "
        f"seed {report['seed']}; folder {report['folder']}",
        f"capacity: {capacity['calls_per_s']:.0f} calls/s (closed loop, {capacity['callers']} callers, "
        f"{capacity['seconds']:.0f} s; {capacity['errors']} errors)",
        f"run: target {run['target_per_s']:.0f} calls/s, achieved {run['achieved_per_s']:.0f} calls/s "
        f"({run['achieved_per_s'] / capacity['calls_per_s']:.0%} of capacity) over {run['seconds']:.0f} s, "
        f"{run['callers']} paced callers; {run['tweets']} tweets posted",
        "calls/s per 10 s: " + " ".join(f"{rate:.0f}" for rate in run["per_10s"]),
        "calls by RPC (p50/p99 of the successful ones):",
    ]
    for rpc, row in report["calls"].items():
        lines.append(
            f"  {rpc:<16} {row['calls']:>8} calls {row['errors']:>6} errors  "
            f"p50 {row['p50_ms']:>7.1f} ms  p99 {row['p99_ms']:>7.1f} ms"
        )
    lines += [
        f"errors in fault windows (expected: UNAVAILABLE only): {_errors(report['errors_in_fault_windows'])}",
        f"errors outside fault windows: {_errors(report['errors_outside_fault_windows'])}",
        *(f"  unexpected: {line}" for line in report["unexpected_errors"]),
        *(f"  first {what}: {detail}" for what, detail in report["error_examples"].items()),
        *_faults(report["faults"]),
        *_crashes(report["crashes"]),
        f"RSS (MB)        {'start':>8} {'end':>8}  restarts",
    ]
    for name, start in report["rss_mb"]["start"].items():
        end = report["rss_mb"]["end"].get(name, 0.0)
        lines.append(f"  {name:<14} {start:>8.1f} {end:>8.1f}  {report['restarts'].get(name, 0)}")
    settle, fsck = report["settle"], report["fsck"]
    caught_up = f"caught up after {_time(settle['seconds'])}" if settle["seconds"] is not None else None
    lines += [
        f"settle: {caught_up or 'NOT caught up: ' + settle['state']}"
        " (counters and relay stream lag 0, fanout Kafka lag 0)",
        f"fsck --all: exit {fsck['exit_code']} in {fsck['seconds']:.1f} s: {fsck['summary']}",
        *(f"  {line}" for line in fsck["lines"]),
        f"timelines: {checks['users']} users, {checks['expected']} entries expected from {checks['tweets_checked']} "
        f"tweets posted after the last Redis start ({checks['tweets_before']} before it not checked: Redis restarts "
        f"empty), {checks['beyond_cap']} beyond the cap; {len(checks['missing'])} missing "
        f"after {checks['seconds']:.1f} s of reading",
        *_missing(report["missing_tweets"]),
        *(f"  missing: user {user} tweet {tweet}" for user, tweet in checks["missing"][:10]),
        f"stale reads: {len(report['stale_reads'])} (IsFollowing after the same caller's acknowledged write)",
        *(f"  {line}" for line in report["stale_reads"][:10]),
        "violations by kind: " + ", ".join(f"{kind} {n}" for kind, n in report["violations"].items()),
        f"violations: {sum(report['violations'].values())}",
    ]
    return "\n".join(lines)
