"""SIGTERM stops a consumer process within its grace in the states that used to hold it: the relay
retrying a batch the broker does not take, the fanout waiting for topics that are gone. Exit 0,
within SG_SHUTDOWN_GRACE_SECONDS (2 s here) plus the 2 s allowed for closing clients."""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from socialgraph_devstack.processes import ManagedProcess, free_port, start_kafka_broker

from graph_service.dynamodb.tables import TWEETS
from graph_service.events.kafka import client_options, ensure_topics
from graph_service.settings import Settings
from tests.support.children import child_process, kafka_environment
from tests.support.polling import eventually
from tests.support.scrape import get
from tests.support.tables import require_streams
from tests.support.timeline_calls import post, tweet_store

pytestmark = [pytest.mark.faults, pytest.mark.streams]

GRACE = 2.0
LIMIT = GRACE + 2.0 + 1.0  # the grace, the closing margin, and a second for the process to end


async def on_own_broker(settings: Settings, broker: ManagedProcess) -> Settings:
    value = replace(
        settings,
        kafka_bootstrap_servers=f"127.0.0.1:{broker.port}",
        tweets_topic="tweets",
        graph_events_topic="graph",
        fanout_group="fanout",
        topic_partitions=2,
    )
    await ensure_topics(value)
    return value


def kafka_env(settings: Settings) -> dict[str, str]:
    return {
        **kafka_environment(settings),
        "SG_TOPIC_CHECK_SECONDS": "0.5",
        "SG_SHUTDOWN_GRACE_SECONDS": str(GRACE),
    }


async def test_a_relay_retrying_a_batch_the_broker_refuses_stops_on_sigterm(settings: Settings, tmp_path: Path) -> None:
    await require_streams(settings, TWEETS)
    broker = start_kafka_broker(free_port(), tmp_path / "logs")
    try:
        settings = await on_own_broker(settings, broker)
        async with (
            child_process(settings, "relay", tmp_path, **kafka_env(settings)) as relay,
            tweet_store(settings) as store,
        ):
            broker.stop()  # gone: the relay's next batch cannot be produced
            await post(store, 7, "never delivered while the broker is down")
            await eventually(lambda: get(relay.metrics_port, "/readyz"), lambda a: a.status == 503, timeout=30)
            started = time.monotonic()
            relay.send(signal.SIGTERM)
            code = await relay.exit_code(timeout=LIMIT + 5)
            took = time.monotonic() - started
            assert code == 0, relay.log()
            assert took < LIMIT, f"took {took:.1f} s: {relay.log()}"
            assert "shutdown_overdue" not in relay.log()
    finally:
        broker.stop()


async def test_a_fanout_waiting_for_topics_that_are_gone_stops_on_sigterm(settings: Settings, tmp_path: Path) -> None:
    broker = start_kafka_broker(free_port(), tmp_path / "logs")
    try:
        settings = await on_own_broker(settings, broker)
        async with child_process(settings, "fanout", tmp_path, **kafka_env(settings)) as fanout:
            admin = AIOKafkaAdminClient(**client_options(settings))
            await admin.start()
            try:
                await admin.delete_topics([settings.tweets_topic, settings.graph_events_topic])
            finally:
                await admin.close()
            answer = await eventually(
                lambda: get(fanout.metrics_port, "/readyz"), lambda a: "does not exist" in a.body, timeout=30
            )
            assert answer.status == 503
            started = time.monotonic()
            fanout.send(signal.SIGTERM)
            code = await fanout.exit_code(timeout=LIMIT + 5)
            took = time.monotonic() - started
            assert code == 0, fanout.log()
            assert took < LIMIT, f"took {took:.1f} s: {fanout.log()}"
    finally:
        broker.stop()
