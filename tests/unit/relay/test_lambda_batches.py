"""The relay Lambda's batch, as its entry point wires it (``relay_batches``): each record to its
table's topic, every ack awaited, failures raised."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from graph_service.domain.models import Mute
from graph_service.entrypoints.relay_lambda import relay_batches
from graph_service.settings import Settings
from relay.lambda_batches import UnknownSource, table_of
from tests.support.mute_records import mute_record

EVENT_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "followers_stream_event.json"
SETTINGS = Settings(table_prefix="p_", tweets_topic="tweets", graph_events_topic="graph")


def stream_arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2024-06-10T09:12:41.137"


def follower_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(EVENT_PATH.read_text())["Records"]
    for record in records:
        record["eventSourceARN"] = stream_arn("p_followers")
    return records


def tweet_record(tweet_id: int, author_id: int, event_name: str = "INSERT") -> dict[str, Any]:
    image = {"tweet_id": {"N": str(tweet_id)}, "author_id": {"N": str(author_id)}, "text": {"S": "hi"}}
    return {
        "eventID": f"t{tweet_id}",
        "eventName": event_name,
        "eventSourceARN": stream_arn("p_tweets"),
        "dynamodb": {"Keys": {"tweet_id": image["tweet_id"]}, "NewImage": image, "SequenceNumber": str(tweet_id)},
    }


class FakeProducer:
    """Records what was sent; each send's acknowledgement is a future the test may fail."""

    def __init__(self, *, fail_with: Exception | None = None) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.acks: list[asyncio.Future[None]] = []
        self._fail_with = fail_with

    async def send(self, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        self.sent.append((topic, key))
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._fail_with is not None:
            ack.set_exception(self._fail_with)
        else:
            asyncio.get_running_loop().call_later(0.01, ack.set_result, None)
        self.acks.append(ack)
        return ack


def test_the_table_is_read_from_the_stream_arn() -> None:
    assert table_of(stream_arn("sg_followers")) == "sg_followers"
    with pytest.raises(UnknownSource):
        table_of("arn:aws:kinesis:us-east-1:1:stream/x")


async def test_each_record_goes_to_its_tables_topic_and_every_ack_is_awaited() -> None:
    """Both tables' triggers may share one function: follows go to the graph topic (keyed by
    followee), new tweets to the tweets topic (keyed by tweet); edits and T# items are no events."""
    producer = FakeProducer()
    batches = relay_batches(producer, SETTINGS)  # a FakeProducer
    event = {"Records": [tweet_record(11, 1), *follower_records(), tweet_record(11, 1, "MODIFY"), tweet_record(12, 2)]}
    assert await batches.produce(event) == {"records": 15, "produced": 8, "skipped": 0}
    assert all(ack.done() for ack in producer.acks)
    assert producer.sent == [
        ("tweets", b"11"),
        ("graph", b"2001"),  # 1001 -> 2001
        ("graph", b"2001"),  # 1002 -> 2001
        ("graph", b"2002"),  # 1001 -> 2002
        ("graph", b"2001"),  # 1002 unfollows 2001
        ("graph", b"2001"),  # 1003 -> 2001
        ("graph", b"1001"),  # 2002 -> 1001
        ("tweets", b"12"),
    ]


async def test_a_record_of_another_table_fails_the_batch_before_anything_is_sent() -> None:
    producer = FakeProducer()
    batches = relay_batches(producer, SETTINGS)  # a FakeProducer
    stranger = copy.deepcopy(tweet_record(13, 3))
    stranger["eventSourceARN"] = stream_arn("other_tweets")
    with pytest.raises(UnknownSource, match="other_tweets"):
        await batches.produce({"Records": [tweet_record(12, 2), stranger]})
    assert producer.sent == []


async def test_an_unacknowledged_event_fails_the_batch_so_lambda_retries_it() -> None:
    batches = relay_batches(FakeProducer(fail_with=RuntimeError("no leader")), SETTINGS)  # a FakeProducer
    with pytest.raises(RuntimeError, match="no leader"):
        await batches.produce({"Records": [tweet_record(12, 2)]})


async def test_a_record_that_makes_no_event_is_skipped_and_logged() -> None:
    producer = FakeProducer()
    batches = relay_batches(producer, SETTINGS)  # a FakeProducer
    broken = tweet_record(14, 4)
    del broken["dynamodb"]["NewImage"]["author_id"]
    done = await batches.produce({"Records": [broken, tweet_record(15, 5)]})
    assert done == {"records": 2, "produced": 1, "skipped": 1}


async def test_mute_records_and_their_ttl_deletions_pass_without_an_event_or_an_error() -> None:
    """A followers batch holding mutes, a replace, an unmute and TTL deletions of ended mutes: the
    follows are produced as without them, and nothing is logged as skipped (they are no errors)."""
    mute = Mute(1001, 1_700_000_000_000_000, 1_700_000_060_000_000, False)
    mutes = [
        mute_record(event, 2001, mute, order=order, ttl=ttl, sequence=str(900 + i))
        for i, (event, order, ttl) in enumerate(
            [
                ("INSERT", False, False),
                ("INSERT", True, False),
                ("MODIFY", False, False),
                ("REMOVE", False, True),
                ("REMOVE", True, True),
            ]
        )
    ]
    for record in mutes:
        record["eventSourceARN"] = stream_arn("p_followers")
    plain = FakeProducer()
    assert (await relay_batches(plain, SETTINGS).produce({"Records": follower_records()}))["produced"] == 6
    producer = FakeProducer()
    with capture_logs() as logs:
        done = await relay_batches(producer, SETTINGS).produce(
            {"Records": [*mutes[:3], *follower_records(), *mutes[3:]]}
        )
    assert done == {"records": len(follower_records()) + 5, "produced": 6, "skipped": 0}
    assert producer.sent == plain.sent
    assert not [line for line in logs if line["event"] == "relay_record_skipped"]
