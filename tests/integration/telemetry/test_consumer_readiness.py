"""The consumers' /readyz when their downstream or their broker goes away, on real servers: a relay
whose Kafka stops (its shard tasks read, fail and restart: not progress) and a fanout worker whose
broker stops (its polls come back empty: not an answer) turn 503 within the stale window (1 s
here), where an attempt alone used to keep them ready."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from socialgraph_devstack.processes import ManagedProcess, free_port, start_kafka_broker

from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.relay import build_relay
from graph_service.events.kafka import client_options
from graph_service.settings import Settings
from tests.support.polling import eventually
from tests.support.runtimes import on_topics_of_its_own, run_built
from tests.support.scrape import Answer, Scrape, get, scrape
from tests.support.seeding import seed_follows
from tests.support.tables import require_streams

STALE = 1.0


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[ManagedProcess]:
    """A broker of this test alone, which the test stops."""
    broker = start_kafka_broker(free_port(), tmp_path / "logs")
    yield broker
    broker.stop()


async def on_broker(settings: Settings, broker: ManagedProcess) -> Settings:
    return await on_topics_of_its_own(settings, f"127.0.0.1:{broker.port}", f"{uuid.uuid4().hex[:8]}-", partitions=1)


async def kill(broker: ManagedProcess) -> None:
    """The broker lost at once (SIGKILL; a graceful stop takes it seconds), off the test's loop."""

    def now() -> None:
        broker.process.kill()
        broker.process.wait()

    await asyncio.to_thread(now)


async def readyz(port: int) -> Answer:
    return await get(port, "/readyz")


@pytest.mark.streams
async def test_a_relay_whose_kafka_stopped_is_not_ready(settings: Settings, own_broker: ManagedProcess) -> None:
    """Caught up, the relay is ready. Kafka stops and a follow is made: the followers reader reads
    it, fails to produce it, restarts and reads it again; it is 503 within the window and stays so
    while the shard listing goes on answering, its lag above 0."""
    await require_streams(settings, TWEETS)
    await require_streams(settings, FOLLOWERS)
    relay_settings = await on_broker(settings, own_broker)
    runtime = await build_relay(relay_settings, stale_after=STALE)
    # A short delivery timeout, so each produce fails (and its shard task restarts) within ~1 s
    # rather than the 40 s default, and closing does not wait that long for the undeliverable batch.
    await runtime.producer.stop()
    runtime.producer = AIOKafkaProducer(**client_options(relay_settings), acks="all", request_timeout_ms=1000)
    port = runtime.metrics_port
    async with run_built(runtime):
        assert (await eventually(lambda: readyz(port), lambda a: a.status == 200, timeout=30)).body == "ready\n"
        await kill(own_broker)
        await seed_follows(settings, [(1, 2)])
        answer = await eventually(lambda: readyz(port), lambda a: a.status == 503, timeout=30)
        # Whichever notices first names the cause: the topic check (the brokers do not answer) or
        # the followers reader, which makes no progress.
        assert answer.body.startswith(("Kafka at ", "stream consumer relay:followers: ")), answer

        def lags(scraped: Scrape) -> list[float]:
            consumer = f"{relay_settings.relay_consumer_name}:{FOLLOWERS}"
            return list(scraped.values("socialgraph_stream_lag_seconds", consumer=consumer).values())

        # When the topic check noticed first, the followers reader may not have read the follow yet.
        metrics = await eventually(lambda: scrape(port), lambda scraped: max(lags(scraped), default=0) > 0, timeout=30)
        lag = lags(metrics)
        # Two more seconds (the lag rises with the clock): the listings every 0.5 s and the restarted
        # reads bring no readiness back; every answer meanwhile is 503.
        answers: list[int] = []

        async def probe() -> float:
            answers.append((await readyz(port)).status)
            return max(lags(await scrape(port)))

        await eventually(probe, lambda seconds: seconds > max(lag) + 2, timeout=30)
        assert set(answers) == {503}, answers
    assert metrics.value("socialgraph_relay_events_produced_total", topic=relay_settings.graph_events_topic) in (
        None,
        0,
    )


async def test_a_fanout_worker_whose_broker_stopped_is_not_ready(
    settings: Settings, own_broker: ManagedProcess
) -> None:
    """Idle and ready (its empty polls are answered by metadata requests); the broker stops: its
    polls still come back, empty, but nothing answers, and it is 503 within the window."""
    fanout_settings = await on_broker(settings, own_broker)
    runtime = await build_fanout(fanout_settings, stale_after=STALE)
    port = runtime.metrics_port
    async with run_built(runtime):
        await eventually(lambda: readyz(port), lambda a: a.status == 200, timeout=30)
        # Idle for longer than the window, it stays ready: every answer meanwhile is 200.
        answers: list[int] = []
        watched_from = time.monotonic()

        async def probe() -> float:
            answers.append((await readyz(port)).status)
            return time.monotonic() - watched_from

        await eventually(probe, lambda seconds: seconds > 1.5 * STALE, interval=0.1)
        assert set(answers) == {200}, answers
        await kill(own_broker)
        answer = await eventually(lambda: readyz(port), lambda a: a.status == 503, timeout=30)
    assert answer.body.startswith(("Kafka at ", "fanout Kafka consumer: last answer from the broker ")), answer
