"""The cache's raw entries on a Redis Cluster: listed across nodes (all, by user, many users), read, dropped."""

from __future__ import annotations

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from graph_service.cache import keys
from graph_service.cache.inspection import PER_USER_SCANS, CachedEntry, CacheInspector, EntryKind
from graph_service.domain.models import Direction

USERS = range(1, 41)  # their hash tags spread over the three masters


async def listed(inspector: CacheInspector, users: list[int] | None) -> set[str]:
    return {e.key async for batch in inspector.entries(users, batch=7) for e in batch}


async def test_entries_of_every_node_are_listed_read_and_dropped(
    flushed_cluster: RedisCluster, redis_cluster: list[int]
) -> None:
    for user in USERS:
        flushed_cluster.set(keys.follow_state(user, 1000), "1")
        flushed_cluster.set(keys.epoch(user), "4")  # not an entry fsck judges
        flushed_cluster.hset(keys.counts(user), mapping={"fl": 2, "fg": 3, "v": 9})
    flushed_cluster.zadd(keys.list_key(Direction.FOLLOWERS, 7), {"!": 0, "0000000000000001#00000000000000000002": 0})
    flushed_cluster.set(keys.privacy(7), "1")
    client = AsyncRedisCluster(host="127.0.0.1", port=redis_cluster[0], decode_responses=True)
    inspector = CacheInspector(client)
    try:
        every = await listed(inspector, None)
        assert len(every) == 2 * len(USERS) + 2
        assert await listed(inspector, [7]) == {
            keys.follow_state(7, 1000),
            keys.counts(7),
            keys.list_key(Direction.FOLLOWERS, 7),
            keys.privacy(7),
        }
        many = list(range(1, PER_USER_SCANS + 5))  # one SCAN of everything, filtered
        assert await listed(inspector, many) == {k for k in every if int(k.split("{")[1].split("}")[0]) in many}

        entries = [
            CachedEntry(keys.follow_state(7, 1000), EntryKind.FOLLOW_STATE, 7, 1000),
            CachedEntry(keys.counts(7), EntryKind.COUNTS, 7),
            CachedEntry(keys.list_key(Direction.FOLLOWERS, 7), EntryKind.FOLLOWERS_LIST, 7),
            CachedEntry(keys.privacy(8), EntryKind.PRIVACY, 8),
        ]
        assert await inspector.read(entries) == [
            "1",
            ["2", "3", "9"],
            ["!", "0000000000000001#00000000000000000002"],
            None,
        ]

        for entry in entries[:3]:
            await inspector.drop(entry)
        assert await inspector.read(entries) == [None, None, None, None]
        assert flushed_cluster.get(keys.epoch(7)) == "6"  # bumped by the follow state's and the list's drops
        assert flushed_cluster.get(keys.follow_state(8, 1000)) == "1"
    finally:
        await client.aclose()
