"""The graph cache on Redis keeps every contract of its roles (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from socialgraph_devstack.processes import free_port

from graph_service.cache import keys
from graph_service.cache.graph_cache import GraphCache
from graph_service.domain.models import Relationship
from tests.support.contracts.graph_cache import (
    LIST_LIMIT,
    CacheInvalidationsContract,
    CacheRepairsContract,
    CountCacheContract,
    GraphCacheReadsContract,
    GraphCacheUnderTest,
    ListCacheContract,
)


def _graph_cache(url: str) -> GraphCache:
    return GraphCache(Redis.from_url(url, decode_responses=True), ttl_seconds=60, list_limit=LIST_LIMIT)


@pytest.fixture
async def graph_cache(redis_url: str) -> AsyncIterator[GraphCacheUnderTest]:
    cache = _graph_cache(redis_url)
    unreachable = _graph_cache(f"redis://127.0.0.1:{free_port()}/0")  # connections are refused at once
    try:
        yield GraphCacheUnderTest(cache, unreachable)
    finally:
        await cache.aclose()
        await unreachable.aclose()


class TestRedisCountCache(CountCacheContract):
    pass


class TestRedisListCache(ListCacheContract):
    pass


class TestRedisGraphCacheReads(GraphCacheReadsContract):
    pass


class TestRedisCacheInvalidations(CacheInvalidationsContract):
    pass


class TestRedisCacheRepairs(CacheRepairsContract):
    pass


async def test_a_relationship_cached_without_its_mute_entry_is_a_miss(redis_url: str) -> None:
    """What a release before mutes left in the cache (the six flags alone, no mute entry) is not
    trusted: it is read again from the store and filled with its mute, so old and new tasks can share
    one cache during a rollout; and the flags stay the value an old task reads."""
    cache = _graph_cache(redis_url)
    raw = Redis.from_url(redis_url, decode_responses=True)
    try:
        actor, target = 9_100_001, 9_100_002
        await raw.set(keys.relationship(actor, target), "100000")
        found, seen = await cache.read_relationships(actor, [target])
        assert found == {}
        assert seen is not None
        muted = Relationship(following=True, mute_expires_us=0, muting_notifications=True)
        await cache.fill_relationships(actor, {target: muted}, seen)
        assert await raw.get(keys.relationship(actor, target)) == "100000"
        assert (await cache.read_relationships(actor, [target]))[0] == {target: muted}
    finally:
        await cache.aclose()
        await raw.aclose()


async def test_a_touched_or_invalidated_pair_leaves_no_mute_entry_behind(redis_url: str) -> None:
    """A request, block or repair (``touch_pair``) and an owed invalidation (``invalidate_edge``) drop
    the pair's mute entries too: a relationship entry filled later by a release before mutes (flags
    alone) must not find a stale mute entry to make it whole."""
    cache = _graph_cache(redis_url)
    raw = Redis.from_url(redis_url, decode_responses=True)
    try:
        for drop in ("touch_pair", "invalidate_edge"):
            actor, target = (9_200_001, 9_200_002) if drop == "touch_pair" else (9_200_003, 9_200_004)
            muted = Relationship(following=True, mute_expires_us=0)
            _, seen = await cache.read_relationships(actor, [target])
            assert seen is not None
            await cache.fill_relationships(actor, {target: muted}, seen)
            assert (await cache.read_relationships(actor, [target]))[0] == {target: muted}
            assert await getattr(cache, drop)(actor, target)
            await raw.set(keys.relationship(actor, target), "100000")  # an old task's fill
            assert (await cache.read_relationships(actor, [target]))[0] == {}, drop
    finally:
        await cache.aclose()
        await raw.aclose()
