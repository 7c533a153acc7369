"""``socialgraph backfill``: arguments, wiring and printing; the work is
``graph_service.operations.backfill``. Run once after upgrading to the release with the account
lifecycle (docs/operating.md, "Upgrading"); running it again writes nothing.

Exit codes (SPEC §7): 0 done; 2 a usage error; 3 DynamoDB unreachable (run it again).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.exits import Exit
from graph_service.operations.backfill import BackfillReport, backfill
from graph_service.operations.scanning import MAX_SEGMENTS
from graph_service.settings import Settings

__all__ = ["arguments", "run"]


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's own arguments."""
    parser.add_argument("--segments", type=int, default=4, help="parallel scan segments of the followers table (4)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    if not 1 <= args.segments <= MAX_SEGMENTS:
        print(f"socialgraph backfill: --segments must be between 1 and {MAX_SEGMENTS}", file=sys.stderr)
        return Exit.CONFIGURATION
    report = asyncio.run(_backfill(settings, args.segments))
    print(
        f"backfill: {report.scanned} items read, {report.mirrors} request mirrors and"
        f" {report.reverses} block and mute reverse items written"
    )
    return Exit.OK


async def _backfill(settings: Settings, segments: int) -> BackfillReport:
    dynamo = AsyncDynamo.build(settings)
    try:
        return await backfill(dynamo, TableNames(settings.table_prefix), segments=segments)
    finally:
        dynamo.close()
