"""The fanout worker against the real broker, Redis and DynamoDB Local: a crash between the Redis
writes and the commit, two workers in one group, unreadable records, duplicates and late arrivals,
and a Redis outage while an event is pending.

The records are produced here (``graph_service.events`` encodes them as the relay does), so each
test decides the partition and the order a worker sees them in. Timelines are read straight from
Redis: ``GetHomeTimeline`` merges a list into a set, so it would hide a duplicate entry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, replace

import pytest
import redis.asyncio as aioredis
import redis.exceptions
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from socialgraph.v1 import events_pb2 as epb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from structlog.testing import capture_logs

from fanout.worker import FanoutWorker, Offsets
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.entrypoints.server import ServerRuntime
from graph_service.events.kafka import client_options
from graph_service.events.kinds import Follow, TweetPosted, encode
from graph_service.events.records import EVENT_TYPE_HEADER, VERSION_HEADER, OutgoingRecord
from graph_service.settings import Settings
from graph_service.timelines import keys
from tests.support.graph_calls import follow
from tests.support.polling import eventually
from tests.support.runtimes import running_fanout
from tests.support.servers import OwnRedis
from tests.support.timeline_calls import pushed, raw_redis, timeline_becomes, timeline_stub_for

TWEET_CREATED = epb.TweetCreated.DESCRIPTOR.full_name.encode()
FOLLOW_EVENT = epb.FollowEvent.DESCRIPTOR.full_name.encode()
Headers = list[tuple[str, bytes]] | None


# -- helpers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """Where one produced record landed."""

    partition: int
    offset: int


class Producer:
    """Raw records onto the test's topics, each acknowledged before ``send`` returns."""

    def __init__(self, settings: Settings, producer: AIOKafkaProducer) -> None:
        self.settings = settings
        self._producer = producer

    async def send(
        self,
        value: bytes | None,
        *,
        headers: Headers,
        key: bytes | None = None,
        partition: int | None = None,
        topic: str | None = None,
    ) -> Sent:
        meta = await self._producer.send_and_wait(
            topic or self.settings.tweets_topic, value, key=key, headers=headers, partition=partition
        )
        return Sent(meta.partition, meta.offset)

    async def tweet(
        self, tweet_id: int, author_id: int, *, key: bytes | None = None, partition: int | None = None
    ) -> Sent:
        record = encode(TweetPosted(tweet_id, author_id, created_at_us(tweet_id)))
        return await self.record(record, key=key, partition=partition)

    async def record(
        self,
        record: OutgoingRecord,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        topic: str | None = None,
    ) -> Sent:
        return await self.send(
            record.value, headers=record.headers, key=key or record.key, partition=partition, topic=topic
        )

    async def tweets(self, tweets: Iterable[tuple[int, int, int]]) -> None:
        """Many (tweet_id, author_id, partition) at once: all sent, then all acknowledged."""
        pending = []
        for tweet_id, author_id, partition in tweets:
            record = encode(TweetPosted(tweet_id, author_id, created_at_us(tweet_id)))
            pending.append(
                await self._producer.send(
                    self.settings.tweets_topic,
                    record.value,
                    key=record.key,
                    headers=record.headers,
                    partition=partition,
                )
            )
        await asyncio.gather(*pending)


@contextlib.asynccontextmanager
async def producing(settings: Settings) -> AsyncIterator[Producer]:
    producer = AIOKafkaProducer(**client_options(settings), acks="all")
    await producer.start()
    try:
        yield Producer(settings, producer)
    finally:
        await producer.stop()


async def committed_offset(settings: Settings, partition: TopicPartition) -> int:
    """The group's committed offset of one partition (-1 if none), read without joining the group."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=settings.fanout_group, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(partition) or -1
    finally:
        await consumer.stop()


async def recent(client: aioredis.Redis, author_id: int) -> list[int]:
    return [int(v) for v in await client.lrange(keys.recent(author_id), 0, -1)]


async def timelines_become(client: aioredis.Redis, expected: dict[int, list[int]], timeout: float = 20.0) -> None:  # noqa: ASYNC109 - a polling deadline
    """Poll until every listed user's stored home timeline is exactly the expected list."""

    async def probe() -> dict[int, list[int]]:
        return {user: await pushed(client, user) for user in expected}

    await eventually(probe, lambda got: got == expected, timeout=timeout)


