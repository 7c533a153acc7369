"""The graph cache on Redis keeps the suggestion-cache contract (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from socialgraph_devstack.processes import free_port

from graph_service.cache.graph_cache import GraphCache
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from tests.support.contracts.suggestion_cache import SuggestionCacheContract, SuggestionCacheUnderTest


class TestRedisSuggestionCache(SuggestionCacheContract):
    @pytest.fixture
    async def suggestions(self, redis_url: str) -> AsyncIterator[SuggestionCacheUnderTest]:
        cache = GraphCache(build_redis(redis_url, cluster=False, settings=Settings()), ttl_seconds=60, list_limit=100)
        nothing_there = f"redis://127.0.0.1:{free_port()}/0"  # connections are refused at once
        unreachable = GraphCache(
            build_redis(nothing_there, cluster=False, settings=Settings()), ttl_seconds=60, list_limit=100
        )

        async def write_touching(user_id: int) -> None:
            await cache.touch_pair(user_id, user_id + 1)

        try:
            yield SuggestionCacheUnderTest(cache, write_touching, unreachable)
        finally:
            await cache.aclose()
            await unreachable.aclose()
