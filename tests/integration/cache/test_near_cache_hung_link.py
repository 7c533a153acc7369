"""The near cache on a link to Redis that hangs rather than closes (SPEC §6), through a freezable
TCP proxy (``tests/support/tcp_freeze.py``): a fence is given up after the Redis timeout, the near
cache empties and comes back (empty, tracking) once the link flows again; a dead link is found by
the heartbeat when no read comes; the ordinary Redis client gives up after its timeout too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import redis.asyncio as aioredis
from redis.exceptions import TimeoutError as RedisTimeoutError

from graph_service.cache.near_cache import HEARTBEAT_TIMEOUTS, NearCache
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from tests.support.polling import eventually
from tests.support.tcp_freeze import Direction, TcpFreeze, tcp_freeze

TIMEOUT = 0.25  # SG_REDIS_TIMEOUT_SECONDS's default
MARGIN = 0.5  # a loaded CI machine's scheduling


@pytest.fixture
async def link(redis_url: str) -> AsyncIterator[TcpFreeze]:
    async with tcp_freeze(int(redis_url.rsplit(":", 1)[1].split("/")[0])) as proxy:
        yield proxy


@pytest.fixture
async def near(link: TcpFreeze) -> AsyncIterator[NearCache]:
    cache = NearCache(f"redis://127.0.0.1:{link.port}/0", max_entries=1000, timeout_seconds=TIMEOUT)
    cache.start()
    await eventually(lambda: _usable(cache), bool, timeout=10)
    yield cache
    await cache.aclose()


async def _usable(near: NearCache) -> bool:
    return near.usable


async def _unusable(near: NearCache) -> bool:
    return not near.usable


@pytest.mark.parametrize("direction", [Direction.TO_CLIENT, Direction.BOTH], ids=["redis-to-us", "both-ways"])
async def test_a_fence_on_a_frozen_link_says_no_within_the_timeout_and_it_comes_back_empty(
    near: NearCache, link: TcpFreeze, redis_url: str, direction: Direction
) -> None:
    key = "sg:{1}:fs:2"
    near.put(key, "0", near.stamp(key))
    assert await near.fence() is True
    assert near.get(key) == "0"
    writer = aioredis.from_url(redis_url, decode_responses=True)
    try:
        link.freeze(direction)
        await writer.set(key, "1")  # acknowledged; its invalidation is held on the frozen link
        started = time.monotonic()
        answers = await asyncio.gather(*(near.fence() for _ in range(20)))
        waited = time.monotonic() - started
        assert answers == [False] * 20  # every waiting read goes on to Redis/DynamoDB
        assert waited < TIMEOUT + MARGIN, waited
        assert near.get(key) is None  # nothing stale is left to answer from
        assert not near.usable
        # It cannot track again while the link hangs (the handshake is under the timeout too)...
        assert await near.fence() is False
        link.thaw()
        # ...and once it flows, it tracks again, empty, and its fences are answered.
        await eventually(lambda: _usable(near), bool, timeout=10)
        assert near.get(key) is None
        near.put(key, "1", near.stamp(key))
        assert await near.fence() is True
        assert near.get(key) == "1"
        await writer.set(key, "0")
        assert await near.fence() is True
        assert near.get(key) is None
    finally:
        link.thaw()
        await writer.aclose()


async def test_a_dead_link_is_found_by_the_heartbeat_without_reads(near: NearCache, link: TcpFreeze) -> None:
    key = "sg:{3}:fs:4"
    near.put(key, "1", near.stamp(key))
    link.freeze(Direction.BOTH)
    started = time.monotonic()
    await eventually(lambda: _unusable(near), bool, timeout=10, interval=0.02)
    assert time.monotonic() - started < (HEARTBEAT_TIMEOUTS + 1) * TIMEOUT + MARGIN
    assert near.get(key) is None
    link.thaw()
    await eventually(lambda: _usable(near), bool, timeout=10)
    assert await near.fence() is True


async def test_the_redis_client_gives_up_after_its_timeout_on_a_frozen_link(link: TcpFreeze) -> None:
    """What the reads a fence sent on meet on the same link: one Redis timeout, no retries."""
    settings = replace(Settings(), redis_url=f"redis://127.0.0.1:{link.port}/0", redis_timeout_seconds=TIMEOUT)
    client = build_redis(settings.redis_url, cluster=False, settings=settings)
    try:
        await client.set("sg:{5}:x", "1")
        for direction in (Direction.TO_CLIENT, Direction.BOTH):
            link.freeze(direction)
            for _ in range(2):  # the first on a pooled connection, the second on a new one (a handshake)
                started = time.monotonic()
                with pytest.raises(RedisTimeoutError):
                    await client.get("sg:{5}:x")
                assert time.monotonic() - started < TIMEOUT + MARGIN
            link.thaw()
            assert await client.get("sg:{5}:x") == "1"
    finally:
        link.thaw()
        await client.aclose()
