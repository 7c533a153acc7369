"""The relay's log guard against the local stack's broker (tansu on its object store, as
``socialgraph up`` runs them), all real: a suspected loss is looked at again before anything is
rewound (issue 22).

The local broker answers ListOffsets with one past the start of a partition's last batch, so a record
in the middle of that batch (the relay's first record there, when one producer batch holds records
of two shards) looks lost to ListOffsets; a fetch at its offset finds it. Before the second look,
and with the broker's store listing keys out of order, a new stack rewound every few seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from socialgraph_devstack.processes import ManagedProcess, free_port, start_kafka_broker, start_object_store

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.relay import RelayRuntime, build_relay
from graph_service.events.kafka import client_options, ensure_topics
from graph_service.events.topics import end_offsets
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.relay import RelayMetrics
from relay.log_guard import LogGuard
from relay.relay import FetchProbe
from tests.support.graph_calls import Stub, follow
from tests.support.polling import eventually
from tests.support.runtimes import run_built
from tests.support.scrape import scrape

FOLLOWS = 24


@pytest.fixture
async def local_broker(tmp_path: Path) -> AsyncIterator[str]:
    """A broker of this test alone on its own object store, as the local stack runs them (new: no data)."""
    store_port = free_port()
    processes: list[ManagedProcess] = [start_object_store(store_port, tmp_path / "logs", tmp_path / "kafka")]
    processes.append(start_kafka_broker(free_port(), tmp_path / "logs", store_port=store_port))
    yield f"127.0.0.1:{processes[-1].port}"
    for process in reversed(processes):
        process.stop()


def on_broker(settings: Settings, broker: str, *, partitions: int) -> Settings:
    return replace(
        settings,
        kafka_bootstrap_servers=broker,
        tweets_topic="tweets",
        graph_events_topic="graph",
        fanout_group="fanout",
        topic_partitions=partitions,
        topic_check_seconds=0.3,
    )


async def test_a_record_in_the_middle_of_the_last_batch_is_a_suspicion_a_fetch_clears(
    settings: Settings, local_broker: str
) -> None:
    """ListOffsets puts partition 0's end at or below a record it acknowledged; the guard looks again
    with a fetch at that offset, finds it, and rewinds nothing. An offset the log never had (what a
    log that lost records shows) is confirmed and rewound."""
    settings = on_broker(settings, local_broker, partitions=3)
    await ensure_topics(settings)
    dynamo = AsyncDynamo.build(settings)
    producer = AIOKafkaProducer(**client_options(settings), acks="all", linger_ms=50)
    await producer.start()
    try:
        sent = [await producer.send("graph", f"shard {n}".encode(), partition=0) for n in range(3)]
        acks = await asyncio.gather(*sent)  # one producer batch: offsets 0, 1, 2
        assert [ack.offset for ack in acks] == [0, 1, 2]
        checkpoints = CheckpointStore(dynamo, TableNames(settings.table_prefix), f"{settings.table_prefix}guard")
        await checkpoints.advance("shard-b", None, "1", produced={0: 2})  # the second shard's first record
        guard = LogGuard("graph", checkpoints, probe=FetchProbe(producer.client, "graph"), relay_metrics=RelayMetrics())

        high_water = await end_offsets(client_options(settings), "graph", 3)
        assert high_water[0] <= 2  # ListOffsets: one past the batch's start, below the record at 2
        assert not await guard.compare(lambda: end_offsets(client_options(settings), "graph", 3))
        assert (guard.suspicions, guard.cleared, guard.rewinds) == (1, 1, 0)

        await checkpoints.advance("shard-b", "1", "2", produced={0: 9})  # never in the log
        assert await guard.compare(lambda: end_offsets(client_options(settings), "graph", 3))
        assert (guard.suspicions, guard.cleared, guard.rewinds) == (2, 1, 1)
    finally:
        await producer.stop()
        dynamo.close()


@pytest.mark.streams
async def test_a_burst_of_follows_on_a_new_local_broker_rewinds_nothing(
    settings: Settings, stub: Stub, local_broker: str
) -> None:
    """Issue 22's first run: a new stack, follows, and the relay rewound the stream again and again
    (``relay_log_went_backwards`` with no fault): with several batches in one second, the broker's
    ListOffsets answered the end of one of them, not the last. Now: every follow's event is produced
    once, and the checks that run meanwhile rewind nothing."""
    settings = on_broker(settings, local_broker, partitions=1)  # every batch on one partition
    await ensure_topics(settings)
    relay: RelayRuntime = await build_relay(settings)
    async with run_built(relay):
        started = time.monotonic()
        for n in range(FOLLOWS):  # one after the other: the relay produces a batch every few polls
            await follow(stub, 7_000 + n, 7_500 + n)

        async def produced() -> float:
            found = (await scrape(relay.metrics_port)).value("socialgraph_relay_events_produced_total", topic="graph")
            return found or 0.0

        await eventually(produced, lambda n: n >= FOLLOWS, timeout=60)
        checks = relay.topics.checks
        await eventually(lambda: asyncio.sleep(0, relay.topics.checks), lambda n: n >= checks + 5, timeout=30)
        suspicions = sum(guard.suspicions for guard in relay.guards)
        rewinds = sum(guard.rewinds for guard in relay.guards)
        events = await produced()
        assert (rewinds, events) == (0, FOLLOWS), (
            f"{rewinds} rewinds, {suspicions} suspicions, {events} events for {FOLLOWS} follows"
            f" in {time.monotonic() - started:.1f} s"
        )
