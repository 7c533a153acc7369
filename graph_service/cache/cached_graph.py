"""The graph cache wrapped around the graph store's reads, behind the same role interfaces.

``CachedGraphReads`` is ``GraphReads`` and ``RelationshipReads``: reads try Redis first and fill it
on a miss, guarded by epochs. The write side is written through by the service layer's
``GraphChanges`` notices (``cache/write_through.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import structlog

from graph_service.domain.models import Counts, Cursor, Direction, Edge, EdgePage, Relationship
from graph_service.domain.ports import CacheableReads, GraphCacheReads

__all__ = ["CachedGraphReads"]

log = structlog.get_logger(__name__)
FILL_PAGE = 1000


class CachedGraphReads:
    """Reads try Redis first; a miss reads the store and fills Redis, guarded by the user's epoch
    so that a fill that raced a write refuses itself.

    ``fill_lists=False`` (``cold()``): bulk readers (suggestions) read cached lists but never start
    filling a whole list into Redis for a page they read once.
    """

    def __init__(self, store: CacheableReads, cache: GraphCacheReads, *, fill_lists: bool = True) -> None:
        self._store = store
        self.cache = cache
        self._fill_lists = fill_lists
        self._filling: set[tuple[Direction, int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def cold(self) -> CachedGraphReads:
        """The same reads, without whole-list fills."""
        return CachedGraphReads(self._store, self.cache, fill_lists=False)

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        cached = await self.cache.get_follow_state(follower_id, followee_id)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(follower_id)
        following = await self._store.is_following(follower_id, followee_id)
        if seen is not None:
            await self.cache.fill_follow_state(follower_id, followee_id, following, seen)
        return following

    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        wanted = list(dict.fromkeys(target_ids))
        found, seen = await self.cache.read_relationships(actor_id, wanted)
        missing = [t for t in wanted if t not in found]
        if missing:
            loaded = await self._store.relationships(actor_id, missing)
            if seen is not None:
                await self.cache.fill_relationships(actor_id, loaded, seen)
            found.update(loaded)
        return {t: found[t] for t in wanted}

    async def is_private(self, user_id: int) -> bool:
        cached = await self.cache.get_private(user_id)
        if cached is not None:
            return cached
        seen = await self.cache.privacy_epoch(user_id)
        private = await self._store.is_private(user_id)
        if seen is not None:
            await self.cache.fill_private(user_id, private, seen)
        return private

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._store.list_requests(user_id, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        return await self._store.find_edges(direction, user_id, others)

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        cached = await self.cache.read_list(direction, user_id, limit, after)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(user_id) if self._fill_lists else None
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

    async def aclose(self) -> None:
        """Cancel the whole-list fills still running (the cache itself is closed by its owner)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _iterate(entries: list[Edge]) -> AsyncIterator[Edge]:
    for edge in entries:
        yield edge
