"""Whether the counters consumer is caught up: ``fsck`` and ``reconcile`` judge counters only then.

Both take a counter that differs from the edges for drift only if two looks ``--settle-seconds``
apart agree, which assumes the consumer applies what is committed within that time. A consumer
minutes behind (a bulk import, an outage) leaves thousands of counters short of their edges and
still through both looks: ``fsck`` reported each as ``counter_drift`` (1,655 of them 150 s after a
20,000-edge import), and ``reconcile --fix`` would write true counts the consumer then moves again.

The rule, per shard of the ``followers`` stream: where the consumer's checkpoint is, and the newest
record after it (up to ``MAX_PAGES`` reads). Nothing after any checkpoint: caught up, at no wait.
Otherwise, ``settle_seconds`` later, the checkpoints are read again: caught up if each reached the
newest record seen before (so the consumer's lag is below ``settle_seconds``, the bound the counter
checks already rest on, whatever the clocks say); if not, it is behind by now minus the creation
time of the oldest record still unread, and at least ``settle_seconds``. DynamoDB rounds that time
down to the second (DynamoDB Local to the minute), so the figure errs high by up to that much.

Unknown, and the counters checked as before: the table has no stream (no consumer to wait for),
or the consumer keeps no checkpoint at all (the Lambda shape, where Lambda owns the positions; a
consumer that never ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from botocore.exceptions import ClientError

from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.operations.concurrency import bounded
from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from graph_service.telemetry.streams import record_created_at

__all__ = ["MAX_PAGES", "Behind", "CountersStream", "counters_behind", "shards_behind"]

log = structlog.get_logger(__name__)

MAX_PAGES = 5
"""GetRecords pages (1,000 records each) read per shard to find its newest record: a backlog longer
than that is not caught up within any sensible ``--settle-seconds`` anyway."""
PAGE = 1000


@dataclass(frozen=True, slots=True)
class CountersStream:
    """Where the counters consumer keeps its place, and how to read the stream it reads."""

    consumer: str
    """The consumer's checkpoint namespace (``SG_COUNTERS_CONSUMER_NAME``)."""
    open_streams: Callable[[], AsyncDynamo]
    """A new DynamoDB Streams client, opened when the consumer has checkpoints and closed after the look."""


@dataclass(frozen=True, slots=True)
class Behind:
    """The counters consumer had not caught up by the second look."""

    seconds: float
    """How far behind the oldest record it has not applied is (an upper bound: see the module)."""
    shards: int
    """Shards with records it had not reached."""

    def line(self) -> str:
        return f"counters consumer {self.seconds:.0f} s behind"


def shards_behind(newest: Mapping[str, str], checkpoints: Mapping[str, Checkpoint]) -> list[str]:
    """The shards whose checkpoint has not reached the newest record seen there at the first look
    (``newest``: sequence numbers by shard); a finished shard is caught up."""
    behind = []
    for shard, sequence in sorted(newest.items()):
        checkpoint = checkpoints.get(shard, Checkpoint())
        if checkpoint.done:
            continue
        if checkpoint.sequence is None or int(checkpoint.sequence) < int(sequence):
            behind.append(shard)
    return behind


