"""The fanout worker: a Kafka consumer group member that commits offsets only after the Redis
writes of every record before them are done (at-least-once; the writes are idempotent).

What it applies, skips and writes, and its lag per partition (high-water mark minus the offset it
committed), go to its ``FanoutMetrics``.

Readiness (``/readyz``) beats only on evidence that the broker answered: a poll that returned
records, or, when polls come back empty and the last beat is older than a third of the stale
window, a metadata request (``consumer.topics()``, asked at most once per third) answered within
that third. An empty poll alone proves nothing: aiokafka's ``getmany`` returns ``{}`` after its
timeout while the broker is down (it retries fetches in the background). The probe runs in the
poll loop, not beside it, so a worker busy retrying one batch (Redis or DynamoDB down) does not
beat either."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaConnectionError, KafkaError

from fanout.applier import Fanout
from graph_service.domain.errors import TimelineUnavailable, Unavailable
from graph_service.domain.retry import Backoff, pause, unless_stopped
from graph_service.events.kinds import KIND_NAMES, KINDS, TopicNames, decode, kind_of
from graph_service.events.records import UnreadableEvent
from graph_service.events.topics import TopicWatch
from graph_service.events.tracing import record_tracer, traced_process
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.fanout import FanoutMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["FanoutWorker", "Offsets", "WorkerConfig", "WorkerStats"]

log = structlog.get_logger(__name__)
TRANSIENT = (Unavailable, TimelineUnavailable)
"""DynamoDB or Redis unreachable: retried. Any other error (a Redis that refuses a command, a bug)
ends the worker without committing, so the record is neither lost nor skipped in silence."""
MAX_RECORDS = 500
COMMIT_SECONDS = 5.0
"""Longest wait for one offset commit before it counts as failed."""
Offsets = dict[TopicPartition, int]


def _foreign_cancellation() -> bool:
    """A ``CancelledError`` that reached us while nobody cancelled this task: aiokafka lets one out
    of a client whose internal task it cancelled (its fetcher, after the broker went away). It is
    a failure of the client, not a request to stop."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


async def _poll(
    consumer: AIOKafkaConsumer, stop: asyncio.Event
) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
    """One ``getmany`` (200 ms), cut short by a stop: after the broker lost a topic it can take
    seconds to come back (seen: 5 s), which a stop must not wait for. Stopped: no records."""
    fetch = await unless_stopped(consumer.getmany(timeout_ms=200, max_records=MAX_RECORDS), stop)
    if fetch.cancelled() and stop.is_set():
        return {}
    batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = fetch.result()  # its error, if any
    return batch


async def _stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Leave the group, but never for longer than 2 s (a broker that is gone), whatever the client raises."""
    try:
        await asyncio.wait_for(consumer.stop(), timeout=2)
    except asyncio.CancelledError:
        if not _foreign_cancellation():
            raise
        log.warning("fanout_consumer_stop_failed", error="cancelled inside the Kafka client")
    except (Exception, TimeoutError) as exc:
        log.warning("fanout_consumer_stop_failed", error=repr(exc))


class _Stopped(Exception):
    """A stop was requested while a record was still waiting to be applied."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    topics: TopicNames
    """The name of each event topic; the worker consumes the topics of every kind (``KINDS``)."""
    group: str
    """SG_FANOUT_GROUP: the consumer group the workers share."""
    client_options: Callable[[], dict[str, Any]]
    """The keyword arguments of a fresh Kafka client (``graph_service.events.kafka.client_options``)."""


@dataclass
class WorkerStats:
    handled: Counter[str] = field(default_factory=Counter)
    """Events applied, by kind (``EventKind.name``: ``tweet``, ``follow``)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Records skipped, by reason (``malformed``, ``unknown_type``, ``unknown_version``)."""
    timelines_written: int = 0
    retries: int = 0


