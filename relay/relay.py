"""Tails the streams of the ``tweets`` and ``followers`` tables and produces their events.

For each batch of stream records: produce every event, wait until Kafka acknowledged all of
them (acks=all), then move the shard's checkpoint. A crash in between produces the batch again
on restart: delivery is at least once and every consumer is idempotent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from aiokafka import AIOKafkaProducer

from graph_service.domain.fences import FenceRejected
from graph_service.domain.tweet_ids import created_at_us
from graph_service.events.records import OutgoingRecord, follow_record, tweet_record
from graph_service.store.changes import edge_change
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.relay import RelayMetrics
from graph_service.tweets.tweet_store import parse_tweet

__all__ = ["Converter", "Relay", "graph_events", "tweet_events"]

log = structlog.get_logger(__name__)
Converter = Callable[[dict[str, Any]], list[OutgoingRecord]]


def tweet_events(record: dict[str, Any]) -> list[OutgoingRecord]:
    """A new item of the tweets table is a ``TweetCreated``; edits and deletes are not events."""
    image = record.get("dynamodb", {}).get("NewImage")
    if record.get("eventName") != "INSERT" or not image:
        return []
    tweet = parse_tweet(image)
    return [tweet_record(tweet.tweet_id, tweet.author_id, created_at_us(tweet.tweet_id))]


def _record_time_us(record: dict[str, Any]) -> int:
    when = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(when, datetime):
        return int(when.timestamp() * 1_000_000)
    return int(float(when or 0) * 1_000_000)


def graph_events(record: dict[str, Any]) -> list[OutgoingRecord]:
    """A made or removed edge (its membership item) is a ``FollowEvent``; other items are not."""
    change = edge_change(record)
    if change is None:
        return []
    # A removal's time is the stream record's, which DynamoDB rounds down (to the second; DynamoDB
    # Local to the minute): never date it before the follow it undoes.
    at = change.at_us if change.added else max(_record_time_us(record), change.at_us)
    return [follow_record(change.follower_id, change.followee_id, change.added, at)]


class Relay:
    """The handler of one ``StreamReader``: convert, produce, wait for the acks, checkpoint."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        convert: Converter,
        checkpoints: CheckpointStore,
        *,
        metrics: RelayMetrics | None = None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._convert = convert
        self._checkpoints = checkpoints
        metrics = metrics if metrics is not None else RelayMetrics()
        self._produced = metrics.produced.labels(topic)
        self._skipped = metrics.skipped.labels(topic)
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

    async def handle(self, shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        outgoing = [event for record in records for event in self._events(shard_id, record)]
        sent = [await self._producer.send(self._topic, key=e.key, value=e.value, headers=e.headers) for e in outgoing]
        await asyncio.gather(*sent)  # every event acknowledged before the checkpoint moves
        last = str(records[-1]["dynamodb"]["SequenceNumber"])
        try:
            await self._checkpoints.advance(shard_id, committed, last)
        except FenceRejected:
            log.warning("relay_checkpoint_moved_elsewhere", shard_id=shard_id)  # another relay ran this shard
            return (await self._checkpoints.load(shard_id)).sequence
        self.produced += len(outgoing)
        self._produced.inc(len(outgoing))
        return last
