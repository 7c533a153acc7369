"""A burst larger than the Redis connection pool waits for connections instead of failing over."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from graph_service.entrypoints.components import build_graph_cache
from graph_service.settings import Settings


async def test_burst_beyond_the_pool_is_served_from_the_cache_without_tripping_the_breaker(
    settings: Settings,
) -> None:
    cache = build_graph_cache(replace(settings, redis_max_connections=4))
    assert cache is not None
    try:
        seen = await cache.epoch(1)
        assert seen is not None
        await cache.fill_follow_state(1, 2, True, seen)
        answers = await asyncio.gather(*(cache.get_follow_state(1, 2) for _ in range(300)))
        assert answers == [True] * 300  # every read a hit: none fell back for want of a connection
        assert cache.trusted
    finally:
        await cache.aclose()
