"""Tails the streams of the ``tweets`` and ``followers`` tables and produces their events.

For each batch of stream records: produce every event, wait until Kafka acknowledged all of
them (acks=all), then move the shard's checkpoint, recording with it the offsets produced. A crash
in between produces the batch again on restart; a log that lost acknowledged records is noticed and
produced again (``relay/log_guard.py``): delivery is at least once and every consumer is idempotent.
What a table's records become is its ``Source`` (``relay/sources.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, OffsetOutOfRangeError, UnknownTopicOrPartitionError, for_code
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.structs import RecordMetadata, TopicPartition

from graph_service.domain.fences import FenceRejected
from graph_service.domain.retry import Backoff
from graph_service.events.records import OutgoingRecord
from graph_service.events.topics import TopicWatch
from graph_service.events.tracing import record_tracer, traced_send
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import ShardReset
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.relay import RelayMetrics
from relay.log_guard import ACKNOWLEDGEMENT, LogGuard
from relay.sources import Converter

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["FetchProbe", "Relay"]

log = structlog.get_logger(__name__)


class FetchProbe:
    """The ``LogProbe`` of a topic over the relay's own producer client: one fetch at the offset,
    whose answer carries the partition's high-water mark (the mark the broker serves reads with, not
    ListOffsets': the local broker answers that one from a listing of its batch objects)."""

    FETCH_WAIT_MS = 100
    """The broker's longest wait for a record at the offset (the local broker answers a fetch that may
    not wait with no partition at all)."""

    def __init__(self, client: Any, topic: str, *, timeout: float = 5.0) -> None:
        """``client``: an ``AIOKafkaClient``, started (the producer's ``client``)."""
        self._client = client
        self._topic = topic
        self._timeout = timeout

    async def holds(self, partition: int, offset: int) -> bool | None:
        try:
            return await asyncio.wait_for(self._holds(partition, offset), self._timeout)
        except (KafkaError, OSError, TimeoutError) as exc:
            log.info("relay_log_probe_failed", topic=self._topic, partition=partition, error=repr(exc))
            return None

    async def _holds(self, partition: int, offset: int) -> bool | None:
        cluster = self._client.cluster
        node = cluster.leader_for_partition(TopicPartition(self._topic, partition))
        if node is None:  # not known to this client: ask the brokers (never creates a topic)
            if not await self._client.force_metadata_update():
                return None
            if partition not in (cluster.partitions_for_topic(self._topic) or set()):
                return False  # the brokers answered without it: its records are gone
            node = cluster.leader_for_partition(TopicPartition(self._topic, partition))
        if node is None or node < 0:
            return None
        request = FetchRequest(self.FETCH_WAIT_MS, 1, 1024, 0, [(self._topic, [(partition, offset, 1024)])])
        response = await self._client.send(node, request)
        for topic, partitions in response.topics:
            for number, error_code, high_water, *_ in partitions:
                if topic != self._topic or number != partition:
                    continue
                error = for_code(error_code)
                if error is OffsetOutOfRangeError or error is UnknownTopicOrPartitionError:
                    return False
                if error_code:  # a leader that moved, a broker loading: ask again after fresh metadata
                    await self._client.force_metadata_update()
                    return None
                return bool(high_water > offset)
        return None


