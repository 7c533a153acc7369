"""The graph cache on Redis keeps every contract of its roles (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from socialgraph_devstack.processes import free_port

from graph_service.cache.graph_cache import GraphCache
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
