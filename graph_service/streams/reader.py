"""Reads every shard of one DynamoDB stream: discovery, leases, parents before children, resume.

Written once for every stream consumer of the project. A consumer supplies a handler
``(shard_id, records, committed_sequence) -> new committed_sequence``; the handler commits
its checkpoint itself (so it can commit it atomically with its effects), and the reader
resumes each shard right after the last committed sequence number. Several instances of one
consumer may run at once: each shard is read by the one holding its lease (``leases.py``), and
a survivor takes a dead instance's shards within ``SG_LEASE_SECONDS``. What it reads, how far behind
it is and whether it makes progress (a batch handled, a read that finds a shard caught up; a read
whose batch then fails is no progress) go to its ``ConsumerMetrics`` (``graph_service/telemetry/streams.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.domain.fences import FenceRejected
from graph_service.domain.retry import Backoff, pause
from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.tables import TableNames
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.held_leases import HeldLeases
from graph_service.streams.leases import LeaseView, ShardLeases, fair_share
from graph_service.streams.tracing import stream_tracer, table_of_arn, traced_handler
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.streams import ConsumerMetrics, StreamMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["RecordHandler", "ShardReset", "StreamPacing", "StreamReader", "stream_arn"]

log = structlog.get_logger(__name__)
RecordHandler = Callable[[str, list[dict[str, Any]], str | None], Awaitable[str | None]]
MAX_RECORDS = 1000


@dataclass(frozen=True, slots=True)
class StreamPacing:
    """How often a stream consumer reads, looks for shards and renews its leases."""

    poll_seconds: float
    """Idle wait between empty GetRecords calls (``SG_STREAM_POLL_SECONDS``)."""
    refresh_seconds: float
    """How often the shard list is read again (``SG_SHARD_REFRESH_SECONDS``)."""
    lease_seconds: float
    """How long a dead instance keeps its shards' leases (``SG_LEASE_SECONDS``, ``leases.py``)."""


async def stream_arn(dynamo: AsyncDynamo, tables: TableNames, table: str) -> str:
    """The ARN of the stream of one of the project's tables (``table``: its short name)."""
    name = tables.table(table)
    arn = (await dynamo.call("describe_table", TableName=name))["Table"].get("LatestStreamArn")
    if not arn:
        raise RuntimeError(f"table {name} has no stream; run socialgraph create-tables")
    return str(arn)


class ShardReset(Exception):
    """Raised by a handler when the shard's checkpoint was moved under it (a rewind by some relay):
    the reader starts the shard again from its stored checkpoint at its next round, a restart
    logged at info, not a failure."""


@dataclass(eq=False)
class _ShardRun:
    """One task reading one shard, and what the reader knows of it."""

    shard_id: str
    committed: str | None = None
    """The position the task started from or last committed; a renewal that finds the stored one
    gone while this is set has seen a rewind by another process."""
    stopping: str = ""
    """Why the reader cancelled the task (a restart, a lost lease); empty while it runs on its own."""
    task: asyncio.Task[None] = field(init=False)