async def handled_reaches(workers: Sequence[FanoutWorker], count: int, timeout: float = 20.0) -> None:  # noqa: ASYNC109 - a polling deadline
    async def probe() -> int:
        return sum(w.stats.handled["tweet"] for w in workers)

    await eventually(probe, lambda got: got >= count, timeout=timeout)


async def assigned(worker: FanoutWorker, timeout: float = 30.0) -> set[TopicPartition]:  # noqa: ASYNC109 - a polling deadline
    """Wait until the worker has joined its group and owns partitions."""

    async def probe() -> set[TopicPartition]:
        return set(worker.assigned)

    return await eventually(probe, bool, timeout=timeout)


def newest_first(ids: Iterable[int]) -> list[int]:
    return sorted(set(ids), reverse=True)


def ids(count: int) -> list[int]:
    """``count`` increasing snowflake tweet IDs."""
    generator = TweetIdGenerator()
    return [generator.next_id() for _ in range(count)]


class Crash(Exception):
    """The worker dies between its Redis writes and its commit."""


# -- 1 and 4. crash after the writes, before the commit; duplicates and late arrivals -------------


async def repeated_and_late_tweets_stay_once_newest_first(
    worker: FanoutWorker, client: aioredis.Redis, settings: Settings, author: int, followers: Sequence[int]
) -> None:
    """Duplicates and an older tweet after newer ones, on one partition (so in exactly this order),
    then the whole stream again over every partition: each ID once, newest first."""
    t1, t2, t3, t4, t5 = ids(5)
    short = 999_999_999_999_999  # older, and fewer digits: larger than the others as a string
    arrival = [t2, t4, t4, t5, t1, t3, t2, short, t5, short]
    expected = [t5, t4, t3, t2, t1, short]
    before = worker.stats.handled["tweet"]
    async with producing(settings) as producer:
        for tweet_id in arrival:
            await producer.tweet(tweet_id, author, key=b"same")
        await handled_reaches([worker], before + len(arrival))
        await timelines_become(client, dict.fromkeys(followers, expected))
        assert await recent(client, author) == expected

        await producer.tweets((t, author, i % settings.topic_partitions) for i, t in enumerate(expected))
        await handled_reaches([worker], before + len(arrival) + len(expected))
        for follower in followers:
            assert await pushed(client, follower) == expected
        assert await recent(client, author) == expected