async def counters_behind(
    dynamo: AsyncDynamo,
    tables: TableNames,
    counters: CountersStream,
    *,
    settle_seconds: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Behind | None:
    """None when the counters consumer is caught up (or its lag cannot be known: the module says
    when); else how far behind it is. Waits ``settle_seconds`` only when records are unread."""
    described = await dynamo.call("describe_table", TableName=tables.table(FOLLOWERS))
    arn = described["Table"].get("LatestStreamArn")
    if not arn:
        return None
    checkpoints = CheckpointStore(dynamo, tables, counters.consumer)
    first = await checkpoints.load_all()
    if not first:
        log.info("counters_lag_unknown", reason="the counters consumer keeps no checkpoints (Lambda, or it never ran)")
        return None
    streams = counters.open_streams()
    try:
        reader = _ShardReader(streams, str(arn))
        at_first = {s: first.get(s, Checkpoint()) for s in await reader.shards()}
        shards = [s for s, checkpoint in at_first.items() if not checkpoint.done]
        found = await bounded([functools.partial(reader.newest, s, at_first[s].sequence) for s in shards])
        newest = {shard: sequence for shard, sequence in zip(shards, found, strict=True) if sequence is not None}
        if not newest:
            return None
        await sleep(settle_seconds)
        second = await checkpoints.load_all()
        behind = shards_behind(newest, second)
        if not behind:
            return None
        unread_after = {s: second.get(s, Checkpoint()).sequence for s in behind}
        oldest = await bounded([functools.partial(reader.oldest_at, s, after) for s, after in unread_after.items()])
    finally:
        streams.close()
    now = time.time()
    seconds = max([settle_seconds, *(now - at for at in oldest if at is not None)])
    log.warning("counters_consumer_behind", seconds=round(seconds, 1), shards=len(behind))
    return Behind(seconds, len(behind))


class _ShardReader:
    """Reads of the stream that move nothing: the consumer's checkpoints stay where they are."""

    def __init__(self, streams: AsyncDynamo, arn: str) -> None:
        self._streams = streams
        self._arn = arn

    async def shards(self) -> list[str]:
        found: list[str] = []
        kwargs: dict[str, Any] = {"StreamArn": self._arn}
        while True:
            description = (await self._streams.call("describe_stream", **kwargs))["StreamDescription"]
            found += [shard["ShardId"] for shard in description["Shards"]]
            last = description.get("LastEvaluatedShardId")
            if not last:
                return found
            kwargs["ExclusiveStartShardId"] = last

    async def newest(self, shard: str, after: str | None) -> str | None:
        """The sequence number of the newest record after ``after`` (None: from the shard's start)
        within ``MAX_PAGES`` pages; None when there is none."""
        newest = None
        async for records in self._pages(shard, after, limit=PAGE, pages=MAX_PAGES):
            newest = str(records[-1]["dynamodb"]["SequenceNumber"])
        return newest

    async def oldest_at(self, shard: str, after: str | None) -> float | None:
        """When the first record after ``after`` was written (epoch seconds), if there is one."""
        async with contextlib.aclosing(self._pages(shard, after, limit=1, pages=1)) as pages:
            async for records in pages:
                return record_created_at(records[0])
        return None

    async def _iterator(self, shard: str, after: str | None) -> str | None:
        kwargs: dict[str, Any] = {"StreamArn": self._arn, "ShardId": shard}
        if after is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after)
        try:
            iterator: str | None = (await self._streams.call("get_shard_iterator", **kwargs))["ShardIterator"]
        except ClientError as exc:
            if error_code(exc) != "TrimmedDataAccessException":
                raise
            # The checkpoint is older than the stream's 24 h: the consumer starts at the oldest
            # record the stream keeps, and so does this look.
            kwargs.pop("SequenceNumber")
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
            iterator = (await self._streams.call("get_shard_iterator", **kwargs))["ShardIterator"]
        return iterator

    async def _pages(self, shard: str, after: str | None, *, limit: int, pages: int) -> AsyncGenerator[list[Any], None]:
        """Non-empty pages of records after ``after``, until an empty one, the shard's end or ``pages``."""
        iterator = await self._iterator(shard, after)
        position = after
        retried = False
        for _ in range(pages):
            if iterator is None:
                return
            try:
                response = await self._streams.call("get_records", ShardIterator=iterator, Limit=limit)
            except ClientError as exc:
                if retried or error_code(exc) not in {"ExpiredIteratorException", "TrimmedDataAccessException"}:
                    raise
                retried = True  # DynamoDB Local calls a quiet shard's iterator trimmed: a fresh one, once
                iterator = await self._iterator(shard, position)
                continue
            records = response.get("Records", [])
            if not records:
                return
            position = str(records[-1]["dynamodb"]["SequenceNumber"])
            iterator = response.get("NextShardIterator")
            yield records