class StreamReader:
    """One task per readable shard whose lease this reader holds (``leases.py``): several instances
    of one consumer share a stream, each shard read by one of them at a time.

    Every round (each ``SG_SHARD_REFRESH_SECONDS`` or ``SG_LEASE_SECONDS / 10``, the shorter) it looks
    at the consumer's checkpoints, takes the leases of readable shards that are free or expired (up
    to an even share among the live owners) and starts their tasks; the shard list itself is
    refreshed every ``SG_SHARD_REFRESH_SECONDS``. A task that failed starts again after a backoff
    (jittered, at most the refresh interval); one that raised ``ShardReset`` or was restarted
    (``restart_shards``) at once. Another task renews the leases; a lease found taken, or not
    renewed before it expired, stops that shard's task. A clean stop releases every lease, so
    another instance takes the shards at once; a crash leaves them to expire.
    """

    def __init__(
        self,
        streams: AsyncDynamo,
        stream_arn: str,
        checkpoints: CheckpointStore,
        handler: RecordHandler,
        *,
        leases: ShardLeases,
        poll_seconds: float,
        refresh_seconds: float,
        metrics: ConsumerMetrics | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``tracer``: each batch handled in a span of it (``streams/tracing.py``); None: the
        process's, if it traces."""
        self._streams = streams
        self.metrics = metrics if metrics is not None else StreamMetrics().consumer("stream")
        self._arn = stream_arn
        self._checkpoints = checkpoints
        self._handler = traced_handler(
            handler,
            tracer if tracer is not None else stream_tracer(),
            table=table_of_arn(stream_arn),
            consumer=checkpoints.consumer,
            expected=(ShardReset,),  # the shard moved on elsewhere: read again, not a failure
        )
        self._held = HeldLeases(leases, self.metrics)
        self._poll = poll_seconds
        self._refresh = refresh_seconds
        self._interval = min(refresh_seconds, leases.timing.look_seconds)
        self._running: dict[str, _ShardRun] = {}
        self._shards: dict[str, str | None] | None = None
        self._listed_at = 0.0
        self._backoffs: dict[str, Backoff] = {}
        self._not_before: dict[str, float] = {}
        self._wake = asyncio.Event()
        self._failures = FailureLog(log)

    @classmethod
    async def for_table(
        cls,
        dynamo: AsyncDynamo,
        streams: AsyncDynamo,
        tables: TableNames,
        table: str,
        checkpoints: CheckpointStore,
        handler: RecordHandler,
        *,
        pacing: StreamPacing,
        metrics: ConsumerMetrics | None = None,
    ) -> StreamReader:
        """A reader of the stream of one of the project's tables, paced by ``pacing``, holding
        its shards through leases of ``pacing.lease_seconds`` on the checkpoints' items."""
        return cls(
            streams,
            await stream_arn(dynamo, tables, table),
            checkpoints,
            handler,
            leases=ShardLeases(dynamo, tables, checkpoints.consumer, lease_seconds=pacing.lease_seconds),
            poll_seconds=pacing.poll_seconds,
            refresh_seconds=pacing.refresh_seconds,
            metrics=metrics,
        )

    @property
    def owner(self) -> str:
        """This reader's name in the leases."""
        return self._held.owner

    def held_shards(self) -> set[str]:
        """The shards whose lease this reader holds."""
        return self._held.shards()

    def restart_shards(self) -> None:
        """Cancel every shard task of this reader; each starts again from its stored checkpoint at
        the next round (the relay calls this after it rewound checkpoints). The leases stay held."""
        for run in self._running.values():
            self._stop(run, "restart")
        self._wake.set()

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
        """Until ``stop`` is set: hold leases and keep one task per readable shard held. A cancelled
        run (a crash, for the tests) leaves its leases to expire; a stopped one releases them."""
        self.metrics.heartbeat.start()
        helpers = [
            asyncio.create_task(self._wake_on(stop), name="reader-stop"),
            asyncio.create_task(self._keep_leases(stop), name="reader-leases"),
        ]
        try:
            while not stop.is_set():
                self._collect()
                try:
                    await self._schedule()
                    self.metrics.listed(reading=any(not run.task.done() for run in self._running.values()))
                except (Unavailable, ClientError) as exc:  # DynamoDB unreachable: try at the next round
                    self._failures.failure("shard_listing_failed", type(exc).__name__, error=str(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self._interval)
                self._wake.clear()
        finally:
            self.metrics.heartbeat.stop()
            await _cancel_all([*helpers, *(run.task for run in self._running.values())])
            self._running.clear()
            if stop.is_set():
                await self._held.release_all()

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    def _collect(self) -> None:
        """Forget the tasks that ended. A failed one (DynamoDB unavailable, retries exhausted, Kafka
        down) starts again after its backoff, from its checkpoint: one bad minute must not stop the
        whole consumer; a reset one at once."""
        for shard_id, run in list(self._running.items()):
            if not run.task.done():
                if run.stopping:
                    run.task.cancel()  # once more: one cancel() can be lost (see _cancel_all)
                continue
            del self._running[shard_id]
            if run.task.cancelled():
                if shard_id not in self._held:
                    self.metrics.shard_finished(shard_id)  # read by another instance now
                continue
            error = run.task.exception()
            if isinstance(error, ShardReset):
                log.info("shard_reset_will_resume", shard_id=shard_id, reason=str(error))
            elif error is not None:
                delay = self._backoffs.setdefault(shard_id, Backoff(self._interval, self._refresh)).next_delay()
                self._not_before[shard_id] = time.monotonic() + delay
                self._failures.failure(
                    "shard_failed_will_resume", type(error).__name__, shard_id=shard_id, error=repr(error)
                )

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        """A shard finished, reset or stopped by the reader: the next round need not wait (its
        children, or its restart, come at once); a failure waits for its backoff."""
        if task.cancelled() or task.exception() is None or isinstance(task.exception(), ShardReset):
            self._wake.set()

    async def _schedule(self) -> None:
        if self._shards is None or time.monotonic() - self._listed_at >= self._refresh:
            self._shards = await self.list_shards()
            self._listed_at = time.monotonic()
        shards = self._shards
        checkpoints = await self._checkpoints.load_all()
        done = {s for s, c in checkpoints.items() if c.done}
        for shard_id in done & self._held.shards() - self._running.keys():
            await self._held.give_up(shard_id)  # finished by an earlier owner of the lease
        readable = [
            shard_id
            for shard_id, parent in shards.items()
            if shard_id not in done and (parent is None or parent not in shards or parent in done)
        ]  # a child waits for its parent's records
        now = self._held.now()
        views = {s: LeaseView(c.owner, c.lease_until) for s, c in checkpoints.items()}
        owners = {owner for view in views.values() if (owner := view.live_owner(now)) is not None}
        share = fair_share(len(readable), owners, self.owner)
        for shard_id in readable:
            if shard_id in self._running or self._not_before.get(shard_id, 0.0) > time.monotonic():
                continue
            if shard_id not in self._held:
                view = views.get(shard_id, LeaseView())
                if len(self._held) >= share or view.held_by_other(self.owner, now):
                    continue
                if not await self._held.take(shard_id, view):
                    continue  # another instance was first
            self._start(shard_id)

    def _start(self, shard_id: str) -> None:
        run = _ShardRun(shard_id)
        run.task = asyncio.create_task(self._consume(run), name=f"shard-{shard_id}")
        run.task.add_done_callback(self._task_ended)
        self._running[shard_id] = run
        self._not_before.pop(shard_id, None)

    def _stop(self, run: _ShardRun, why: str) -> None:
        run.stopping = run.stopping or why
        run.task.cancel()

    async def _keep_leases(self, stop: asyncio.Event) -> None:
        """Renew the leases; stop the task of a shard whose lease is lost, and restart one whose
        checkpoint a renewal found rewound by another process (no ``seq`` while it had one)."""
        while not await pause(self._held.timing.renew_seconds, stop):
            before = {s: (run, run.committed) for s, run in self._running.items()}  # it may commit meanwhile
            for shard_id, renewal in (await self._held.renew_all()).items():
                current = self._running.get(shard_id)
                if current is None:
                    continue
                if renewal is None:
                    self._stop(current, "lease lost")
                    continue
                run, committed = before.get(shard_id, (None, None))
                if current is run and committed is not None and renewal.sequence is None:
                    log.info("shard_rewound_elsewhere", shard_id=shard_id, committed=committed)
                    self._stop(current, "rewound")
                    self._wake.set()

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

    async def _consume(self, run: _ShardRun) -> None:
        shard_id = run.shard_id
        self.metrics.shard_started(shard_id)  # first: a task failing before its first read is stuck too
        checkpoint = await self._checkpoints.load(shard_id)
        sequence = run.committed = checkpoint.sequence
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
                sequence = run.committed = await self._handler(shard_id, records, sequence)
                self.metrics.handled(shard_id, records)
                self._backoffs.pop(shard_id, None)  # progress: the next failure waits the least again
            elif iterator is not None:
                await asyncio.sleep(self._poll)
        try:
            await self._checkpoints.mark_done(shard_id, sequence)
        except FenceRejected as exc:  # rewound while it read its last records: read it again
            raise ShardReset(f"checkpoint of {shard_id} moved before it was marked done") from exc
        self.metrics.shard_finished(shard_id)
        log.info("shard_finished", shard_id=shard_id)
        await self._held.give_up(shard_id)


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
