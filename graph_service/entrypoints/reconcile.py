"""``socialgraph reconcile [USER_ID ...] [--all] [--fix]``: arguments, wiring and printing; the
work is ``graph_service.operations.reconcile``.

Exit codes (SPEC §7): 0 no drift, or all of it fixed; 1 drift left; 2 a usage error; 3 a dependency
unreachable, or not ready: the counters consumer is behind by more than ``--settle-seconds``, so
nothing was checked (run it again once the consumer has caught up).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache, counters_stream
from graph_service.entrypoints.exits import Exit
from graph_service.entrypoints.operator_run import add_output_arguments, measured, target_line
from graph_service.operations.reconcile import Reconciler, Report
from graph_service.operations.reconcile_rules import parse_user_ids, tally
from graph_service.operations.scanning import MAX_SEGMENTS
from graph_service.settings import Settings
from graph_service.telemetry.operator_runs import ReconcileRunMetrics

__all__ = ["arguments", "run"]


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments."""
    parser.add_argument("user_ids", nargs="*", metavar="USER_ID", help="the users to check")
    parser.add_argument(
        "--all",
        action="store_true",
        help="check every user (parallel scans of users, following and followers), including the"
        " following cap's count of follows plus pending requests",
    )
    parser.add_argument("--fix", action="store_true", help="write the true counts where drift is stable")
    parser.add_argument("--segments", type=int, default=4, help="parallel scan segments per table with --all (4)")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=5.0,
        help="wait between two observations of a drifted user; must exceed the counters consumer's lag (5):"
        " further behind, nothing is checked (exit 3)",
    )
    add_output_arguments(parser)


def _usage(message: str) -> int:
    print(f"socialgraph reconcile: {message}", file=sys.stderr)
    return Exit.CONFIGURATION


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        user_ids = parse_user_ids(args.user_ids)
    except ValueError as exc:
        return _usage(str(exc))
    if bool(user_ids) == bool(args.all):
        return _usage("give USER_IDs or --all (not both)")
    if not 1 <= args.segments <= MAX_SEGMENTS:
        return _usage(f"--segments must be between 1 and {MAX_SEGMENTS}")
    if not 0 <= args.settle_seconds <= 3600:
        return _usage("--settle-seconds must be between 0 and 3600")
    print(target_line("reconcile", settings, cache_url=settings.redis_url if args.fix else None), file=sys.stderr)
    metrics = None if args.metrics_file is None else ReconcileRunMetrics(args.metrics_file)
    return measured("reconcile", metrics, lambda: _run(settings, args, user_ids, metrics))


def _run(settings: Settings, args: argparse.Namespace, user_ids: list[int], metrics: ReconcileRunMetrics | None) -> int:
    report = asyncio.run(_reconcile(settings, args, user_ids))
    if metrics is not None:
        metrics.result("counters", tally(report.users, report.users_checked))
        if report.outgoing is not None:
            metrics.result("outgoing", tally(report.outgoing, report.outgoing_checked))
        metrics.behind.set(0 if report.behind is None else report.behind.seconds)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        for line in report.lines():
            print(line)
    if report.behind is not None:  # not ready to be checked: as a dependency that does not answer
        return Exit.UNREACHABLE
    return Exit.PROBLEMS_FOUND if report.unresolved else Exit.OK


async def _reconcile(settings: Settings, args: argparse.Namespace, user_ids: list[int]) -> Report:
    dynamo = AsyncDynamo.build(settings)
    cache = build_graph_cache(settings) if args.fix else None
    try:
        reconciler = Reconciler(
            dynamo,
            TableNames(settings.table_prefix),
            cache,
            counters=counters_stream(settings),
            fix=args.fix,
            settle_seconds=args.settle_seconds,
        )
        if args.all:
            return await reconciler.everyone(segments=args.segments)
        return await reconciler.users(user_ids)
    finally:
        if cache is not None:
            await cache.aclose()
        dynamo.close()
