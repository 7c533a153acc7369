"""The relay (DynamoDB Streams -> Kafka), posting tweets, and the post / create-topics commands, all real."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import boto3
import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from socialgraph.v1 import events_pb2 as epb
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.domain.errors import InvalidTweet
from graph_service.domain.models import Tweet
from graph_service.domain.tweet_ids import created_at_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TWEETS, TableNames
from graph_service.events.kafka import client_options
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.tweets.tweet_store import MAX_TEXT
from tests.support.graph_calls import (
    accept,
    block,
    follow,
    reject,
    remove_follower,
    set_private,
    unfollow,
)
from tests.support.polling import eventually
from tests.support.runtimes import running_relay
from tests.support.timeline_calls import tweet_store

Stub = pb_grpc.SocialGraphServiceStub
TWEET_TYPE = b"socialgraph.v1.TweetCreated"
FOLLOW_TYPE = b"socialgraph.v1.FollowEvent"
FOLLOWED = epb.FOLLOW_EVENT_TYPE_FOLLOWED
UNFOLLOWED = epb.FOLLOW_EVENT_TYPE_UNFOLLOWED
Record: TypeAlias = "ConsumerRecord[bytes, bytes]"


# -- reading a topic ------------------------------------------------------------------------------


class TopicReader:
    """Every record of one topic from the beginning, read by a consumer of the test's own (no group)."""

    def __init__(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        self._consumer = consumer
        self._partitions = partitions
        self.records: list[Record] = []

    async def poll(self) -> list[Record]:
        batches = await self._consumer.getmany(*self._partitions, timeout_ms=200)
        for part in batches.values():
            self.records.extend(part)
        return self.records

    async def until(self, accept: Callable[[list[Record]], bool], timeout: float = 30.0) -> list[Record]:  # noqa: ASYNC109 - a polling deadline
        """Poll until ``accept(records so far)`` holds; fail at the deadline."""
        return await eventually(self.poll, accept, timeout=timeout, interval=0)

    async def drain(self) -> list[Record]:
        """Read up to the end of every partition as it is now, so nothing already produced is missed."""
        ends = await self._consumer.end_offsets(self._partitions)

        async def behind() -> list[TopicPartition]:
            await self.poll()
            return [tp for tp in self._partitions if await self._consumer.position(tp) < ends[tp]]

        await eventually(behind, lambda late: not late, timeout=20, interval=0)
        return self.records


@contextlib.asynccontextmanager
async def reading(settings: Settings, topic: str) -> AsyncIterator[TopicReader]:
    consumer = AIOKafkaConsumer(
        **client_options(settings), group_id=None, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    partitions = [TopicPartition(topic, p) for p in range(settings.topic_partitions)]
    consumer.assign(partitions)
    try:
        yield TopicReader(consumer, partitions)
    finally:
        await consumer.stop()


def assert_headers(record: Record, event_type: bytes) -> None:
    assert list(record.headers) == [("event-type", event_type), ("schema-version", b"1")]


@dataclass(frozen=True)
class SeenTweet:
    key: bytes
    tweet_id: int
    author_id: int
    created_at_us: int


def tweets_of(records: list[Record]) -> list[SeenTweet]:
    found = []
    for record in records:
        assert_headers(record, TWEET_TYPE)
        message = epb.TweetCreated.FromString(record.value or b"")
        found.append(
            SeenTweet(record.key or b"", message.tweet_id, message.author_id, message.created_at.ToMicroseconds())
        )
    return found


def tweet_ids_of(records: list[Record]) -> list[int]:
    return [t.tweet_id for t in tweets_of(records)]


def has_all(expected: set[int]) -> Callable[[list[Record]], bool]:
    return lambda records: expected <= set(tweet_ids_of(records))


# -- the relay's checkpoint -----------------------------------------------------------------------


def _last_sequences(settings: Settings, table: str) -> dict[str, str]:
    """The last sequence number of each shard of a table's stream (shards with records only)."""
    dynamo = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)
    streams = boto3.client("dynamodbstreams", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)
    arn = dynamo.describe_table(TableName=settings.table(table))["Table"]["LatestStreamArn"]
    last: dict[str, str] = {}
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        ).get("ShardIterator")
        while iterator:
            response = streams.get_records(ShardIterator=iterator, Limit=1000)
            if not response["Records"]:
                break
            last[shard["ShardId"]] = response["Records"][-1]["dynamodb"]["SequenceNumber"]
            iterator = response.get("NextShardIterator")
    return last


