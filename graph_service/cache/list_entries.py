"""The graph cache's whole adjacency lists: a sorted set per list, read a page at a time.

A list is cached whole or not at all (longer than ``list_limit``: never): loaded into a
temporary key, then swapped in by one script only if the owner's epoch did not move meanwhile.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

from graph_service.cache import keys
from graph_service.cache.cache_calls import CacheCalls
from graph_service.domain.models import Cursor, Direction, Edge, EdgePage

__all__ = ["FILL_CHUNK", "SENTINEL", "ListEntries"]

SENTINEL = "!"  # sorts before every "<digits>#<digits>" member; keeps empty lists cached
FILL_CHUNK = 1000


class ListEntries(CacheCalls):
    async def read_list(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage | None:
        """A page from a cached whole list, or None on a miss."""
        if not self.trusted:
            self._count("lists", 0, 1)
            return None
        key = keys.list_key(direction, user_id)
        if after is None:  # first pages only: the near cache keeps them by page size
            near = await self._near_values("lists", [key], limit)
            if near is not None:
                self._count("lists", 1, 0)
                return near[0]  # type: ignore[return-value]  # what put() kept under (key, limit)
        stamp = self._near.stamp(key) if self._near is not None and after is None else None
        start = "+" if after is None else f"({after.position}"
        ok, replies = await self._try(
            lambda: self._read(
                lambda pipe: pipe.zrange(
                    keys.list_key(direction, user_id),
                    start,
                    f"[{SENTINEL}",
                    desc=True,
                    bylex=True,
                    offset=0,
                    num=limit + 1,
                )
            )
        )
        members: list[str] | None = replies[0] if ok and replies is not None else None  # type: ignore[assignment]  # ZRANGE's reply
        if not members:
            self._count("lists", 0, 1)
            return None
        self._count("lists", 1, 0)
        entries = [Edge.from_position(str(m)) for m in members if m != SENTINEL]
        page = EdgePage(entries=entries[:limit], has_more=len(entries) > limit)
        if self._near is not None and stamp is not None:
            self._near.put(key, page, stamp, limit)
        return page

    async def fill_list(self, direction: Direction, user_id: int, seen: str, entries: AsyncIterator[Edge]) -> bool:
        """Load a whole list into a temporary key, then swap it in only if no write came between."""
        tmp = keys.list_tmp(direction, user_id, secrets.token_hex(4))
        batch: list[str] = [SENTINEL]
        count = 0
        try:
            async for edge in entries:
                batch.append(edge.position)
                count += 1
                if count > self._list_limit:
                    return False  # too long to cache whole; the finally drops what was loaded
                if len(batch) >= FILL_CHUNK:
                    if not await self._add_members(tmp, batch):
                        return False
                    batch = []
            if batch and not await self._add_members(tmp, batch):
                return False
            ok, done = await self._try(
                lambda: self._commit_list(
                    keys=[keys.epoch(user_id), tmp, keys.list_key(direction, user_id)], args=[seen, self._ttl]
                )
            )
            return bool(ok and done)
        finally:
            if count > self._list_limit:
                await self._try(lambda: self._redis.delete(tmp))

    async def _add_members(self, tmp: str, members: list[str]) -> bool:
        async def add() -> None:
            await self._redis.zadd(tmp, dict.fromkeys(members, 0))
            await self._redis.expire(tmp, 300)

        ok, _ = await self._try(add)
        return ok
