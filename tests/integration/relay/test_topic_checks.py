"""Topics are checked, never guessed, against the real broker: a missing or mis-sized topic is a
clear problem, no client of the project creates one by asking about it, and create-topics heals it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from graph_service.events.kafka import client_options, ensure_topics, topic_check
from graph_service.events.topics import TopicWatch
from graph_service.settings import Settings


def topic_settings(broker: str, partitions: int = 3) -> Settings:
    name = f"chk{uuid.uuid4().hex[:8]}"
    return replace(
        Settings(),
        kafka_bootstrap_servers=broker,
        tweets_topic=f"{name}-tweets",
        graph_events_topic=f"{name}-graph",
        topic_partitions=partitions,
    )


async def existing(settings: Settings) -> set[str]:
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def test_missing_then_mis_sized_then_healed_by_create_topics(kafka_broker: str) -> None:
    settings = topic_settings(kafka_broker)
    watch = TopicWatch(topic_check(settings))
    assert not await watch.check()
    assert f"topic {settings.tweets_topic} does not exist; run socialgraph create-topics" in (watch.problem() or "")
    assert not await watch.check()  # asking twice created nothing
    assert {settings.tweets_topic, settings.graph_events_topic}.isdisjoint(await existing(settings))

    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(settings.tweets_topic, 2, 1)])  # made by hand, wrongly
    finally:
        await admin.close()
    assert not await watch.check()
    problem = watch.problem() or ""
    assert f"topic {settings.tweets_topic} has 2 partitions, SG_TOPIC_PARTITIONS says 3" in problem
    assert f"topic {settings.graph_events_topic} does not exist" in problem

    await ensure_topics(settings)  # creates the missing one; the mis-sized one stays a problem
    assert not await watch.check()
    assert "has 2 partitions" in (watch.problem() or "")
    assert f"{settings.graph_events_topic} does not exist" not in (watch.problem() or "")

    fine = replace(settings, topic_partitions=2, tweets_topic=settings.tweets_topic)
    await ensure_topics(replace(fine, graph_events_topic=f"{settings.graph_events_topic}-2"))
    healed = TopicWatch(topic_check(replace(fine, graph_events_topic=f"{settings.graph_events_topic}-2")))
    assert await healed.check()
    assert healed.problem() is None


async def test_no_producer_or_consumer_creates_a_topic_by_using_it(kafka_broker: str) -> None:
    settings = topic_settings(kafka_broker)
    producer = AIOKafkaProducer(**client_options(settings), request_timeout_ms=3000)
    await producer.start()
    try:
        with pytest.raises(KafkaError):
            await asyncio.wait_for(producer.send_and_wait(settings.tweets_topic, b"x"), 20)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        settings.graph_events_topic, **client_options(settings), group_id=None, request_timeout_ms=3000
    )
    try:
        # aiokafka refuses to start on a topic it cannot find, after asking for it for a while
        with contextlib.suppress(KafkaError, TimeoutError):
            await asyncio.wait_for(consumer.start(), 2)
            await consumer.getmany(timeout_ms=300)
    finally:
        await consumer.stop()
    assert {settings.tweets_topic, settings.graph_events_topic}.isdisjoint(await existing(settings))