async def relay_checkpointed_everything(settings: Settings, table: str) -> None:
    """Wait until the relay's checkpoint of every shard is at the shard's last record: stopping the
    relay now cannot fall between a produce and its checkpoint."""
    dynamo = AsyncDynamo.build(settings)
    checkpoints = CheckpointStore(dynamo, TableNames(settings.table_prefix), f"{settings.relay_consumer_name}:{table}")

    async def lagging() -> dict[str, tuple[str, str | None]]:
        last = await asyncio.to_thread(_last_sequences, settings, table)
        saved = {s: c.sequence for s, c in (await checkpoints.load_all()).items()}
        return {s: (seq, saved.get(s)) for s, seq in last.items() if saved.get(s) != seq}

    try:
        await eventually(lagging, lambda late: not late, timeout=20, interval=0.1)
    finally:
        dynamo.close()


# -- tweets ---------------------------------------------------------------------------------------


async def test_each_posted_tweet_is_one_tweet_created_keyed_by_its_id(event_settings: Settings) -> None:
    """TweetStore.post -> stream -> relay: one record per tweet on the tweets topic, key = the tweet ID,
    headers event-type/schema-version, fields = the tweet, created_at read from the ID."""
    async with (
        running_relay(event_settings),
        tweet_store(event_settings) as store,
        reading(event_settings, event_settings.tweets_topic) as topic,
    ):
        posted: list[Tweet] = []
        for author, text in [(5, "first"), (6, ""), (5, "third"), (2**64 - 1, "x" * MAX_TEXT), (7, "ünïcode ✓")]:
            posted.append(await store.post(author, text))
        await topic.until(has_all({t.tweet_id for t in posted}))
        records = await topic.drain()

    expected = {SeenTweet(str(t.tweet_id).encode(), t.tweet_id, t.author_id, created_at_us(t.tweet_id)) for t in posted}
    seen = tweets_of(records)
    assert sorted(seen, key=lambda t: t.tweet_id) == sorted(expected, key=lambda t: t.tweet_id)
    # each partition holds its tweets in posting (commit) order, which is also ID order
    by_partition: dict[int, list[int]] = defaultdict(list)
    for record in records:
        by_partition[record.partition].append(epb.TweetCreated.FromString(record.value or b"").tweet_id)
    assert all(ids == sorted(ids) for ids in by_partition.values())


async def test_the_relay_resumes_after_a_restart_without_producing_anything_twice(event_settings: Settings) -> None:
    """Tweets posted while the relay is down are produced when it comes back; those produced and
    checkpointed before the stop are not produced again."""
    async with tweet_store(event_settings) as store, reading(event_settings, event_settings.tweets_topic) as topic:
        async with running_relay(event_settings):
            first = [(await store.post(10 + i, f"before {i}")).tweet_id for i in range(5)]
            await topic.until(has_all(set(first)))
            await relay_checkpointed_everything(event_settings, TWEETS)
        # the relay is stopped: these wait in the stream
        second = [(await store.post(20 + i, f"while down {i}")).tweet_id for i in range(5)]
        async with running_relay(event_settings):
            await topic.until(has_all(set(first + second)))
            await relay_checkpointed_everything(event_settings, TWEETS)
            records = await topic.drain()

    seen = tweet_ids_of(records)
    assert sorted(seen) == sorted(first + second), "each tweet exactly once"


