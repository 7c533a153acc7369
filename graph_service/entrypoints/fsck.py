"""The ``fsck`` command: arguments, then ``operations.fsck`` (the checks live there).

Exit codes (SPEC §7): 0 no violation, or with ``--repair-cache`` only cache violations and all of
them deleted; 1 violations left; 2 a usage error; 3 a dependency unreachable (``cli.main`` maps
the exception), or not ready: the counters consumer is behind, so counters were not checked (and
nothing else was found).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from graph_service.domain.ids import MAX_ID, is_id
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import counters_stream
from graph_service.entrypoints.exits import Exit
from graph_service.entrypoints.operator_run import add_output_arguments, measured, target_line
from graph_service.operations.fsck import REDIS_TIMEOUT_SECONDS, FsckPlan, check, clean
from graph_service.operations.fsck_report import KINDS, Report
from graph_service.operations.scanning import MAX_SEGMENTS
from graph_service.redis_client.connect import graph_cache_redis
from graph_service.settings import Settings
from graph_service.telemetry.operator_runs import FsckRunMetrics

__all__ = ["arguments", "run", "run_fsck"]


def _user_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a user ID: {text!r}") from None
    if not is_id(value):
        raise argparse.ArgumentTypeError(f"a user ID is between 1 and {MAX_ID}: {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(f"between 0 and 60 seconds: {text}")
    return value


LIFECYCLE = (
    "The account lifecycle (deactivate, reactivate, delete) is checked too: each pending request's R#"
    " mirrored in following; well-formed state (A), archived (X#) and job registry (followers pk=0, J#)"
    " items; no archived item in an active or a deleted account, nor beside a live edge or request of its"
    " pair; no live edge or request in the partitions of a deactivated or deleted account once its job is"
    " done; no registered job that its account has moved past left for over an hour."
)


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments; the lifecycle's checks and every kind of violation are added to
    its description (the kinds from ``fsck_report.KINDS``, so the help lists each new one)."""
    kinds = f"Violation kinds: {', '.join(KINDS)}."
    parser.description = "\n\n".join(
        [parser.description or "", textwrap.fill(LIFECYCLE, width=100), textwrap.fill(kinds, width=100)]
    )
    parser.add_argument("users", nargs="*", type=_user_id, metavar="USER_ID", help="check these users")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="check every partition and every cache entry")
    which.add_argument("--sample", type=_positive, metavar="N", help="check N users picked at random")
    parser.add_argument(
        "--repair-cache",
        action="store_true",
        help="delete cached entries that disagree with DynamoDB (they refill from it); exit 0 if only those were found",
    )
    parser.add_argument(
        "--segments", type=_positive, default=4, metavar="N", help="parallel scan segments of --all (default: 4)"
    )
    parser.add_argument(
        "--settle-seconds",
        type=_seconds,
        default=1.0,
        metavar="S",
        help="wait this long before looking again at a suspected violation (default: 1; writes in flight settle);"
        " a counters consumer further behind than this leaves the counters unchecked (exit 3)",
    )
    add_output_arguments(parser)


async def run_fsck(
    settings: Settings, plan: FsckPlan, *, out: TextIO | None = None, report: Report | None = None
) -> Report:
    """The checks of ``plan`` (``operations.fsck.check``) on clients of their own, closed at the end."""
    dynamo = AsyncDynamo.build(settings)
    redis = graph_cache_redis(
        replace(settings, redis_timeout_seconds=max(settings.redis_timeout_seconds, REDIS_TIMEOUT_SECONDS))
    )
    try:
        tables = TableNames(settings.table_prefix)
        return await check(dynamo, redis, tables, counters_stream(settings), plan, out=out, report=report)
    finally:
        dynamo.close()
        if redis is not None:
            await redis.aclose()


def run(settings: Settings, args: argparse.Namespace) -> int:
    chosen = bool(args.users) + bool(args.all) + bool(args.sample)
    if chosen != 1:
        print("socialgraph fsck: give USER_IDs, or --all, or --sample N (one of them)", file=sys.stderr)
        return Exit.CONFIGURATION
    if args.segments > MAX_SEGMENTS:
        print(f"socialgraph fsck: --segments is at most {MAX_SEGMENTS}", file=sys.stderr)
        return Exit.CONFIGURATION
    if args.repair_cache and not settings.redis_url:
        print("socialgraph fsck: --repair-cache needs the cache (SG_REDIS_URL is empty)", file=sys.stderr)
        return Exit.CONFIGURATION
    plan = FsckPlan(
        users=tuple(args.users),
        sample=args.sample or 0,
        everything=args.all,
        repair_cache=args.repair_cache,
        segments=args.segments,
        settle_seconds=args.settle_seconds,
    )
    print(target_line("fsck", settings, cache_url=settings.redis_url), file=sys.stderr)
    report = Report(io.StringIO() if args.json else None)  # --json: one object at the end, no lines
    metrics = None if args.metrics_file is None else _metrics(args.metrics_file, report)
    return measured("fsck", metrics, lambda: _check(settings, plan, report, as_json=args.json))


def _metrics(path: Path, report: Report) -> FsckRunMetrics:
    """The run's metrics file, its violations read from ``report`` as it fills."""
    metrics = FsckRunMetrics(path, KINDS)

    def found() -> None:
        metrics.found(
            report.by_kind,
            repaired=report.repaired,
            unconfirmed=len(report.unconfirmed),
            counters_checked=report.counters_not_checked is None,
        )

    metrics.refresh_with(found)
    return metrics


def _check(settings: Settings, plan: FsckPlan, report: Report, *, as_json: bool) -> int:
    asyncio.run(run_fsck(settings, plan, report=report))
    if as_json:
        print(json.dumps(report.as_dict()))
    if not clean(report, plan):
        return Exit.PROBLEMS_FOUND
    return Exit.UNREACHABLE if report.counters_not_checked else Exit.OK
