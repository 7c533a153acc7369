"""``socialgraph import FILE.csv``: arguments, signals and the summary; the work is in
``graph_service/operations/importer.py``.

Ctrl-C (or SIGTERM) stops cleanly: no new batch starts, the batches in flight finish, the state
is saved, and the command says where it stopped and exits 130; a second Ctrl-C stops at once
(the state saved last still holds). Running the same command again continues from there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

import structlog

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.exits import Exit
from graph_service.entrypoints.operator_run import add_output_arguments, measured, target_line
from graph_service.operations.import_state import ImportFileError, ImportState
from graph_service.operations.importer import ImportOptions, ImportResult, check_tables, import_edges, prepare
from graph_service.operations.progress import Meter, meter
from graph_service.settings import Settings
from graph_service.telemetry.operator_runs import ImportRunMetrics

__all__ = ["arguments", "run", "run_import"]

log = structlog.get_logger(__name__)


class _NoMeter:
    """For a run that has nothing to do."""

    def advance(self, done: int = 1) -> None: ...

    def total(self, total: int | None) -> None: ...


NO_METER: Meter = _NoMeter()


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments."""
    parser.add_argument("file", metavar="FILE.csv", type=Path, help="rows follower_id,followee_id[,followed_at]")
    parser.add_argument(
        "--rejects", type=Path, metavar="PATH", help="where rejected rows go (default: FILE.csv.rejects.csv)"
    )
    parser.add_argument(
        "--state", type=Path, metavar="PATH", help="the resume state (default: FILE.csv.import-state.json)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="transactions in flight, 1..64 (default: 8)"
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="forget the saved state and the reject file and start from line 1 (imported rows are skipped)",
    )
    add_output_arguments(parser)


def _options(args: argparse.Namespace) -> ImportOptions:
    source: Path = args.file
    return ImportOptions(
        source=source,
        state_path=args.state or source.with_name(f"{source.name}.import-state.json"),
        rejects_path=args.rejects or source.with_name(f"{source.name}.rejects.csv"),
        concurrency=args.concurrency,
        restart=args.restart,
    )


async def _check_tables(settings: Settings) -> None:
    dynamo = AsyncDynamo.build(settings)
    try:
        await check_tables(dynamo, TableNames(settings.table_prefix))
    finally:
        dynamo.close()


async def run_import(
    settings: Settings, options: ImportOptions, state: ImportState, *, fresh: bool, stop: asyncio.Event, meter: Meter
) -> ImportResult:
    """``importer.import_edges`` on a client of its own, into the tables of ``settings`` under its following cap."""
    dynamo = AsyncDynamo.build(settings)
    try:
        return await import_edges(
            dynamo,
            TableNames(settings.table_prefix),
            options,
            state,
            max_following=settings.max_following,
            fresh=fresh,
            stop=stop,
            meter=meter,
        )
    finally:
        dynamo.close()


async def _import(settings: Settings, options: ImportOptions, metrics: ImportRunMetrics | None) -> ImportResult:
    state, fresh = prepare(options)  # the file's checks first: they touch no table
    print(target_line("import", settings), file=sys.stderr)
    if metrics is not None:
        metrics.refresh_with(lambda: _tally(metrics, state))
    if not state.finished:
        await _check_tables(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping(signum: signal.Signals) -> None:
        print("\nsocialgraph import: stopping after the batches in flight (again to stop at once)", file=sys.stderr)
        stop.set()
        loop.remove_signal_handler(signum)  # the next one interrupts as usual

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping, signum)
    try:
        if state.finished:
            return await run_import(settings, options, state, fresh=fresh, stop=stop, meter=NO_METER)
        with meter("import", stream=sys.stderr) as progress:
            return await run_import(settings, options, state, fresh=fresh, stop=stop, meter=progress)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _summary(result: ImportResult, options: ImportOptions) -> str:
    tally = result.tally
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(tally.rejected.items()))
    rate = result.written_now / result.elapsed_seconds if result.elapsed_seconds else 0.0
    this_run = f"; this run: {result.written_now} written in {result.elapsed_seconds:.1f} s ({rate:,.0f} edges/s)"
    return (
        f"{tally.rows} rows read, {tally.written} written, {tally.already_present} already present,"
        f" {sum(tally.rejected.values())} rejected{f' ({reasons})' if reasons else ''}"
        + ("" if result.already_done else this_run)
        + (f"; rejects in {options.rejects_path}" if tally.rejected else "")
    )


def _tally(metrics: ImportRunMetrics, state: ImportState) -> None:
    tally = state.tally
    metrics.tally(
        read=tally.rows, written=tally.written, already_present=tally.already_present, rejected=tally.rejected
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    options = _options(args)
    if not 1 <= options.concurrency <= 64:
        print("socialgraph import: --concurrency must be 1..64", file=sys.stderr)
        return Exit.CONFIGURATION
    metrics = None if args.metrics_file is None else ImportRunMetrics(args.metrics_file)
    return measured("import", metrics, lambda: _run(settings, options, metrics, as_json=args.json))


def _run(settings: Settings, options: ImportOptions, metrics: ImportRunMetrics | None, *, as_json: bool) -> int:
    try:
        result = asyncio.run(_import(settings, options, metrics))
    except ImportFileError as exc:
        print(f"socialgraph import: {exc}", file=sys.stderr)
        return Exit.CONFIGURATION
    state = result.state
    fields = {
        **result.tally.as_dict(),
        "source": str(options.source),
        "watermark": state.watermark,
        "lines": state.input.lines,
        "finished": result.finished,
        "written_this_run": result.written_now,
        "elapsed_seconds": round(result.elapsed_seconds, 3),
        "edges_per_second": round(result.written_now / result.elapsed_seconds, 1) if result.elapsed_seconds else 0.0,
    }
    log.info("import_summary", **fields)
    if as_json:
        outcome = "already_imported" if result.already_done else "imported" if result.finished else "stopped"
        state_files = {"state_file": str(options.state_path), "rejects_file": str(options.rejects_path)}
        print(json.dumps({"outcome": outcome, **fields, **state_files}))
        return Exit.OK if result.finished else Exit.INTERRUPTED
    if result.already_done:
        print(f"already imported ({options.state_path}): {_summary(result, options)}; --restart imports it again")
        return Exit.OK
    if not result.finished:
        print(f"stopped at line {state.watermark} of {state.input.lines}: {_summary(result, options)}")
        print(f"state saved in {options.state_path}; run the same command again to continue")
        return Exit.INTERRUPTED
    print(f"imported {options.source}: {_summary(result, options)}")
    return Exit.OK
