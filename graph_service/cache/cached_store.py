"""The write-through cache wrapped around an edge store, behind the same ``EdgeStore`` interface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import structlog

from graph_service.cache.graph_cache import GraphCache
from graph_service.models import (
    BlockResult,
    Counts,
    Cursor,
    Direction,
    Edge,
    EdgePage,
    FollowResult,
    FollowState,
    Relationship,
    Removal,
)
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

    async def follow(self, follower_id: int, followee_id: int, *, private: bool = False) -> FollowResult:
        result = await self._store.follow(follower_id, followee_id, private=private)
        if result.state is FollowState.FOLLOWING:
            await self.cache.write_edge(follower_id, followee_id, result.at_us, following=True)
        else:
            await self.cache.touch_pair(follower_id, followee_id)
        return result

    async def unfollow(self, follower_id: int, followee_id: int) -> Removal:
        removal = await self._store.unfollow(follower_id, followee_id)
        await self.cache.write_edge(follower_id, followee_id, removal.edge_at, following=False)
        return removal

    async def accept_request(
        self, user_id: int, requester_id: int, *, while_public: bool = False
    ) -> FollowResult | None:
        result = await self._store.accept_request(user_id, requester_id, while_public=while_public)
        if result is not None:
            await self.cache.write_edge(requester_id, user_id, result.at_us, following=True)
        return result

    async def reject_request(self, user_id: int, requester_id: int) -> int | None:
        requested_at = await self._store.reject_request(user_id, requester_id)
        await self.cache.touch_pair(requester_id, user_id)
        return requested_at

    async def block(self, blocker_id: int, blocked_id: int) -> BlockResult:
        result = await self._store.block(blocker_id, blocked_id)
        for follower, followee, at in result.removed_edges:
            await self.cache.write_edge(follower, followee, at, following=False)
        await self.cache.touch_pair(blocker_id, blocked_id)
        return result

    async def unblock(self, blocker_id: int, blocked_id: int) -> bool:
        lifted = await self._store.unblock(blocker_id, blocked_id)
        await self.cache.touch_pair(blocker_id, blocked_id)
        return lifted

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

    async def is_private(self, user_id: int, *, consistent: bool = False) -> bool:
        if consistent:
            return await self._store.is_private(user_id, consistent=True)
        cached = await self.cache.get_private(user_id)
        if cached is not None:
            return cached
        seen = await self.cache.privacy_epoch(user_id)
        private = await self._store.is_private(user_id)
        if seen is not None:
            await self.cache.fill_private(user_id, private, seen)
        return private

    async def set_private(self, user_id: int, private: bool) -> None:
        await self._store.set_private(user_id, private)
        await self.cache.drop_private(user_id)

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._store.list_requests(user_id, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        return await self._store.find_edges(direction, user_id, others)

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        cached = await self.cache.get_follow_state(follower_id, followee_id)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(follower_id)
        following = await self._store.is_following(follower_id, followee_id)
        if seen is not None:
            await self.cache.fill_follow_state(follower_id, followee_id, following, seen)
        return following

    async def list_edges(
        self, direction: Direction, user_id: int, limit: int, after: Cursor | None, *, warm: bool = True
    ) -> EdgePage:
        cached = await self.cache.read_list(direction, user_id, limit, after)
        if cached is not None:
            return cached
        seen = await self.cache.epoch(user_id) if warm else None
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