class FanoutWorker:
    def __init__(
        self,
        config: WorkerConfig,
        fanout: Fanout,
        *,
        after_writes: Callable[[Offsets], Awaitable[None]] | None = None,
        metrics: FanoutMetrics | None = None,
        topics: TopicWatch | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``after_writes`` runs between a batch's Redis writes and its offset commit (instrumentation;
        the tests crash a worker there); ``topics`` checks the topics (None: not checked); ``tracer``:
        each record handled in a span continuing the trace its headers carry (``events/tracing.py``;
        None: the process's, if it traces)."""
        self._config = config
        self._handle = traced_process(
            self._record, tracer if tracer is not None else record_tracer(), group=config.group
        )
        self._fanout = fanout
        self._after_writes = after_writes
        self.stats = WorkerStats()
        self.assigned: set[TopicPartition] = set()
        self.metrics = metrics if metrics is not None else FanoutMetrics(kinds=KIND_NAMES)
        self.metrics.watch_lag(self.kafka_lag)
        self._live: AIOKafkaConsumer | None = None
        self._probed_at = float("-inf")
        """When the broker was last asked for metadata (``_beat_if_answered``)."""
        self._committed: Offsets = {}
        """Per assigned partition: the offset this worker committed last, or the one it started from."""
        self._topics = topics
        self._failures = FailureLog(log)
        self._restart_backoff = Backoff(base=0.5, cap=10.0)

    def kafka_lag(self) -> dict[tuple[str, int], int]:
        """Records not yet committed, per assigned partition whose high-water mark is known. Called
        by a scrape, from the metrics endpoint's worker thread: it only reads."""
        consumer = self._live
        if consumer is None:
            return {}
        lags = {}
        for tp, committed in list(self._committed.items()):  # list(): scraped from a worker thread
            try:
                highwater = consumer.highwater(tp)
            except (AssertionError, KeyError, AttributeError):  # revoked meanwhile: its next owner reports it
                continue
            if highwater is not None:
                lags[(tp.topic, tp.partition)] = max(0, highwater - committed)
        return lags

    async def _note_positions(
        self, consumer: AIOKafkaConsumer, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]
    ) -> None:
        """Start the lag of newly assigned partitions from where this worker starts reading them."""
        for tp in [tp for tp in self._committed if tp not in self.assigned]:
            del self._committed[tp]  # revoked: its next owner reports it
        for tp in self.assigned - self._committed.keys():
            if tp in batch:
                self._committed[tp] = batch[tp][0].offset
            elif consumer.highwater(tp) is not None:  # fetched, so its position is known
                with contextlib.suppress(IllegalStateError):  # revoked meanwhile
                    self._committed[tp] = await consumer.position(tp)

    def _consumer(self) -> AIOKafkaConsumer:
        topics = dict.fromkeys(self._config.topics[kind.topic] for kind in KINDS)  # each once, in order
        return AIOKafkaConsumer(
            *topics,
            group_id=self._config.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self._config.client_options(),
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop``. The topics are checked first and then all along (``TopicWatch``):
        while one is missing or mis-sized the worker holds no consumer (so it commits nothing to
        partitions that do not exist), and it joins the group again once ``create-topics`` healed them."""
        if self._topics is not None and not await self._topics.check() and self._topics.unreachable:
            # Unreachable at start: the process ends (exit 3) rather than wait unseen. Later, a broker
            # that goes away is waited for.
            raise KafkaConnectionError(self._topics.problem() or "Kafka did not answer")
        self.metrics.heartbeat.start()
        watch = asyncio.create_task(self._topics.run(stop)) if self._topics is not None else None
        first = True
        try:
            while not stop.is_set():
                if not await self._topics_ready(stop):
                    break
                consumer = self._consumer()
                try:
                    await consumer.start()
                except KafkaError as exc:
                    if first:
                        raise  # as above
                    self._failures.failure("fanout_consumer_start_failed", type(exc).__name__, error=str(exc))
                    await pause(self._restart_backoff.next_delay(), stop)
                    continue
                first = False
                self._restart_backoff.reset()
                self._live = consumer
                log.info("fanout_started", group=self._config.group)
                try:
                    if await self._consume(consumer, stop):
                        break  # stopped
                finally:
                    self._live = None
                    self._committed.clear()
                    await _stop_consumer(consumer)
                log.warning("fanout_rejoining_group", problem=self.topics_problem())
        except Exception:
            log.exception("fanout_failed")  # nothing past the failing record was committed
            raise
        finally:
            self.metrics.heartbeat.stop()
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
            log.info("fanout_stopped", **self.stats.handled, skipped=dict(self.stats.skipped))

    def topics_problem(self) -> str | None:
        """What is wrong with the topics (None: fine, or not checked by this worker)."""
        return None if self._topics is None else self._topics.problem()

    async def _topics_ready(self, stop: asyncio.Event) -> bool:
        """Wait until the topic check finds both topics fine (True) or a stop (False)."""
        if self._topics is None:
            return True
        await unless_stopped(self._topics.until_ok(), stop)
        return not stop.is_set()

    async def _consume(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> bool:
        """Poll, apply, commit; True when stopped, False when the topics went wrong (leave the group)."""
        backoff = Backoff(base=0.2, cap=5.0)
        while not stop.is_set():
            if self._topics is not None and self._topics.wrong:
                return False  # a broker that does not answer is waited for in the group; a lost topic is not
            try:
                batch = await _poll(consumer, stop)
            except KafkaError as exc:
                self._kafka_failed("fanout_fetch_failed", exc)
                await pause(backoff.next_delay(), stop)
                continue
            except asyncio.CancelledError as exc:
                if not _foreign_cancellation():
                    raise
                self._kafka_failed("fanout_fetch_failed", exc)
                return False  # the client is broken: leave the group and join again with a new one
            await self._beat_if_answered(consumer, bool(batch), stop)
            self.assigned = set(consumer.assignment())
            await self._note_positions(consumer, batch)
            if not batch:
                continue
            if not await self._apply(batch, stop):
                return True  # stopped while a record waited for Redis or DynamoDB: commit nothing
            offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
            if self._after_writes is not None:
                await self._after_writes(offsets)
            try:
                await asyncio.wait_for(consumer.commit(offsets), timeout=COMMIT_SECONDS)
                self._committed.update((tp, offset) for tp, offset in offsets.items() if tp in self.assigned)
                backoff.reset()
            except (CommitFailedError, IllegalStateError) as exc:
                # The group moved these partitions elsewhere; their new owner applies the records
                # again from the last commit, which changes nothing already written.
                log.warning("fanout_commit_refused", error=str(exc))
            except (KafkaError, TimeoutError, asyncio.CancelledError) as exc:
                # Not committed: the records come again (to this worker or the partition's next owner)
                # and change nothing already written. aiokafka retries a commit forever; it is cut
                # short here so a stop or a topic check is never held up by it.
                if isinstance(exc, asyncio.CancelledError) and not _foreign_cancellation():
                    raise
                self._kafka_failed("fanout_commit_failed", exc)
                await pause(backoff.next_delay(), stop)
        return True

    def _kafka_failed(self, event: str, exc: BaseException) -> None:
        if self._topics is not None:
            self._topics.suspect()
        self._failures.failure(event, type(exc).__name__, error=str(exc) or repr(exc))

    async def _beat_if_answered(self, consumer: AIOKafkaConsumer, fetched: bool, stop: asyncio.Event) -> None:
        """Beat if records came back, or if the broker answers a metadata request (asked at most
        once per third of the stale window, and only when no beat came for that long; given that
        long to answer)."""
        heartbeat = self.metrics.heartbeat
        if fetched:
            heartbeat.beat()
            return
        probe_seconds = heartbeat.stale_after / 3
        now = time.monotonic()
        if not heartbeat.older_than(probe_seconds) or now - self._probed_at < probe_seconds:
            return  # answered recently, or asked recently (a broker that is down is not asked in a loop)
        self._probed_at = now
        probe = await unless_stopped(consumer.topics(), stop, timeout=probe_seconds)  # a stop does not wait
        if probe.cancelled() or probe.exception() is not None:  # not answered within the third (or stopped)
            log.debug("fanout_broker_probe_failed", error="no answer" if probe.cancelled() else repr(probe.exception()))
            return
        heartbeat.beat()

    async def _apply(
        self, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]], stop: asyncio.Event
    ) -> bool:
        """Apply every partition of the batch, partitions concurrently; False if a stop cut it short.
        A partition that fails cancels the others, so none goes on writing after the worker ends."""
        tasks = [asyncio.create_task(self._partition(records, stop)) for records in batch.values()]
        try:
            await asyncio.gather(*tasks)
        except _Stopped:
            return False
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return True

    async def _partition(self, records: list[ConsumerRecord[bytes, bytes]], stop: asyncio.Event) -> None:
        for record in records:  # in order: events of one key keep their order
            if stop.is_set():
                raise _Stopped  # the rest of the batch goes to the partition's next owner
            await self._handle(record, stop)  # ``_record``, in its span if the process traces

    async def _record(self, record: ConsumerRecord[bytes, bytes], stop: asyncio.Event) -> None:
        """Decode and apply one record, retrying while Redis or DynamoDB is unreachable. Each record
        is applied (and, when traced, spanned) on its own: a batch's records are not merged."""
        try:
            event = decode(record.headers, record.value)
        except UnreadableEvent as exc:
            self.stats.skipped[exc.reason] += 1
            self.metrics.skipped.labels(exc.reason).inc()
            log.warning(
                "fanout_record_skipped",
                reason=exc.reason,
                error=str(exc),
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
            )
            return
        kind = kind_of(event).name
        backoff = Backoff(base=0.1, cap=5.0)
        while True:
            try:
                written = await self._fanout.apply(event)
                self.stats.timelines_written += written
                self.metrics.entries_written.inc(written)
                self.stats.handled[kind] += 1
                self.metrics.events.labels(kind).inc()
                if backoff.failures:
                    self._failures.recovered("fanout_recovered", "apply", topic=record.topic, offset=record.offset)
                return
            except TRANSIENT as exc:
                # Redis or DynamoDB unreachable: nothing is committed past this record, so retry it
                # (a stop now leaves it to the next owner of the partition).
                self.stats.retries += 1
                self.metrics.retries.inc()
                self._failures.failure(
                    "fanout_retrying", "apply", error=str(exc), topic=record.topic, offset=record.offset
                )
                if await pause(backoff.next_delay(), stop):
                    raise _Stopped from exc
