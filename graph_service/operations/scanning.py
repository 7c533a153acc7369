"""Walking a whole table with DynamoDB parallel scan segments, one partition (one user) at a time.

A Scan returns the items of one partition key together and in sort-key order, and each partition
key falls in exactly one segment of a parallel scan, so every segment can hand over complete
partitions: ``for_each_partition`` runs ``segments`` scans at once and calls ``handle(pk, items)``
for each partition as soon as the next key starts (or the segment ends). Work on one partition must
fit in memory; the edge tables' partitions are one user's list each, and a celebrity's list of 100
million followers would not fit (some 100 bytes an item): that is ``fsck``'s documented limit. A
pass that only tallies items (``reconcile --all``'s census) uses ``for_each_page`` instead, which
holds one page (``page_size`` items) per segment whatever the partitions' sizes.

The scan is not a snapshot: a partition is read as it is when the scan reaches it, so a check that
compares two partitions (both directions of a follow) must read the other side again itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import TableNames

__all__ = [
    "MAX_SEGMENTS",
    "PageHandler",
    "PartitionHandler",
    "ScanPage",
    "approximate_item_count",
    "for_each_page",
    "for_each_partition",
    "sample_partition_keys",
    "scan_pages",
    "total_items",
]

MAX_SEGMENTS = 1_000_000  # DynamoDB's bound on TotalSegments
PartitionHandler = Callable[[int, list[Item]], Awaitable[None]]
PageHandler = Callable[[list[Item]], Awaitable[None]]


@dataclass(frozen=True)
class ScanPage:
    items: list[Item]
    last: bool
    """No page of this segment follows."""


async def scan_pages(
    dynamo: AsyncDynamo,
    table: str,
    *,
    segment: int = 0,
    total_segments: int = 1,
    page_size: int = 1000,
    consistent: bool = True,
) -> AsyncGenerator[ScanPage, None]:
    """The pages of one segment, in order (strongly consistent by default: an operator check must
    not report an item written a moment ago as missing)."""
    request: Item = {"TableName": table, "Limit": page_size, "ConsistentRead": consistent}
    if total_segments > 1:
        request.update(Segment=segment, TotalSegments=total_segments)
    while True:
        response = await dynamo.call("scan", **request)
        last = "LastEvaluatedKey" not in response
        yield ScanPage(response.get("Items", []), last)
        if last:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _partition_key(item: Item, key: str) -> int:
    return int(item[key]["N"])


async def _segment_partitions(
    dynamo: AsyncDynamo,
    table: str,
    handle: PartitionHandler,
    *,
    segment: int,
    total_segments: int,
    key: str,
    page_size: int,
    on_items: Callable[[int], None] | None,
) -> None:
    current: int | None = None
    items: list[Item] = []
    async for page in scan_pages(dynamo, table, segment=segment, total_segments=total_segments, page_size=page_size):
        for item in page.items:
            pk = _partition_key(item, key)
            if pk != current and current is not None:
                await handle(current, items)
                items = []
            current = pk
            items.append(item)
        if on_items is not None:
            on_items(len(page.items))
    if current is not None:
        await handle(current, items)


async def _segment_pages(
    dynamo: AsyncDynamo,
    table: str,
    handle: PageHandler,
    *,
    segment: int,
    total_segments: int,
    page_size: int,
    on_items: Callable[[int], None] | None,
) -> None:
    async for page in scan_pages(dynamo, table, segment=segment, total_segments=total_segments, page_size=page_size):
        await handle(page.items)
        if on_items is not None:
            on_items(len(page.items))


async def _each_segment(segments: int, run: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """``run(segment)`` for every segment at once; the first failure cancels the others and is raised."""
    if not 1 <= segments <= MAX_SEGMENTS:
        raise ValueError(f"segments must be between 1 and {MAX_SEGMENTS}")
    try:
        async with asyncio.TaskGroup() as group:
            for segment in range(segments):
                group.create_task(run(segment))
    except BaseExceptionGroup as failed:
        # A TaskGroup wraps its failures in a group, which the CLI's exit-code table (and any caller
        # catching ``Unavailable`` or ``ClientError``) would not recognise: raise the first one as it is.
        raise _first(failed) from failed


async def for_each_partition(
    dynamo: AsyncDynamo,
    table: str,
    handle: PartitionHandler,
    *,
    segments: int = 4,
    key: str = "pk",
    page_size: int = 1000,
    on_items: Callable[[int], None] | None = None,
) -> None:
    """Call ``handle(pk, items)`` once per partition of ``table`` (``key``: its numeric partition key),
    ``segments`` scans in parallel; ``on_items(n)`` after each page (for a progress meter). The first
    failure of a segment cancels the others and is raised. Holds a whole partition at a time."""

    async def run(segment: int) -> None:
        await _segment_partitions(
            dynamo,
            table,
            handle,
            segment=segment,
            total_segments=segments,
            key=key,
            page_size=page_size,
            on_items=on_items,
        )

    await _each_segment(segments, run)


async def for_each_page(
    dynamo: AsyncDynamo,
    table: str,
    handle: PageHandler,
    *,
    segments: int = 4,
    page_size: int = 1000,
    on_items: Callable[[int], None] | None = None,
) -> None:
    """Call ``handle(items)`` once per scan page of ``table`` (at most ``page_size`` items, a
    partition's items may span pages), ``segments`` scans in parallel; ``on_items(n)`` after each
    page. Memory stays at one page per segment, however large a partition. Failures as
    ``for_each_partition``."""

    async def run(segment: int) -> None:
        await _segment_pages(
            dynamo, table, handle, segment=segment, total_segments=segments, page_size=page_size, on_items=on_items
        )

    await _each_segment(segments, run)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


async def sample_partition_keys(
    dynamo: AsyncDynamo, table: str, wanted: int, *, key: str = "pk", rng: random.Random | None = None
) -> list[int]:
    """About ``wanted`` distinct partition keys spread over the table: the first keys of randomly
    chosen segments of a finely divided scan (each segment is a random slice of the key hash space);
    when the tried segments give too few (a table with fewer keys than segments), the table is read
    from its start for the rest (a small table gives all its keys).

    Each segment is asked for one page only and gives at most a few keys: a segment that starts
    inside a large partition (a celebrity's million followers) would otherwise be read through to
    its next key, and the first segments tried would fill the sample with neighbours."""
    if wanted <= 0:
        return []
    pick = rng or random.Random()  # noqa: S311 - sampling, not security
    total = max(16, min(MAX_SEGMENTS, wanted * 4))
    order = list(range(total))
    pick.shuffle(order)
    found: dict[int, None] = {}
    per_segment = max(1, -(-wanted // total) * 2)
    for segment in order[: max(16, wanted)]:  # a segment gives at least one key unless the table is small
        if len(found) >= wanted:
            break
        taken = 0
        pages = scan_pages(dynamo, table, segment=segment, total_segments=total, page_size=100)
        async with contextlib.aclosing(pages):
            page = await anext(pages)  # one page per segment (see above)
        for item in page.items:
            pk = _partition_key(item, key)
            if pk not in found and taken < per_segment:
                found[pk] = None
                taken += 1
    if len(found) < wanted:
        # Too few keys in the segments tried: the table is small for the sample asked, so read
        # it through until enough are found.
        async with contextlib.aclosing(scan_pages(dynamo, table, page_size=1000)) as pages:
            async for page in pages:
                for item in page.items:
                    found.setdefault(_partition_key(item, key))
                if len(found) >= wanted:
                    break
    return list(found)[:wanted]


async def approximate_item_count(dynamo: AsyncDynamo, table: str) -> int | None:
    """DynamoDB's item count of the table (refreshed about every six hours on AWS): a progress total,
    never a figure to check against."""
    response = await dynamo.call("describe_table", TableName=table)
    count = response.get("Table", {}).get("ItemCount")
    return int(count) if count is not None else None


async def total_items(dynamo: AsyncDynamo, names: TableNames, tables: Sequence[str]) -> int | None:
    """The named tables' approximate item counts summed: a progress meter's total (None when
    DynamoDB gives no count for one of them)."""
    counts = await asyncio.gather(*(approximate_item_count(dynamo, names.table(t)) for t in tables))
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)
