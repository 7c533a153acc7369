"""A Redis outage: reads fall back to DynamoDB, writes succeed, and a restart from a stale dump serves nothing stale."""

from __future__ import annotations

import asyncio

import pytest
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.cache import keys
from graph_service.domain.models import Direction
from graph_service.settings import Settings
from tests.support.graph_calls import Stub, counts, is_following
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.servers import OwnRedis
from tests.support.tables import create_tables, wants_streams


@pytest.fixture
async def settings(request: pytest.FixtureRequest, dynamodb_local: str, own_redis: OwnRedis) -> Settings:
    """Fresh tables, and this test's own Redis as the cache: conftest's server, stub and counters run on it.
    The production Redis timeout (0.25 s), so a write that cannot settle the cache waits out a lease
    of 2 s (``cache/lease.py``), not the 16 s that the tests' usual 2 s timeout makes."""
    value = make_settings(dynamodb_local, own_redis.url, redis_timeout_seconds=0.25)
    await create_tables(value, streams=wants_streams(request))
    return value


async def followers(stub: Stub, user_id: int) -> list[int]:
    return [e.user_id for e in (await stub.ListFollowers(pb.ListFollowersRequest(user_id=user_id))).followers]


async def following(stub: Stub, user_id: int) -> list[int]:
    return [e.user_id for e in (await stub.ListFollowing(pb.ListFollowingRequest(user_id=user_id))).following]


@pytest.mark.streams
async def test_unfollow_during_an_outage_is_not_undone_by_a_stale_dump(
    own_redis: OwnRedis, settings: Settings, stub: Stub
) -> None:
    """An unfollow made while Redis is down stays visible after Redis comes back with the cached follow in its dump."""
    await stub.Follow(pb.FollowRequest(follower_id=1, followee_id=2))
    await stub.Follow(pb.FollowRequest(follower_id=3, followee_id=2))
    async with running_counters(settings):
        await eventually(lambda: counts(stub, 2), lambda c: c == (2, 0))
    # Warm the cache: the follow state, both first list pages and the counts.
    assert await is_following(stub, (1, 2))
    assert await is_following(stub, (1, 2))
    assert await followers(stub, 2) == [3, 1]
    assert await following(stub, 1) == [2]
    assert await counts(stub, 2) == (2, 0)
    assert await counts(stub, 1) == (0, 1)
    with own_redis.client() as client:
        assert client.get(keys.follow_state(1, 2)) == "1"
        assert client.zcard(keys.list_key(Direction.FOLLOWERS, 2)) == 3  # two entries and the sentinel
        assert client.exists(keys.list_key(Direction.FOLLOWING, 1))
        assert client.hget(keys.counts(2), "fl") == "2"

    own_redis.shutdown_saving()
    # While Redis is down every call still works, from DynamoDB. No counters consumer runs, so
    # nothing but the service itself keeps the stale entries of the dump from being served later.
    await stub.Unfollow(pb.UnfollowRequest(follower_id=1, followee_id=2))
    assert not await is_following(stub, (1, 2))
    assert await followers(stub, 2) == [3]
    assert await following(stub, 1) == []
    assert await counts(stub, 2) == (2, 0)  # the counters in DynamoDB wait for the consumer
    assert await is_following(stub, (3, 2))

    own_redis.restart()
    with own_redis.client() as client:  # the dump brought the stale entries back
        assert client.get(keys.follow_state(1, 2)) == "1"
        assert client.zcard(keys.list_key(Direction.FOLLOWERS, 2)) == 3

    async def reads_after_restart() -> bool:
        """Every answer must already be right; True once the cache serves the right state again."""
        assert not await is_following(stub, (1, 2))
        assert await followers(stub, 2) == [3]
        assert await following(stub, 1) == []
        with own_redis.client() as client:
            return client.get(keys.follow_state(1, 2)) == "0"

    assert await eventually(reads_after_restart, bool)
    for _ in range(5):  # and it stays right, now answered from Redis
        assert await reads_after_restart()
    with own_redis.client() as client:
        # Whatever list is cached again holds no entry of the removed edge.
        assert not [m for m in client.zrange(keys.list_key(Direction.FOLLOWERS, 2), 0, -1) if m.endswith(f"#{1:020d}")]
        assert not [m for m in client.zrange(keys.list_key(Direction.FOLLOWING, 1), 0, -1) if m.endswith(f"#{2:020d}")]

    # The consumer then counts the unfollow and replaces the stale counts the dump brought back.
    async with running_counters(settings):
        await eventually(lambda: counts(stub, 2), lambda c: c == (1, 0))
        await eventually(lambda: counts(stub, 1), lambda c: c == (0, 0))
    with own_redis.client() as client:
        assert client.hmget(keys.counts(2), ["fl", "fg"]) == ["1", "0"]