async def test_an_item_the_relay_cannot_read_is_skipped_and_the_shard_goes_on(event_settings: Settings) -> None:
    """Items another writer left in the tweets table without a usable author (missing, not a number,
    zero) make no event and do not stop the shard: the tweets around them are produced."""
    table = event_settings.table(TWEETS)
    client = boto3.client("dynamodb", endpoint_url=event_settings.dynamodb_endpoint, region_name="us-east-1")
    bad_items = [
        {"tweet_id": {"N": "101"}},
        {"tweet_id": {"N": "102"}, "author_id": {"S": "seven"}},
        {"tweet_id": {"N": "103"}, "author_id": {"N": "0"}},
    ]
    async with (
        running_relay(event_settings),
        tweet_store(event_settings) as store,
        reading(event_settings, event_settings.tweets_topic) as topic,
    ):
        before = (await store.post(1, "before")).tweet_id
        for item in bad_items:
            await asyncio.to_thread(client.put_item, TableName=table, Item=item)
        after = (await store.post(1, "after")).tweet_id
        await topic.until(has_all({before, after}))
        await relay_checkpointed_everything(event_settings, TWEETS)
        records = await topic.drain()
    assert sorted(tweet_ids_of(records)) == [before, after]


# -- follow events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeenFollow:
    kind: int
    follower_id: int
    followee_id: int


def follows_by_key(records: list[Record]) -> dict[bytes, list[SeenFollow]]:
    found: dict[bytes, list[SeenFollow]] = defaultdict(list)
    for record in records:
        assert_headers(record, FOLLOW_TYPE)
        message = epb.FollowEvent.FromString(record.value or b"")
        found[record.key or b""].append(SeenFollow(message.type, message.follower_id, message.followee_id))
    return dict(found)


def follow_times(records: list[Record]) -> dict[tuple[int, int, int], int]:
    found: dict[tuple[int, int, int], int] = {}
    for record in records:
        message = epb.FollowEvent.FromString(record.value or b"")
        found[(message.type, message.follower_id, message.followee_id)] = message.at.ToMicroseconds()
    return found


async def followed_at(stub: Stub, followee: int) -> dict[int, int]:
    reply = await stub.ListFollowers(pb.ListFollowersRequest(user_id=followee, page_size=100))
    return {f.user_id: f.followed_at.ToMicroseconds() for f in reply.followers}


