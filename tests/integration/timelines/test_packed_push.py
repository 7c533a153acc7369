"""The fanout's push on a single Redis node, packed once (``graph_service/redis_client/packed.py``):
a whole batch lands, a script Redis forgot is loaded again, and an error reply midway neither
stops the other timelines nor leaves unread replies on a pooled connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from graph_service.domain.errors import TimelineUnavailable
from graph_service.redis_client.connect import build_redis
from graph_service.redis_client.packed import evalsha_calls, evalsha_each_key
from graph_service.settings import Settings
from graph_service.timelines import keys
from graph_service.timelines.timeline_store import TimelineStore

CAP = 5


ONE_CONNECTION = Settings(redis_max_connections=1, redis_timeout_seconds=0.1)
"""A pool of one connection (a reply left unread would answer the next command) and a batch
timeout of 0.4 s."""


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[TimelineStore]:
    value = TimelineStore(
        build_redis(redis_url, cluster=False, settings=ONE_CONNECTION),
        timeline_cap=CAP,
        recent_cap=2,
        author_ttl_seconds=60,
    )
    await value.load_scripts()
    try:
        yield value
    finally:
        await value.aclose()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_batch_of_a_thousand_timelines_gets_the_tweet_once_each(store: TimelineStore) -> None:
    users = list(range(1, 1001))
    await store.push(10**18 + 7, users)
    await store.push(10**18 + 7, users[:10])  # again: no duplicate
    await store.push(10**18 + 3, users[:3])  # older: behind it
    assert [await store.home(u) for u in (1, 3, 4, 1000)] == [
        [10**18 + 7, 10**18 + 3],
        [10**18 + 7, 10**18 + 3],
        [10**18 + 7],
        [10**18 + 7],
    ]


async def test_a_script_redis_forgot_is_loaded_again(store: TimelineStore, raw: aioredis.Redis) -> None:
    await raw.script_flush()
    await store.push(41, [1, 2])
    assert [await store.home(u) for u in (1, 2)] == [[41], [41]]


async def test_an_error_reply_midway_is_raised_after_the_rest_land_and_the_connection_stays_in_step(
    store: TimelineStore, raw: aioredis.Redis
) -> None:
    """One connection in the pool: a reply left unread would be the answer to the next command."""
    await raw.set(keys.home(2), "not a list")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await store.push(50, [1, 2, 3])
    assert await store.home(1) == [50]
    assert await store.home(3) == [50]
    await store.merge(4, [60, 61])
    assert await store.home(4) == [61, 60]


async def test_each_key_runs_the_script_with_the_same_arguments(raw: aioredis.Redis) -> None:
    sha = await raw.script_load("return redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2])")
    await evalsha_each_key(raw, sha, ["a", "b{x}", "c"], [7, "eight"])
    await evalsha_each_key(raw, sha, [], [1])
    assert [await raw.lrange(k, 0, -1) for k in ("a", "b{x}", "c")] == [["7", "eight"]] * 3


async def test_a_batch_not_answered_in_time_closes_its_connection_and_the_next_call_reads_its_own_reply(
    store: TimelineStore, raw: aioredis.Redis
) -> None:
    """Redis holds every write (``CLIENT PAUSE ... WRITE``) past the batch's timeout: the push is
    ``TimelineUnavailable``; once Redis answers again, the pool's one connection is in step."""
    await store.merge(4, [60])
    await raw.client_pause(1500, all=False)
    with pytest.raises(TimelineUnavailable):
        await store.push(70, [1, 2])
    await raw.client_unpause()
    await store.merge(4, [61])
    assert await store.home(4) == [61, 60]
    await store.push(71, [5])
    assert await store.home(5) == [71]


async def test_calls_with_keys_and_arguments_of_their_own_answer_in_order_and_an_error_stays_its_own(
    redis_url: str, raw: aioredis.Redis
) -> None:
    """``evalsha_calls`` (a follow's write-through in both users' slots): the replies in order; a
    call failing midway is raised after the others ran, and the pool's one connection stays in step."""
    one = build_redis(redis_url, cluster=False, settings=ONE_CONNECTION)
    assert isinstance(one, aioredis.Redis)
    try:
        sha = await raw.script_load("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        assert await evalsha_calls(one, sha, [(["n{1}"], [2]), (["n{2}"], [5])]) == [2, 5]
        await raw.set("n{3}", "not a number")
        with pytest.raises(ResponseError, match="not an integer"):
            await evalsha_calls(one, sha, [(["n{1}"], [1]), (["n{3}"], [1]), (["n{2}"], [1])])
        assert [await raw.get(k) for k in ("n{1}", "n{2}")] == ["3", "6"]
        assert await one.get("n{1}") == "3"  # the next command reads its own reply
    finally:
        await one.aclose()
