"""The write-through cache wrapped around an edge store, behind the same ``EdgeStore`` interface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import structlog

from graph_service.cache.graph_cache import GraphCache
from graph_service.models import Counts, Cursor, Direction, Edge, EdgePage, FollowResult
from graph_service.store.edge_store import EdgeStore

__all__ = ["CachedEdgeStore"]

log = structlog.get_logger(__name__)
FILL_PAGE = 1000


class CachedEdgeStore:
    """Reads try Redis first; writes go to the store, then through to Redis."""

    def __init__(self, store: EdgeStore, cache: GraphCache) -> None:
        self._store = store
        self.cache = cache
        self._filling: set[tuple[Direction, int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def follow(self, follower_id: int, followee_id: int) -> FollowResult:
        result = await self._store.follow(follower_id, followee_id)
        await self.cache.write_edge(follower_id, followee_id, result.at_us, following=True)
        return result

    async def unfollow(self, follower_id: int, followee_id: int) -> int | None:
        at = await self._store.unfollow(follower_id, followee_id)
        await self.cache.write_edge(follower_id, followee_id, at, following=False)
        return at

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        cached = await self.cache.get_follow_state(follower_id, followee_id)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(follower_id)
        following = await self._store.is_following(follower_id, followee_id)
        if seen is not None:
            await self.cache.fill_follow_state(follower_id, followee_id, following, seen)
        return following

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        cached = await self.cache.read_list(direction, user_id, limit, after)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(user_id)
        page = await self._store.list_edges(direction, user_id, limit, after)
        if seen is not None and after is None:
            if not page.has_more:
                await self.cache.fill_list(direction, user_id, seen, _iterate(page.entries))
            else:
                self._fill_in_background(direction, user_id, seen)
        return page

    def _fill_in_background(self, direction: Direction, user_id: int, seen: str) -> None:
        if (direction, user_id) in self._filling:
            return
        self._filling.add((direction, user_id))
        task = asyncio.create_task(self._fill_whole_list(direction, user_id, seen))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fill_whole_list(self, direction: Direction, user_id: int, seen: str) -> None:
        try:
            counts = (await self.get_counts([user_id]))[user_id]
            size = counts.followers if direction is Direction.FOLLOWERS else counts.following
            if size > self.cache.list_limit:
                return
            await self.cache.fill_list(direction, user_id, seen, self._walk(direction, user_id))
        except Exception:
            log.exception("list_cache_fill_failed", user_id=user_id, direction=direction.value)
        finally:
            self._filling.discard((direction, user_id))

    async def _walk(self, direction: Direction, user_id: int) -> AsyncIterator[Edge]:
        after: Cursor | None = None
        while True:
            page = await self._store.list_edges(direction, user_id, FILL_PAGE, after)
            for edge in page.entries:
                yield edge
            if not page.has_more or not page.entries:
                return
            after = page.entries[-1]

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        wanted = list(dict.fromkeys(user_ids))
        found = await self.cache.get_counts(wanted)
        missing = [u for u in wanted if u not in found]
        if missing:
            loaded = await self._store.get_counts(missing)
            await asyncio.gather(*(self.cache.set_counts(u, c) for u, c in loaded.items()))
            found.update(loaded)
        return {u: found[u] for u in wanted}

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.cache.close()
        await self._store.close()


async def _iterate(entries: list[Edge]) -> AsyncIterator[Edge]:
    for edge in entries:
        yield edge