class Relay:
    """The handler of one ``StreamReader``: convert, produce, wait for the acks, checkpoint.

    A batch that Kafka does not take (broker down, topic missing) is produced again, with backoff and
    one log line per failure kind per interval, once the topic check (``TopicWatch``) finds the topics
    fine again: the shard waits, nothing is skipped. The offsets acknowledged go to the ``LogGuard``
    and, per partition, into the shard's checkpoint with the move (``Checkpoint.produced``)."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        convert: Converter,
        checkpoints: CheckpointStore,
        *,
        guard: LogGuard | None = None,
        topics: TopicWatch | None = None,
        metrics: RelayMetrics | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``tracer``: a span per record sent, its context in the record's headers
        (``events/tracing.py``); None: the process's, if it traces."""
        self._send = traced_send(producer.send, tracer if tracer is not None else record_tracer())
        self._topic = topic
        self._convert = convert
        self._checkpoints = checkpoints
        self._guard = guard if guard is not None else LogGuard(topic, checkpoints)
        self._topics = topics
        metrics = metrics if metrics is not None else RelayMetrics()
        self._guard.use(FetchProbe(producer.client, topic), metrics)
        self._produced = metrics.produced.labels(topic)
        self._skipped = metrics.skipped.labels(topic)
        self._failures = FailureLog(log)
        self.produced = 0
        self.skipped = 0

    def _events(self, shard_id: str, record: dict[str, Any]) -> list[OutgoingRecord]:
        """The record's events; none for an item that cannot make one (logged and counted: a table
        written by another service may hold anything, and one bad item must not stop its shard)."""
        try:
            return self._convert(record)
        except (KeyError, TypeError, ValueError) as exc:
            self.skipped += 1
            self._skipped.inc()
            sequence = record.get("dynamodb", {}).get("SequenceNumber")
            log.error("relay_record_skipped", shard_id=shard_id, sequence=sequence, error=repr(exc))
            return []

    def _acked(self, future: asyncio.Future[RecordMetadata]) -> None:
        if not future.cancelled() and future.exception() is None:
            metadata = future.result()
            self._guard.note_ack(metadata.partition, metadata.offset)

    async def _produce(self, shard_id: str, outgoing: list[OutgoingRecord]) -> dict[int, int]:
        """Produce every event and wait until each is acknowledged (acks=all), trying again until
        Kafka takes them all; returns the first offset acknowledged per partition (see ``handle``)."""
        backoff = Backoff(base=0.2, cap=10.0)
        failed: set[str] = set()
        while True:
            if self._topics is not None:
                await self._topics.until_ok()  # a missing topic is waited for, never created
            await self._guard.until_open()  # not while a suspected loss is looked at again
            try:
                sent = []
                for event in outgoing:
                    future = await self._send(self._topic, key=event.key, value=event.value, headers=event.headers)
                    future.add_done_callback(self._acked)
                    sent.append(future)
                acks: list[RecordMetadata] = await asyncio.gather(*sent)
            except KafkaError as exc:
                if self._topics is not None:
                    self._topics.suspect()
                failed.add(type(exc).__name__)
                self._failures.failure("relay_produce_failed", type(exc).__name__, topic=self._topic, error=str(exc))
                await asyncio.sleep(backoff.next_delay())
                continue
            for kind in failed:
                self._failures.recovered("relay_produce_recovered", kind, topic=self._topic, shard_id=shard_id)
            first: dict[int, int] = {}
            for ack in acks:
                first[ack.partition] = min(ack.offset, first.get(ack.partition, ack.offset))
            return first

    async def handle(self, shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        outgoing = [event for record in records for event in self._events(shard_id, record)]
        # What the checkpoint records per partition is the first offset of the batch's records there,
        # not the last: a log keeps or loses a producer batch whole, and the local broker reports a
        # partition's end as just after the start of its last batch. A log that ends at or before it
        # lost records (``LogGuard.compare``).
        acked = await self._produce(shard_id, outgoing) if outgoing else {}
        produced = await self._guard.produced_of(shard_id, committed)
        for partition, offset in acked.items():
            produced[partition] = max(offset, produced.get(partition, -1))
        last = str(records[-1]["dynamodb"]["SequenceNumber"])
        try:
            await self._checkpoints.advance(shard_id, committed, last, produced=produced if acked else None)
        except FenceRejected as exc:
            # Another relay moved this checkpoint, or a rewind sent it back: go on from where it is.
            self._guard.forget(shard_id)
            log.info("relay_checkpoint_moved_elsewhere", shard_id=shard_id)
            raise ShardReset(shard_id) from exc
        self._guard.remember(shard_id, last, produced)
        self.produced += len(outgoing)
        self._produced.inc(len(outgoing))
        backwards = self._guard.take_backwards()
        if backwards:
            # A partition's acknowledgement at or below an earlier one: does the log still hold the
            # earlier record? Only a confirmed loss rewinds.
            suspected = {partition: (now, before) for partition, (before, now) in backwards.items()}
            lost = await self._guard.confirm(ACKNOWLEDGEMENT, suspected)
            if lost:
                if self._topics is not None:
                    self._topics.hold()  # nothing more is produced until a check finds the topics right
                await self._guard.rewind(ACKNOWLEDGEMENT, lost)
        return last
