"""The near cache against a real Redis: the fence orders every acknowledged change before the read,
a fill that raced a change is not kept, and a lost connection empties it until it tracks again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from graph_service.cache.keys import TRUST_GENERATION
from graph_service.cache.near_cache import CONNECTION_NAME, NearCache
from graph_service.redis_client.packed import command
from tests.support.polling import eventually


@pytest.fixture
async def near(redis_url: str) -> AsyncIterator[NearCache]:
    cache = NearCache(redis_url, max_entries=1000)
    cache.start()

    async def usable() -> bool:
        return cache.usable

    await eventually(usable, bool, timeout=10)
    yield cache
    await cache.aclose()


@pytest.fixture
async def writer(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def test_after_the_fence_no_entry_survives_a_change_acknowledged_before_it(
    near: NearCache, redis_url: str
) -> None:
    """The writer's SET is acknowledged while this process has not yet read the invalidation (a
    blocking client holds the event loop, as another replica's write would not wait for it): the
    entry is still there, stale; after the fence, never."""
    blocking = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        for i in range(300):
            key = f"sg:{{{i}}}:fs:1"
            near.put(key, "0", near.stamp(key))
            blocking.set(key, "1")  # acknowledged: every read from now on must not see "0"
            assert near.get(key) == "0"  # the window the fence closes
            assert await near.fence() is True
            assert near.get(key) is None, i
    finally:
        blocking.close()


async def test_a_fill_that_raced_a_change_is_not_kept(near: NearCache, writer: aioredis.Redis) -> None:
    key = "sg:{7}:cnt"
    stamp = near.stamp(key)  # as before a Redis read...
    await writer.set(key, "changed")  # ...which a change overtakes
    assert await near.fence()
    near.put(key, "read before the change", stamp)
    assert near.get(key) is None
    fresh = near.stamp(key)
    near.put(key, "changed", fresh)
    assert near.get(key) == "changed"


async def test_entries_are_bounded_and_parts_kept_apart(near: NearCache) -> None:
    small = NearCache("redis://unused", max_entries=2)
    small._usable = True  # no connection needed to hold entries
    for key in ("sg:{1}:a", "sg:{2}:a", "sg:{3}:a"):
        small.put(key, key, small.stamp(key))
    assert small.get("sg:{1}:a") is None
    assert small.get("sg:{3}:a") == "sg:{3}:a"
    key = "sg:{9}:fl"
    near.put(key, "page of 50", near.stamp(key), 50)
    near.put(key, "page of 20", near.stamp(key), 20)
    assert (near.get(key, 50), near.get(key, 20), near.get(key)) == ("page of 50", "page of 20", None)


async def test_a_killed_connection_empties_it_and_it_comes_back_empty(near: NearCache, writer: aioredis.Redis) -> None:
    key = "sg:{3}:fs:4"
    near.put(key, "1", near.stamp(key))
    stale_stamp = near.stamp("sg:{3}:fs:5")
    (tracker,) = [c for c in await writer.client_list() if c.get("name") == CONNECTION_NAME]
    await writer.client_kill_filter(_id=tracker["id"])

    async def state() -> tuple[bool, object]:
        return near.usable, near.get(key)

    await eventually(state, lambda s: s == (False, None) or (s[0] and s[1] is None), timeout=10)
    await eventually(lambda: _usable(near), bool, timeout=10)
    assert near.get(key) is None
    near.put("sg:{3}:fs:5", "1", stale_stamp)  # read before the loss: not kept
    assert near.get("sg:{3}:fs:5") is None
    assert await near.fence()


async def test_a_reply_that_is_not_a_fence_s_drops_the_connection_and_empties_it(near: NearCache) -> None:
    """Only fences are sent on the tracking connection. A reply of anything else (here an ``ECHO``
    written on it behind the near cache's back; in life, an invalidation a parser returned as a
    reply) must not answer a fence: the near cache starts over, empty."""
    key = "sg:{4}:fs:5"
    near.put(key, "1", near.stamp(key))
    link = near._link
    assert link is not None
    assert link._transport is not None
    link._transport.write(command("ECHO", "not a fence"))
    await asyncio.wait_for(link.closed, 10)
    assert near.get(key) is None
    await eventually(lambda: _usable(near), bool, timeout=10)
    assert near._link is not link
    assert await near.fence()


async def test_flushall_empties_it_and_trusts_nothing_until_a_reset(near: NearCache, writer: aioredis.Redis) -> None:
    """FLUSHALL takes the cache's trust record too: the fence says no until a cache reset writes a
    new generation (``cache/lease.py``); the entry is gone either way."""
    key = "sg:{5}:fs:6"
    near.put(key, "1", near.stamp(key))
    await writer.flushall()
    assert not await near.fence()
    assert near.get(key) is None
    await writer.set(TRUST_GENERATION, "after-reset")
    assert await near.fence()
    assert near.get(key) is None


async def _usable(near: NearCache) -> bool:
    return near.usable


async def test_a_fence_that_cannot_be_written_sends_the_read_to_redis_and_it_starts_over(near: NearCache) -> None:
    """The fence goes straight onto the connection's transport. A write refused there answers that
    read (and every other waiting) with "do not trust me", empties the near cache and reconnects."""
    key = "sg:{5}:fs:6"
    near.put(key, "1", near.stamp(key))
    link = near._link
    assert link is not None
    assert link._transport is not None
    real = link._transport

    class Refusing:
        def is_closing(self) -> bool:
            return False

        def write(self, data: bytes) -> None:
            raise ConnectionResetError("the transport is gone")

        def abort(self) -> None:
            real.abort()

    link._transport = Refusing()  # type: ignore[assignment]  # the one write the test refuses
    assert await near.fence() is False
    assert near.get(key) is None

    async def reconnected() -> bool:
        return near.usable and near._link is not link

    await eventually(reconnected, bool, timeout=10)
    assert await near.fence() is True
