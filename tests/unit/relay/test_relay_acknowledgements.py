"""The relay's handling of an acknowledgement at or below an earlier one: a suspicion looked at again
(the guard's probe reads the earlier offset), a rewind only when the log lost it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata, TopicPartition

from graph_service.events.records import OutgoingRecord
from graph_service.events.topics import TopicWatch
from graph_service.streams.checkpoints import Checkpoint, CheckpointStore
from graph_service.telemetry.relay import RelayMetrics
from relay.log_guard import LogGuard
from relay.relay import Relay

TOPIC = "graph-events"


class Producer:
    """``AIOKafkaProducer.send`` acknowledging each record at the next offset of a script."""

    client = None

    def __init__(self, offsets: list[int]) -> None:
        self._offsets = iter(offsets)

    async def send(self, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        metadata = RecordMetadata(topic, 0, TopicPartition(topic, 0), next(self._offsets), 0, 0, 0)
        asyncio.get_running_loop().call_soon(future.set_result, metadata)
        return future


class Checkpoints:
    def __init__(self) -> None:
        self.stored: dict[str, Checkpoint] = {}

    async def load(self, shard_id: str) -> Checkpoint:
        return self.stored.get(shard_id, Checkpoint())

    async def load_all(self) -> dict[str, Checkpoint]:
        return dict(self.stored)

    async def advance(
        self, shard_id: str, previous: str | None, sequence: str, note: str = "", *, produced: Mapping[int, int] | None
    ) -> None:
        self.stored[shard_id] = Checkpoint(sequence, produced=dict(produced or {}))

    async def rewind(self, shard_id: str) -> bool:
        self.stored[shard_id] = Checkpoint()
        return True


class Topics:
    def __init__(self) -> None:
        self.holds = 0

    async def until_ok(self) -> None:
        return None

    def hold(self) -> None:
        self.holds += 1

    def suspect(self) -> None:
        return None


class Probe:
    def __init__(self, high_water: int) -> None:
        self.high_water = high_water
        self.reads: list[tuple[int, int]] = []

    async def holds(self, partition: int, offset: int) -> bool | None:
        self.reads.append((partition, offset))
        return self.high_water > offset


class Reader:
    def __init__(self) -> None:
        self.restarts = 0

    def restart_shards(self) -> None:
        self.restarts += 1


def one_event(record: dict[str, Any]) -> list[OutgoingRecord]:
    return [OutgoingRecord(b"key", b"value", [])]


def record(sequence: int) -> dict[str, Any]:
    return {"dynamodb": {"SequenceNumber": str(sequence)}}


async def relay_acknowledging(offsets: list[int], log_end: int) -> tuple[Relay, LogGuard, Probe, Topics, Reader]:
    checkpoints = Checkpoints()
    probe = Probe(log_end)
    metrics = RelayMetrics()
    guard = LogGuard(TOPIC, cast(CheckpointStore, checkpoints), probe=probe, relay_metrics=metrics)
    reader = Reader()
    guard.attach(reader)
    topics = Topics()
    relay = Relay(
        cast(AIOKafkaProducer, Producer(offsets)),
        TOPIC,
        one_event,
        cast(CheckpointStore, checkpoints),
        guard=guard,
        topics=cast(TopicWatch, topics),
        metrics=metrics,
    )
    return relay, guard, probe, topics, reader


async def test_an_acknowledgement_below_an_earlier_one_on_a_log_that_still_holds_it_rewinds_nothing() -> None:
    relay, guard, probe, topics, reader = await relay_acknowledging([12, 2], log_end=13)
    committed = await relay.handle("shard", [record(1)], None)
    await relay.handle("shard", [record(2)], committed)

    assert probe.reads == [(0, 12)]  # the earlier record, read again
    assert (guard.suspicions, guard.cleared, guard.rewinds) == (1, 1, 0)
    assert (topics.holds, reader.restarts) == (0, 0)


async def test_an_acknowledgement_below_an_earlier_one_on_a_log_that_lost_it_rewinds_and_holds_production() -> None:
    relay, guard, probe, topics, reader = await relay_acknowledging([12, 2], log_end=3)
    committed = await relay.handle("shard", [record(1)], None)
    await relay.handle("shard", [record(2)], committed)

    assert probe.reads == [(0, 12)]
    assert (guard.suspicions, guard.cleared, guard.rewinds) == (1, 0, 1)
    assert (topics.holds, reader.restarts) == (1, 1)