async def test_follow_during_an_outage_is_not_undone_by_a_stale_dump(
    own_redis: OwnRedis, stub: Stub, counters: asyncio.Task[None]
) -> None:
    """A follow made while Redis is down stays visible, and is counted, after Redis comes back with stale entries."""
    await eventually(lambda: _trusted(own_redis), bool)  # the server's keeper has written the trust record
    assert not await is_following(stub, (5, 6))
    assert await followers(stub, 6) == []
    assert await following(stub, 5) == []
    assert await counts(stub, 6) == (0, 0)
    with own_redis.client() as client:
        assert client.get(keys.follow_state(5, 6)) == "0"
        assert client.zrange(keys.list_key(Direction.FOLLOWERS, 6), 0, -1) == ["!"]

    own_redis.shutdown_saving()
    reply = await stub.Follow(pb.FollowRequest(follower_id=5, followee_id=6))
    assert reply.state == pb.FOLLOW_STATE_FOLLOWING
    assert await is_following(stub, (5, 6))
    assert await followers(stub, 6) == [5]
    await eventually(lambda: counts(stub, 6), lambda c: c == (1, 0))

    own_redis.restart()
    with own_redis.client() as client:  # the dump brought the stale entries back (unless the
        # server's cache reset, on its lapsed lease, has already emptied it: cache/lease.py)
        assert client.get(keys.follow_state(5, 6)) in ("0", None)
        assert client.hmget(keys.counts(6), ["fl", "fg"]) in (["0", "0"], [None, None])

    async def reads_after_restart() -> bool:
        assert await is_following(stub, (5, 6))
        assert await followers(stub, 6) == [5]
        assert await following(stub, 5) == [6]
        with own_redis.client() as client:
            return client.get(keys.follow_state(5, 6)) == "1"

    assert await eventually(reads_after_restart, bool)
    for _ in range(5):
        assert await reads_after_restart()
    await eventually(lambda: counts(stub, 6), lambda c: c == (1, 0))
    await eventually(lambda: counts(stub, 5), lambda c: c == (0, 1))
    with own_redis.client() as client:
        assert client.hmget(keys.counts(6), ["fl", "fg"]) == ["1", "0"]


async def test_writes_invalidate_for_other_replicas_even_while_their_own_breaker_is_open(settings: Settings) -> None:
    """A replica whose breaker tripped (one Redis timeout) still delivers its write-throughs, so a
    replica that reads the cache never serves the state from before the acknowledged write."""
    async with (
        running_server(settings) as writer_server,
        stub_for(writer_server.port) as writer,
        running_server(settings) as reader_server,
        stub_for(reader_server.port) as reader,
    ):
        await writer.Follow(pb.FollowRequest(follower_id=1, followee_id=2))
        assert await is_following(reader, (1, 2))  # cached as '1' by the reader
        await reader.GetRelationships(pb.GetRelationshipsRequest(actor_id=1, target_ids=[2]))
        assert writer_server.cache is not None
        writer_server.cache._down_until = float("inf")  # as after a timeout: reads skip Redis
        await writer.Unfollow(pb.UnfollowRequest(follower_id=1, followee_id=2))
        assert not await is_following(reader, (1, 2))
        await writer.Block(pb.BlockRequest(blocker_id=2, blocked_id=1))
        reply = await reader.GetRelationships(pb.GetRelationshipsRequest(actor_id=1, target_ids=[2]))
        assert reply.relationships[0].blocked_by


async def _trusted(own_redis: OwnRedis) -> bool:
    with own_redis.client() as client:
        return client.get(keys.TRUST_GENERATION) is not None
