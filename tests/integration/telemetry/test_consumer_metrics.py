"""The consumers' /metrics and /readyz over HTTP: the counters consumer's stream lag with a backlog
after a restart (falling to 0 once caught up), and the fanout worker's Kafka lag per partition
while a batch waits before its commit (0 after it)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer

from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.dynamodb.tables import FOLLOWERS
from graph_service.entrypoints.counters import build_counters
from graph_service.entrypoints.fanout import build_fanout
from graph_service.events.kafka import client_options
from graph_service.events.kinds import TweetPosted, encode
from graph_service.settings import Settings
from tests.support.polling import eventually
from tests.support.runtimes import run_built
from tests.support.scrape import Scrape, get, scrape
from tests.support.seeding import seed_follows
from tests.support.tables import require_streams

BACKLOG = 120


def lags(metrics: Scrape) -> list[float]:
    return list(metrics.values("socialgraph_stream_lag_seconds", consumer="counters").values())


def applied(metrics: Scrape) -> float | None:
    return metrics.value("socialgraph_counters_changes_applied_total")


@pytest.mark.streams
async def test_counters_lag_shows_a_backlog_after_a_restart_and_falls_to_zero(settings: Settings) -> None:
    """A consumer caught up reports lag 0 and is ready; stopped, it is not ready; follows made while
    it is down are a backlog its successor reports as lag at least as old as the backlog, until it
    has applied every one of them (lag 0 again)."""
    await require_streams(settings, FOLLOWERS)
    first = await build_counters(settings)
    port = first.metrics_port
    assert (await get(port, "/readyz")).body == "no stream reader started yet\n"
    stop = asyncio.Event()
    running = asyncio.create_task(first.run(stop))
    try:
        await seed_follows(settings, [(1, 2), (1, 3), (4, 2)])
        caught_up = await eventually(
            lambda: scrape(port), lambda m: applied(m) == 3 and lags(m) != [] and set(lags(m)) == {0.0}
        )
        read = caught_up.value("socialgraph_stream_records_read_total", consumer="counters")
        assert read == 6  # a follow is 2 items of the followers table
        assert (await get(port, "/readyz")).status == 200
    finally:
        stop.set()
        await running
    assert (await get(port, "/readyz")).body == "stream consumer counters: not running\n"
    await first.aclose()

    await seed_follows(settings, [(1000 + i, 5000 + i) for i in range(BACKLOG)])
    seeded_at = time.time()
    second = await build_counters(settings)
    seen: list[tuple[float, float]] = []  # (lag, how old the backlog was at least when scraped)

    async def probe() -> Scrape:
        metrics = await scrape(second.metrics_port)
        if lags(metrics):
            seen.append((max(lags(metrics)), time.time() - seeded_at))
        return metrics

    async with run_built(second):
        done = await eventually(probe, lambda m: applied(m) == BACKLOG and set(lags(m)) == {0.0}, interval=0.02)
    behind = [(lag, age) for lag, age in seen if lag > 0]
    assert behind, f"no scrape saw the backlog: {seen}"
    assert all(lag >= age - 0.5 for lag, age in behind), behind  # never younger than the backlog
    assert done.value("socialgraph_counters_repair_debts") == 0


async def test_fanout_kafka_lag_per_partition_until_the_commit(event_settings: Settings) -> None:
    """Four tweets on partition 1: while the worker holds the batch before committing, that
    partition's lag is 4 (the others 0); after the commit it is 0, and the events are counted."""
    release = asyncio.Event()

    async def hold(offsets: object) -> None:
        await release.wait()

    runtime = await build_fanout(event_settings, after_writes=hold)
    port = runtime.metrics_port
    assert (await get(port, "/readyz")).body == "the topics have not been checked yet\n"
    producer = AIOKafkaProducer(**client_options(event_settings), acks="all")
    await producer.start()
    try:
        generator = TweetIdGenerator()
        for author in (901, 902, 903, 904):  # no followers: nothing to push
            tweet_id = generator.next_id()
            record = encode(TweetPosted(tweet_id, author, created_at_us(tweet_id)))
            await producer.send_and_wait(
                event_settings.tweets_topic, record.value, key=record.key, headers=record.headers, partition=1
            )
    finally:
        await producer.stop()

    def lag_of(metrics: Scrape, partition: int) -> float | None:
        return metrics.value(
            "socialgraph_fanout_kafka_lag", topic=event_settings.tweets_topic, partition=str(partition)
        )

    async with run_built(runtime):
        held = await eventually(
            lambda: scrape(port),
            lambda m: lag_of(m, 1) == 4 and m.value("socialgraph_fanout_events_total", kind="tweet") == 4,
        )
        assert (await get(port, "/readyz")).status == 200
        assert held.value("socialgraph_fanout_events_total", kind="tweet") == 4
        assert lag_of(held, 0) in (0, None)  # None until the worker has fetched from it
        release.set()
        done = await eventually(lambda: scrape(port), lambda m: lag_of(m, 1) == 0)
    assert done.value("socialgraph_fanout_timeline_entries_written_total") == 0
    assert done.value("socialgraph_fanout_celebrity_skips_total") == 0
    assert done.values("socialgraph_fanout_records_skipped_total") == {  # present, at 0, before any skip
        (("reason", reason),): 0.0 for reason in ("malformed", "unknown_type", "unknown_version")
    }
    assert done.value("socialgraph_fanout_events_total", kind="follow") == 0
