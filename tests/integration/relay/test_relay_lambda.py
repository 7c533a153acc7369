"""The relay's Lambda handler, fed a recorded-style DynamoDB Streams event, producing to a real broker."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from socialgraph.v1 import events_pb2 as epb

from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints import relay_lambda
from graph_service.events.kafka import client_options
from graph_service.settings import Settings
from relay.lambda_batches import UnknownSource
from tests.support.emf import emf_lines, metrics_of
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, on_topics_of_its_own

EVENT_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "followers_stream_event.json"
FOLLOWED, UNFOLLOWED = epb.FOLLOW_EVENT_TYPE_FOLLOWED, epb.FOLLOW_EVENT_TYPE_UNFOLLOWED


def stream_arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2024-06-10T09:12:41.137"


@pytest.fixture
async def lambda_env(kafka_broker: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Topics of the test's own on the broker, and the function's SG_* configuration (no table is
    touched: the relay Lambda only produces)."""
    base = make_settings("http://127.0.0.1:9", "")
    settings = await on_topics_of_its_own(base, kafka_broker, base.table_prefix, partitions=3)
    monkeypatch.setattr(relay_lambda, "configure_logging", lambda level, **_: None)  # the session's logging stays
    for name, value in {
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_KAFKA_BOOTSTRAP_SERVERS": kafka_broker,
        "SG_TWEETS_TOPIC": settings.tweets_topic,
        "SG_GRAPH_EVENTS_TOPIC": settings.graph_events_topic,
        "SG_TOPIC_PARTITIONS": "3",
        "SG_LOG_LEVEL": "warning",
    }.items():
        monkeypatch.setenv(name, value)
    return settings


def recorded_event(settings: Settings) -> dict[str, Any]:
    """The recorded followers event, from this test's table, plus a new tweet and an edited one."""
    event: dict[str, Any] = json.loads(EVENT_PATH.read_text())
    for record in event["Records"]:
        record["eventSourceARN"] = stream_arn(settings.table(FOLLOWERS))
    for name, tweet_id in (("INSERT", 913645115185491968), ("MODIFY", 913645115185491968)):
        image = {"tweet_id": {"N": str(tweet_id)}, "author_id": {"N": "1001"}, "text": {"S": "hello"}}
        event["Records"].append(
            {
                "eventID": f"{name}-{tweet_id}",
                "eventName": name,
                "eventSourceARN": stream_arn(settings.table(TWEETS)),
                "dynamodb": {
                    "ApproximateCreationDateTime": 1718010001,
                    "Keys": {"tweet_id": image["tweet_id"]},
                    "NewImage": image,
                    "SequenceNumber": f"14054000000000020632829{len(event['Records']):02d}",
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                },
            }
        )
    return event


async def read_topic(settings: Settings, topic: str, count: int) -> list[Any]:
    """The first ``count`` records of ``topic`` (every partition), read from the beginning."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(settings.topic_partitions)])
        records: list[Any] = []

        async def poll() -> list[Any]:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(batch)
            return records

        return await eventually(poll, lambda got: len(got) >= count, timeout=20, interval=0)
    finally:
        await consumer.stop()


async def test_a_streams_event_is_produced_to_both_topics_before_the_handler_returns(lambda_env: Settings) -> None:
    """Every follow and unfollow of the recorded event reaches the graph topic keyed by followee, the
    new tweet the tweets topic (an edit is no event); the container's producer serves the next call."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1) as container:  # one Lambda container: one thread
        try:
            event = recorded_event(lambda_env)
            answer = await loop.run_in_executor(container, relay_lambda.handler, event, None)
            assert answer == {"batchItemFailures": []}
            first = await loop.run_in_executor(container, lambda: relay_lambda._container.runtime)
            assert await loop.run_in_executor(container, relay_lambda.handler, {"Records": []}, None) == answer
            assert await loop.run_in_executor(container, lambda: relay_lambda._container.runtime) is first
        finally:
            await loop.run_in_executor(container, close_container)
    follows = await read_topic(lambda_env, lambda_env.graph_events_topic, 6)
    decoded = sorted(
        (record.key, m.follower_id, m.followee_id, m.type)
        for record in follows
        for m in [epb.FollowEvent.FromString(record.value)]
    )
    assert decoded == [
        (b"1001", 2002, 1001, FOLLOWED),
        (b"2001", 1001, 2001, FOLLOWED),
        (b"2001", 1002, 2001, FOLLOWED),
        (b"2001", 1002, 2001, UNFOLLOWED),
        (b"2001", 1003, 2001, FOLLOWED),
        (b"2002", 1001, 2002, FOLLOWED),
    ]
    tweets = await read_topic(lambda_env, lambda_env.tweets_topic, 1)
    assert [(r.key, epb.TweetCreated.FromString(r.value).author_id) for r in tweets] == [(b"913645115185491968", 1001)]


def close_container() -> None:
    """What the end of a container does: the producer flushed and stopped, the loop closed."""
    runtime = relay_lambda._container.runtime
    relay_lambda._container.runtime = None
    if runtime is not None:
        runtime.close()


async def test_each_invocation_writes_its_figures_as_one_emf_line(
    lambda_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded event: every record read, the seven events produced, none skipped, no failure,
    under the function's name; then one record of a table the relay does not read fails the
    invocation, and that is counted too."""
    loop = asyncio.get_running_loop()
    event = recorded_event(lambda_env)
    stranger = {**event["Records"][0], "eventSourceARN": stream_arn("elsewhere")}
    with ThreadPoolExecutor(max_workers=1) as container:
        try:
            await loop.run_in_executor(container, relay_lambda.handler, event, Context())
            with pytest.raises(UnknownSource):
                await loop.run_in_executor(container, relay_lambda.handler, {"Records": [stranger]}, Context())
        finally:
            await loop.run_in_executor(container, close_container)
    done, failed = emf_lines(capsys.readouterr().out)
    assert done["Function"] == failed["Function"] == "sg-relay"
    figures = {name: value for name, (value, _) in metrics_of(done).items()}
    assert figures.pop("DurationMilliseconds") > 0
    assert figures.pop("StreamLagSeconds") > 0
    assert figures == {
        "RecordsRead": len(event["Records"]),
        "EventsProduced": 7,
        "RecordsSkipped": 0,
        "BatchItemFailures": 0,
        "InvocationFailures": 0,
    }
    assert metrics_of(failed)["InvocationFailures"] == (1, "Count")


class Context:
    """The Lambda context, as far as the handler reads it."""

    function_name = "sg-relay"
    aws_request_id = "req-1"
