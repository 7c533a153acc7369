"""The fanout's ``FollowerSource``: an author's followers and follower count from the graph cache
when Redis holds them (a whole cached list, the counters' absolute values), else from DynamoDB.

It never fills the cache: a fanout reads each list once, and filling a list of up to
``SG_ADJACENCY_CACHE_LIMIT`` entries for one read would cost more than it saves.
"""

from __future__ import annotations

from graph_service.domain.models import Cursor, Direction, EdgePage
from graph_service.domain.ports import FollowerCache, FollowerSource

__all__ = ["CachedFollowerSource"]


class CachedFollowerSource:
    def __init__(self, store: FollowerSource, cache: FollowerCache) -> None:
        self._store = store
        self._cache = cache

    async def follower_count(self, user_id: int) -> int:
        cached = await self._cache.get_counts([user_id])
        if user_id in cached:
            return cached[user_id].followers
        return await self._store.follower_count(user_id)

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        cached = await self._cache.read_list(Direction.FOLLOWERS, user_id, limit, after)
        if cached is not None:
            return cached
        return await self._store.list_followers(user_id, limit, after)