async def test_edge_changes_are_follow_events_keyed_by_followee_and_other_writes_are_none(
    event_settings: Settings, stub: Stub
) -> None:
    """Follow, Unfollow, Block, RemoveFollower, Accept and SetPrivacy(false) make or remove edges: one
    FollowEvent each on the graph topic, keyed by the followee, in commit order per followee, dated
    when the edge was made. Requests, rejections, withdrawals and repeats are not edges: no event."""
    started_us = time.time_ns() // 1000
    async with running_relay(event_settings), reading(event_settings, event_settings.graph_events_topic) as topic:
        # public account 2
        await follow(stub, 1, 2)
        await follow(stub, 1, 2)  # again: already following, no new edge
        await follow(stub, 3, 2)
        edges_of_2 = await followed_at(stub, 2)
        await unfollow(stub, 1, 2)
        await unfollow(stub, 1, 2)  # again: nothing to remove
        # Block removes the edges both ways
        await follow(stub, 2, 3)
        edges_of_3 = await followed_at(stub, 3)
        await block(stub, 2, 3)
        await block(stub, 10, 11)  # no edge between them: nothing
        # RemoveFollower
        await follow(stub, 4, 5)
        edges_of_5 = await followed_at(stub, 5)
        await remove_follower(stub, 5, 4)
        # private account 6: requests are not edges; an accepted one is
        await set_private(stub, 6, True)
        assert await follow(stub, 7, 6) == pb.FOLLOW_STATE_REQUESTED
        await reject(stub, 6, 7)
        assert await follow(stub, 9, 6) == pb.FOLLOW_STATE_REQUESTED
        await unfollow(stub, 9, 6)  # withdraws the request
        assert await follow(stub, 8, 6) == pb.FOLLOW_STATE_REQUESTED
        await accept(stub, 6, 8)
        await accept(stub, 6, 8)  # again: the edge exists, nothing new
        # going public accepts the pending requests: edges
        await set_private(stub, 12, True)
        assert await follow(stub, 13, 12) == pb.FOLLOW_STATE_REQUESTED
        await set_private(stub, 12, False)
        expected = {
            b"2": [
                SeenFollow(FOLLOWED, 1, 2),
                SeenFollow(FOLLOWED, 3, 2),
                SeenFollow(UNFOLLOWED, 1, 2),
                SeenFollow(UNFOLLOWED, 3, 2),
            ],
            b"3": [SeenFollow(FOLLOWED, 2, 3), SeenFollow(UNFOLLOWED, 2, 3)],
            b"5": [SeenFollow(FOLLOWED, 4, 5), SeenFollow(UNFOLLOWED, 4, 5)],
            b"6": [SeenFollow(FOLLOWED, 8, 6)],
            b"12": [SeenFollow(FOLLOWED, 13, 12)],
        }
        total = sum(len(v) for v in expected.values())
        await topic.until(lambda records: len(records) >= total)
        records = await topic.drain()
        edges_of_6, edges_of_12 = await followed_at(stub, 6), await followed_at(stub, 12)
    finished_us = time.time_ns() // 1000

    assert follows_by_key(records) == expected  # nothing else, and each followee's events in commit order
    partitions_of = {r.key: r.partition for r in records}
    assert all(partitions_of[r.key] == r.partition for r in records), "one followee, one partition"

    times = follow_times(records)
    made = {
        (1, 2): edges_of_2[1],
        (3, 2): edges_of_2[3],
        (2, 3): edges_of_3[2],
        (4, 5): edges_of_5[4],
        (8, 6): edges_of_6[8],
        (13, 12): edges_of_12[13],
    }
    for (follower, followee), at in made.items():
        assert times[(FOLLOWED, follower, followee)] == at, "FOLLOWED at = the edge's followed_at"
    for follower, followee in [(1, 2), (3, 2), (2, 3), (4, 5)]:
        at = times[(UNFOLLOWED, follower, followee)]
        # the stream record's ApproximateCreationDateTime: AWS rounds it down to the second,
        # DynamoDB Local to the minute
        assert started_us // 60_000_000 * 60_000_000 <= at <= finished_us


ACCOUNT_TYPE = b"socialgraph.v1.AccountEvent"


async def test_an_account_change_is_one_account_event_and_its_jobs_make_no_follow_event(
    event_settings: Settings, stub: Stub
) -> None:
    """SPEC §5: deactivating, reactivating and deleting account 2 is one AccountEvent each, keyed by
    2, in commit order with its FollowEvents; archiving, restoring and deleting its follows make
    none. An unfollow of a restored follow is an unfollow."""

    async def settled(state: int) -> None:
        request = pb.GetAccountStateRequest(user_id=2)
        await eventually(lambda: stub.GetAccountState(request), lambda r: r.state == state, timeout=30)

    async with running_relay(event_settings), reading(event_settings, event_settings.graph_events_topic) as topic:
        await follow(stub, 1, 2)
        await follow(stub, 3, 2)
        await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=2))
        await settled(pb.ACCOUNT_STATE_DEACTIVATED)
        await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=2))  # again: no change, no event
        await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=2))
        await settled(pb.ACCOUNT_STATE_ACTIVE)
        await unfollow(stub, 1, 2)
        await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=2))
        await settled(pb.ACCOUNT_STATE_DELETED)
        await topic.until(lambda records: len(records) >= 6)
        records = await topic.drain()

    seen: list[tuple[str, int, int]] = []
    for record in records:
        assert record.key == b"2"
        event_type = dict(record.headers)["event-type"]
        if event_type == ACCOUNT_TYPE:
            account = epb.AccountEvent.FromString(record.value or b"")
            assert account.at.ToMicroseconds() > 0
            seen.append(("account", account.type, account.user_id))
        else:
            assert event_type == FOLLOW_TYPE
            message = epb.FollowEvent.FromString(record.value or b"")
            seen.append(("follow", message.type, message.follower_id))
    assert seen == [
        ("follow", FOLLOWED, 1),
        ("follow", FOLLOWED, 3),
        ("account", epb.ACCOUNT_EVENT_TYPE_DEACTIVATED, 2),
        ("account", epb.ACCOUNT_EVENT_TYPE_REACTIVATED, 2),
        ("follow", UNFOLLOWED, 1),
        ("account", epb.ACCOUNT_EVENT_TYPE_DELETED, 2),
    ]


