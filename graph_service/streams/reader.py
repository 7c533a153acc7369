"""Reads every shard of one DynamoDB stream: discovery, parents before children, resume.

Written once for every stream consumer of the project. A consumer supplies a handler
``(shard_id, records, committed_sequence) -> new committed_sequence``; the handler commits
its checkpoint itself (so it can commit it atomically with its effects), and the reader
resumes each shard right after the last committed sequence number. What it reads, how far behind
it is and whether it makes progress (a batch handled, a read that finds a shard caught up; a read
whose batch then fails is no progress) go to its ``ConsumerMetrics`` (``graph_service/telemetry/streams.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.streams import ConsumerMetrics, StreamMetrics

__all__ = ["RecordHandler", "StreamReader", "stream_arn"]

log = structlog.get_logger(__name__)
RecordHandler = Callable[[str, list[dict[str, Any]], str | None], Awaitable[str | None]]
MAX_RECORDS = 1000


async def stream_arn(dynamo: AsyncDynamo, settings: Settings, table: str) -> str:
    """The ARN of the stream of one of the project's tables (``table``: its short name)."""
    name = settings.table(table)
    arn = (await dynamo.call("describe_table", TableName=name))["Table"].get("LatestStreamArn")
    if not arn:
        raise RuntimeError(f"table {name} has no stream; run socialgraph create-tables")
    return str(arn)


class StreamReader:
    def __init__(
        self,
        streams: AsyncDynamo,
        stream_arn: str,
        checkpoints: CheckpointStore,
        handler: RecordHandler,
        *,
        poll_seconds: float,
        refresh_seconds: float,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self._streams = streams
        self.metrics = metrics if metrics is not None else StreamMetrics().consumer("stream")
        self._arn = stream_arn
        self._checkpoints = checkpoints
        self._handler = handler
        self._poll = poll_seconds
        self._refresh = refresh_seconds
        self._running: dict[str, asyncio.Task[None]] = {}

    @classmethod
    async def for_table(
        cls,
        dynamo: AsyncDynamo,
        streams: AsyncDynamo,
        settings: Settings,
        table: str,
        checkpoints: CheckpointStore,
        handler: RecordHandler,
        *,
        metrics: ConsumerMetrics | None = None,
    ) -> StreamReader:
        """A reader of the stream of one of the project's tables, paced by the settings."""
        return cls(
            streams,
            await stream_arn(dynamo, settings, table),
            checkpoints,
            handler,
            poll_seconds=settings.stream_poll_seconds,
            refresh_seconds=settings.shard_refresh_seconds,
            metrics=metrics,
        )

    async def list_shards(self) -> dict[str, str | None]:
        """Every shard of the stream and its parent (None for roots)."""
        shards: dict[str, str | None] = {}
        kwargs: dict[str, Any] = {"StreamArn": self._arn}
        while True:
            description = (await self._streams.call("describe_stream", **kwargs))["StreamDescription"]
            for shard in description["Shards"]:
                shards[shard["ShardId"]] = shard.get("ParentShardId")
            last = description.get("LastEvaluatedShardId")
            if not last:
                return shards
            kwargs["ExclusiveStartShardId"] = last

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: keep one task per readable shard, refreshing the shard list."""
        self.metrics.heartbeat.start()
        try:
            while not stop.is_set():
                self._forget_failed()
                try:
                    await self._schedule()
                    self.metrics.listed(reading=any(not task.done() for task in self._running.values()))
                except (Unavailable, ClientError) as exc:  # DynamoDB unreachable: try at the next refresh
                    log.error("shard_listing_failed", error=str(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self._refresh)
        finally:
            self.metrics.heartbeat.stop()
            await _cancel_all(list(self._running.values()))

    def _forget_failed(self) -> None:
        """A shard task that failed (DynamoDB unavailable, retries exhausted) is started again at the
        next refresh, from its checkpoint: one bad minute must not stop the whole consumer."""
        for shard_id, task in list(self._running.items()):
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("shard_failed_will_resume", shard_id=shard_id, error=repr(task.exception()))
                del self._running[shard_id]

    async def _schedule(self) -> None:
        shards = await self.list_shards()
        done = {s for s, c in (await self._checkpoints.load_all()).items() if c.done}
        for shard_id, parent in shards.items():
            if shard_id in done or shard_id in self._running:
                continue
            if parent is not None and parent in shards and parent not in done:
                continue  # the parent's records come first
            self._running[shard_id] = asyncio.create_task(self._consume(shard_id), name=f"shard-{shard_id}")

    async def _iterator(self, shard_id: str, sequence: str | None) -> str | None:
        kwargs: dict[str, Any] = {"StreamArn": self._arn, "ShardId": shard_id}
        if sequence is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=sequence)
        try:
            iterator: str | None = (await self._streams.call("get_shard_iterator", **kwargs))["ShardIterator"]
        except ClientError as exc:
            if error_code(exc) != "TrimmedDataAccessException":
                raise
            log.error("stream_data_trimmed", shard_id=shard_id, sequence=sequence)
            kwargs.pop("SequenceNumber", None)
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
            iterator = (await self._streams.call("get_shard_iterator", **kwargs))["ShardIterator"]
        return iterator

    async def _consume(self, shard_id: str) -> None:
        self.metrics.shard_started(shard_id)  # first: a task failing before its first read is stuck too
        checkpoint = await self._checkpoints.load(shard_id)
        sequence = checkpoint.sequence
        iterator = await self._iterator(shard_id, sequence)
        log.info("shard_started", shard_id=shard_id, sequence=sequence)
        while iterator is not None:
            try:
                response = await self._streams.call("get_records", ShardIterator=iterator, Limit=MAX_RECORDS)
            except ClientError as exc:
                if error_code(exc) not in {"ExpiredIteratorException", "TrimmedDataAccessException"}:
                    raise
                # An iterator that expired, or one DynamoDB Local calls trimmed after the shard sat
                # empty for a while: take a fresh one at the same position.
                await asyncio.sleep(self._poll)
                iterator = await self._iterator(shard_id, sequence)
                continue
            records = response.get("Records", [])
            iterator = response.get("NextShardIterator")
            self.metrics.read(shard_id, records)
            if records:
                sequence = await self._handler(shard_id, records, sequence)
                self.metrics.handled(shard_id, records)
            elif iterator is not None:
                await asyncio.sleep(self._poll)
        await self._checkpoints.mark_done(shard_id)
        self.metrics.shard_finished(shard_id)
        log.info("shard_finished", shard_id=shard_id)


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks and wait for them, cancelling again any that swallowed the cancellation.

    One ``cancel()`` can be lost: on Python 3.11 ``asyncio.wait_for`` (which redis-py uses for
    socket writes) returns normally when the cancellation arrives just as the awaited write
    completes, and the task then carries on consuming its shard.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.2)
    await asyncio.gather(*tasks, return_exceptions=True)  # retrieves every outcome
