"""``socialgraph backfill``: the items the account lifecycle (SPEC §3b) needs that earlier releases
did not write, written for the items that lack them.

- a pending request's mirror in ``following`` (``R#<B>`` under the requester A): a deactivation
  finds an account's own requests through it;
- a block's and a mute's reverse item in the other account's partition (``b#<A>``, ``m#<A>``): a
  deletion finds others' blocks and mutes of the account through them.

One pass over the ``followers`` table (parallel scan segments). Each item is written in one
transaction with a check that what it mirrors is still there with the same ``at`` (a request
accepted or withdrawn meanwhile gets no mirror) and only if it is missing, so the command is
idempotent, safe beside a running service, and resumable by running it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from graph_service.domain.models import Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, transact_write
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.operations.scanning import scan_pages
from graph_service.store import items as it

__all__ = ["BackfillReport", "backfill"]

log = structlog.get_logger(__name__)
CONCURRENCY = 8


@dataclass
class BackfillReport:
    scanned: int = 0
    """Items of the ``followers`` table read."""
    mirrors: int = 0
    """Request mirrors written."""
    reverses: int = 0
    """Reverse items of blocks and mutes written."""


def _still_there(table: str, found: Item) -> Item:
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"pk": found["pk"], "sk": found["sk"]},
            "ConditionExpression": "#at = :at",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {":at": found["at"]},
        }
    }


class Backfill:
    def __init__(self, dynamo: AsyncDynamo, tables: TableNames) -> None:
        self._dynamo = dynamo
        self._followers = tables.table(FOLLOWERS)
        self._following = tables.table(FOLLOWING)
        self.report = BackfillReport()
        self._slots = asyncio.Semaphore(CONCURRENCY)

    def _missing(self, found: Item) -> tuple[str, Item] | None:
        """What the item lacks: (its kind, the item to write), or None for items that lack nothing."""
        sk = str(found["sk"]["S"])
        if "at" not in found or "other" not in found:
            return None
        owner, other = int(found["pk"]["N"]), int(found["other"]["N"])
        if sk.startswith(it.REQUEST) and not sk.startswith(it.REQUEST_ORDER):
            mirror = it.item(it.key(it.REQUEST, other, owner), Edge(owner, int(found["at"]["N"])))
            return "mirrors", it.put(self._following, mirror, only_new=True)
        if sk.startswith(it.BLOCK):
            return "reverses", it.put(self._followers, it.reverse_item(it.BLOCKED_BY, other, owner), only_new=True)
        if sk.startswith(it.MUTE) and not sk.startswith(it.MUTE_ORDER):
            expires = int(found.get("exp", {}).get("N", "0"))
            reverse = it.reverse_item(it.MUTED_BY, other, owner, expires_us=expires)
            return "reverses", it.put(self._followers, reverse, only_new=True)
        return None

    async def _write(self, found: Item) -> None:
        missing = self._missing(found)
        if missing is None:
            return
        kind, element = missing
        async with self._slots:
            if await transact_write(self._dynamo, [_still_there(self._followers, found), element]) is None:
                setattr(self.report, kind, getattr(self.report, kind) + 1)

    async def segment(self, segment: int, segments: int, progress: Callable[[int], None]) -> None:
        async for page in scan_pages(self._dynamo, self._followers, segment=segment, total_segments=segments):
            self.report.scanned += len(page.items)
            await asyncio.gather(*(self._write(found) for found in page.items))
            progress(len(page.items))


async def backfill(
    dynamo: AsyncDynamo, tables: TableNames, *, segments: int = 4, progress: Callable[[int], None] = lambda n: None
) -> BackfillReport:
    """Write every missing request mirror and block or mute reverse item; how many were written."""
    work = Backfill(dynamo, tables)
    await asyncio.gather(*(work.segment(s, segments, progress) for s in range(segments)))
    log.info("backfill_done", scanned=work.report.scanned, mirrors=work.report.mirrors, reverses=work.report.reverses)
    return work.report