async def test_an_unfollowed_event_is_not_dated_before_the_edge_was_made(event_settings: Settings, stub: Stub) -> None:
    """FollowEvent.at is "when the edge was made or removed": a removal cannot come before the making."""
    async with running_relay(event_settings), reading(event_settings, event_settings.graph_events_topic) as topic:
        await follow(stub, 1, 2)
        await unfollow(stub, 1, 2)
        await topic.until(lambda records: len(records) >= 2)
        records = await topic.drain()
    assert follows_by_key(records) == {b"2": [SeenFollow(FOLLOWED, 1, 2), SeenFollow(UNFOLLOWED, 1, 2)]}
    times = follow_times(records)
    assert times[(UNFOLLOWED, 1, 2)] >= times[(FOLLOWED, 1, 2)], (
        f"unfollowed at {times[(UNFOLLOWED, 1, 2)]} before followed at {times[(FOLLOWED, 1, 2)]}"
    )


# -- posting --------------------------------------------------------------------------------------


async def table_items(settings: Settings, table: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)
    response = await asyncio.to_thread(client.scan, TableName=settings.table(table), ConsistentRead=True)
    return list(response["Items"])


@pytest.mark.parametrize(
    ("author", "text", "field"),
    [
        (0, "hi", "author_id"),
        (-1, "hi", "author_id"),
        (2**64, "hi", "author_id"),
        (5, "x" * (MAX_TEXT + 1), "text"),
    ],
    ids=["author-0", "negative-author", "author-too-large", "text-281"],
)
async def test_post_refuses_a_bad_author_or_a_too_long_text(
    settings: Settings, author: int, text: str, field: str
) -> None:
    """InvalidTweet (reason INVALID_TWEET, metadata field) and no item written; 280 characters is allowed."""
    async with tweet_store(settings) as store:
        with pytest.raises(InvalidTweet) as caught:
            await store.post(author, text)
        assert caught.value.reason == "INVALID_TWEET"
        assert caught.value.metadata == {"field": field}
        assert await table_items(settings, TWEETS) == []
        edge = await store.post(5, "y" * MAX_TEXT)  # exactly the limit is fine
    assert edge.text == "y" * MAX_TEXT
    assert [int(i["tweet_id"]["N"]) for i in await table_items(settings, TWEETS)] == [edge.tweet_id]


async def test_posted_tweets_are_in_the_table(settings: Settings) -> None:
    """One item per tweet (tweet_id, author_id, text); authors() finds them and skips unknown IDs."""
    async with tweet_store(settings) as store:
        posted = [await store.post(author, f"tweet {author}") for author in (1, 2, 3)]
        assert await store.authors([t.tweet_id for t in posted] + [12345]) == {t.tweet_id: t.author_id for t in posted}
    items = {int(i["tweet_id"]["N"]): i for i in await table_items(settings, TWEETS)}
    for tweet in posted:
        assert items[tweet.tweet_id]["author_id"] == {"N": str(tweet.author_id)}
        assert items[tweet.tweet_id]["text"] == {"S": tweet.text}
    assert [t.tweet_id for t in posted] == sorted(t.tweet_id for t in posted)