async def test_a_killed_worker_s_records_are_redelivered_and_every_duplicate_or_late_tweet_is_kept_once(
    event_settings: Settings, server: ServerRuntime, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    """Two workers one after the other (each start of this group costs a join; the first member
    of a group on the test broker holds generation 0, which aiokafka never leaves, so the second
    join waits out its session: the same as after a real kill)."""
    authors = {2: [1, 3], 4: [1, 5]}
    for author, followers in {**authors, 6: [7, 8]}.items():
        for follower in followers:
            await follow(stub, follower, author)
    tweet_ids = ids(8)
    author_of = {t: (2 if i % 2 else 4) for i, t in enumerate(tweet_ids)}
    expected = {user: newest_first(t for t, a in author_of.items() if user in authors[a]) for user in (1, 3, 5)}
    sent: dict[Sent, int] = {}
    async with producing(event_settings) as producer:
        for tweet_id, author in author_of.items():
            sent[await producer.tweet(tweet_id, author)] = tweet_id

    crashes: list[tuple[Offsets, dict[int, list[int]]]] = []

    async with raw_redis(event_settings) as client:

        async def crash_once(offsets: Offsets) -> None:
            if not crashes:
                crashes.append((offsets, {user: await pushed(client, user) for user in expected}))
                raise Crash("killed after the Redis writes")

        async with running_fanout(event_settings, after_writes=crash_once) as (first, task):
            with pytest.raises(Crash):
                await asyncio.wait_for(task, timeout=30)
        [(offsets, seen_at_crash)] = crashes
        batch = {
            t
            for where, t in sent.items()
            if where.offset < offsets.get(TopicPartition(event_settings.tweets_topic, where.partition), 0)
        }
        assert batch, "the first batch held tweets"
        assert first.stats.handled["tweet"] == len(batch)
        # The crash came after the writes: the batch's tweets were already in the timelines.
        for user, timeline in seen_at_crash.items():
            assert set(timeline) == {t for t in batch if user in authors[author_of[t]]}

        async with (
            running_fanout(event_settings) as (second, second_task),
            timeline_stub_for(server.port) as timelines,
        ):
            # Nothing was committed, so the group's next member starts over: every record again.
            await handled_reaches([second], len(tweet_ids))
            await timelines_become(client, expected)
            for author in authors:
                assert await recent(client, author) == newest_first(t for t, a in author_of.items() if a == author)
            assert second.stats.handled["tweet"] == len(tweet_ids)
            for user, timeline in expected.items():
                await timeline_becomes(timelines, user, timeline)

            await repeated_and_late_tweets_stay_once_newest_first(second, client, event_settings, 6, [7, 8])
            assert not second.stats.skipped
            assert not second_task.done()


# -- 2. two workers in one group ------------------------------------------------------------------


async def test_two_workers_in_one_group_share_the_partitions_and_fan_out_every_tweet_once(
    event_settings: Settings, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    authors = {a: [1000 + a, 1001 + a, 500] for a in range(201, 206)}  # 500 follows every author
    for author, followers in authors.items():
        for follower in followers:
            await follow(stub, follower, author)
    tweet_ids = ids(30)
    author_list = list(authors)
    author_of = {t: author_list[i % len(author_list)] for i, t in enumerate(tweet_ids)}
    users = {f for followers in authors.values() for f in followers}
    expected = {u: newest_first(t for t, a in author_of.items() if u in authors[a]) for u in users}
    every_partition = {
        TopicPartition(topic, p)
        for topic in (event_settings.tweets_topic, event_settings.graph_events_topic)
        for p in range(event_settings.topic_partitions)
    }

    async with (
        running_fanout(event_settings) as (one, one_task),
        running_fanout(event_settings) as (two, two_task),
        raw_redis(event_settings) as client,
        producing(event_settings) as producer,
    ):

        async def assignments() -> tuple[set[TopicPartition], set[TopicPartition]]:
            return set(one.assigned), set(two.assigned)

        def shared(got: tuple[set[TopicPartition], set[TopicPartition]]) -> bool:
            a, b = got
            return bool(a) and bool(b) and not a & b and a | b == every_partition

        owned_by_one, owned_by_two = await eventually(assignments, shared, timeout=40)
        # Ten tweets on each partition of the tweets topic: both workers have some to do.
        await producer.tweets((t, author_of[t], i % event_settings.topic_partitions) for i, t in enumerate(tweet_ids))
        await handled_reaches([one, two], len(tweet_ids))
        await timelines_become(client, expected)
        assert sum(w.stats.handled["tweet"] for w in (one, two)) >= len(tweet_ids)
        for worker, owned in ((one, owned_by_one), (two, owned_by_two)):
            if any(tp.topic == event_settings.tweets_topic for tp in owned):
                assert worker.stats.handled["tweet"] > 0, "a worker owning tweet partitions handled none"
            assert not worker.stats.skipped
        assert not one_task.done()
        assert not two_task.done()


# -- 3. unreadable records ------------------------------------------------------------------------


def headers(event_type: bytes | None, version: bytes | None) -> Headers:
    found: list[tuple[str, bytes]] = []
    if event_type is not None:
        found.append((EVENT_TYPE_HEADER, event_type))
    if version is not None:
        found.append((VERSION_HEADER, version))
    return found


async def test_unreadable_records_are_logged_counted_and_skipped_while_the_rest_is_applied(
    event_settings: Settings, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    for follower in (1, 3):
        await follow(stub, follower, 2)
    before, middle, after = ids(3)
    key = b"one-partition"
    zero_id = epb.TweetCreated(tweet_id=0, author_id=2).SerializeToString()
    zero_author = epb.TweetCreated(tweet_id=middle - 1, author_id=0).SerializeToString()
    valid = encode(TweetPosted(middle, 2, created_at_us(middle))).value
    bad_tweets: list[tuple[bytes | None, Headers, str]] = [
        (b"\xff\xff\xff not protobuf", headers(TWEET_CREATED, b"1"), "malformed"),
        (valid, headers(TWEET_CREATED, b"2"), "unknown_version"),
        (valid, headers(TWEET_CREATED, None), "unknown_version"),
        (valid, headers(b"socialgraph.v1.TweetDeleted", b"1"), "unknown_type"),
        (valid, None, "unknown_type"),
        (valid, [], "unknown_type"),
        (zero_id, headers(TWEET_CREATED, b"1"), "malformed"),
        (zero_author, headers(TWEET_CREATED, b"1"), "malformed"),
        (None, headers(TWEET_CREATED, b"1"), "malformed"),
    ]
    self_follow = epb.FollowEvent(type=epb.FOLLOW_EVENT_TYPE_FOLLOWED, follower_id=9, followee_id=9)
    bad_follows: list[tuple[bytes | None, Headers, str]] = [
        (b"\x0f", headers(FOLLOW_EVENT, b"1"), "malformed"),
        (self_follow.SerializeToString(), headers(FOLLOW_EVENT, b"1"), "malformed"),
        (encode(Follow(9, 2, True, 1)).value, headers(FOLLOW_EVENT, b"0"), "unknown_version"),
    ]

    with capture_logs() as logs:
        async with (
            running_fanout(event_settings) as (worker, task),
            raw_redis(event_settings) as client,
            producing(event_settings) as producer,
        ):
            first = await producer.tweet(before, 2, key=key)
            where = [await producer.send(value, headers=h, key=key) for value, h, _ in bad_tweets]
            where.append(await producer.tweet(middle, 2, key=key))  # the bytes the bad-header records carried
            last = await producer.tweet(after, 2, key=key)
            assert {s.partition for s in [first, *where, last]} == {first.partition}
            # One partition is applied in order: once the last tweet is in, every record before it was seen.
            await timelines_become(client, {1: [after, middle, before], 3: [after, middle, before]})

            graph = event_settings.graph_events_topic
            for value, h, _ in bad_follows:
                await producer.send(value, headers=h, key=b"2", topic=graph)
            await producer.record(encode(Follow(9, 2, True, 1)), topic=graph)  # keyed by followee 2, as above
            await timelines_become(client, {9: [after, middle, before]})

            bad = bad_tweets + bad_follows
            assert worker.stats.skipped == Counter(reason for _, _, reason in bad)

            async def handled() -> Counter[str]:  # counted once the follow's work is done, after its write
                return worker.stats.handled

            await eventually(handled, lambda h: h == Counter(tweet=3, follow=1), timeout=10)
            logged = [entry for entry in logs if entry["event"] == "fanout_record_skipped"]
            assert Counter(entry["reason"] for entry in logged) == worker.stats.skipped
            assert {(e["partition"], e["offset"]) for e in logged if e["topic"] == event_settings.tweets_topic} == {
                (s.partition, s.offset) for s in where[:-1]
            }
            assert not task.done(), "the worker stopped"


# -- 5. a Redis outage while an event is pending --------------------------------------------------


async def test_a_tweet_pending_while_redis_is_down_is_retried_and_applied_after_the_restart(
    event_settings: Settings, stub: pb_grpc.SocialGraphServiceStub, own_redis: OwnRedis
) -> None:
    for follower in (1, 3):
        await follow(stub, follower, 2)
    settings = replace(event_settings, redis_url=own_redis.url, redis_timeout_seconds=0.5)
    [tweet_id] = ids(1)

    async with (
        running_fanout(settings) as (worker, task),
        producing(settings) as producer,
    ):
        await assigned(worker)
        own_redis.stop()
        await producer.tweet(tweet_id, 2)

        async def retries() -> int:
            return worker.stats.retries

        await eventually(retries, lambda n: n >= 2)  # the pending tweet met the outage, twice
        assert worker.stats.handled["tweet"] == 0
        own_redis.restart()
        async with raw_redis(settings) as client:
            await timelines_become(client, {1: [tweet_id], 3: [tweet_id]})
            assert await recent(client, 2) == [tweet_id]
        assert worker.stats.handled["tweet"] == 1
        assert not worker.stats.skipped, "a Redis failure is not a reason to skip a record"
        assert not task.done()

        # A command Redis refuses (here: the timeline key holds a string) is no outage: retrying
        # cannot help, so the worker ends with the error and commits nothing past that record.
        async with raw_redis(settings) as client:
            await client.set(keys.home(3), "not a list")
        retries = worker.stats.retries
        [refused] = ids(1)
        sent = await producer.tweet(refused, 2)

        async def ended() -> bool:
            return task.done()

        await eventually(ended, bool)
        assert isinstance(task.exception(), redis.exceptions.ResponseError)
        assert worker.stats.retries == retries
        assert worker.stats.handled["tweet"] == 1
        assert await committed_offset(settings, TopicPartition(settings.tweets_topic, sent.partition)) <= sent.offset