# -- the commands ---------------------------------------------------------------------------------


def command_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SG_", "AWS_"))}
    env.update(AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local", AWS_DEFAULT_REGION="us-east-1", **values)
    return env


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


async def socialgraph(env: dict[str, str], *args: str) -> Outcome:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "graph_service",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return Outcome(proc.returncode, out.decode(), err.decode())


async def test_the_post_command_prints_the_new_tweet_id_and_refuses_bad_input(settings: Settings) -> None:
    """`socialgraph post` prints JSON with the tweet ID, which is in the table; a bad author or text
    exits non-zero with a one-line reason (no traceback) and writes nothing."""
    env = command_env(SG_DYNAMODB_ENDPOINT=settings.dynamodb_endpoint, SG_TABLE_PREFIX=settings.table_prefix)
    good, zero, negative, long_text, not_a_number = await asyncio.gather(
        socialgraph(env, "post", "--author", "5", "--text", "hi"),
        socialgraph(env, "post", "--author", "0", "--text", "hi"),
        socialgraph(env, "post", "--author", "-4", "--text", "hi"),
        socialgraph(env, "post", "--author", "5", "--text", "x" * (MAX_TEXT + 1)),
        socialgraph(env, "post", "--author", "five", "--text", "hi"),
    )
    assert good.code == 0, good.err
    printed = json.loads(good.out)
    tweet_id = int(printed["tweet_id"])
    assert tweet_id > 0
    assert int(printed["author_id"]) == 5
    items = await table_items(settings, TWEETS)
    assert items == [{"tweet_id": {"N": str(tweet_id)}, "author_id": {"N": "5"}, "text": {"S": "hi"}}]

    for bad in (zero, negative):
        assert bad.code != 0
        assert "author" in bad.err
        assert "greater than 0" in bad.err
        assert "Traceback" not in bad.err
        assert bad.out == ""
    assert long_text.code != 0
    assert "longer than 280" in long_text.err
    assert "Traceback" not in long_text.err
    assert not_a_number.code != 0
    assert "--author" in not_a_number.err
    assert "Traceback" not in not_a_number.err


async def test_create_topics_creates_them_once(kafka_broker: str) -> None:
    """`socialgraph create-topics` creates both topics with the configured partitions; a second run
    creates nothing and says so."""
    name = f"cli{uuid.uuid4().hex[:8]}"
    env = command_env(
        SG_KAFKA_BOOTSTRAP_SERVERS=kafka_broker,
        SG_TWEETS_TOPIC=f"{name}-tweets",
        SG_GRAPH_EVENTS_TOPIC=f"{name}-graph",
        SG_TOPIC_PARTITIONS="2",
    )
    first = await socialgraph(env, "create-topics")
    assert first.code == 0, first.err
    assert first.out.startswith("created: ")
    assert set(first.out.removeprefix("created: ").strip().split(", ")) == {f"{name}-tweets", f"{name}-graph"}

    second = await socialgraph(env, "create-topics")
    assert second.code == 0, second.err
    assert second.out.strip() == "created: nothing (all topics exist)"

    unreachable = await socialgraph(command_env(SG_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1"), "create-topics")
    assert unreachable.code == 3  # a dependency is unreachable (SPEC §7)
    assert "a dependency is unreachable: Kafka at 127.0.0.1:1" in unreachable.err
    assert "Traceback" not in unreachable.err

    settings = replace(Settings(), kafka_bootstrap_servers=kafka_broker)
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None)
    await consumer.start()
    try:
        topics = await consumer.topics()
        assert {f"{name}-tweets", f"{name}-graph"} <= topics
        for topic in (f"{name}-tweets", f"{name}-graph"):
            assert consumer.partitions_for_topic(topic) == {0, 1}
    finally:
        await consumer.stop()
