"""The graph's Redis cache: every operation is one script or one read in one user's slot.

``GraphCache`` is one object per process with one Redis client: the shared calls and failure rule
(``cache_calls.py``), one part per kind of entry (``key_entries.py``, ``list_entries.py``,
``count_entries.py``) and the write side (``invalidations.py``). Its users are given it by the
narrow role they need (``domain/ports.py``: ``GraphCacheReads``, ``CacheInvalidations``,
``CacheRepairs``, ``CountCache``, ``FollowerCache``, ``SuggestionCache``); only the cache package and
the entry points name this class.
"""

from __future__ import annotations

from graph_service.cache.count_entries import CountEntries
from graph_service.cache.invalidations import Invalidations
from graph_service.cache.key_entries import KeyEntries
from graph_service.cache.list_entries import ListEntries

__all__ = ["GraphCache"]


class GraphCache(Invalidations, KeyEntries, ListEntries, CountEntries):
    """The graph's Redis entries, and the process's lifecycle of them."""

    def start(self) -> None:
        """Open the near cache's invalidation connection (in the background; until it tracks, the
        near cache is bypassed)."""
        if self._near is not None:
            self._near.start()

    async def aclose(self) -> None:
        """Deliver owed invalidations if Redis answers now (one try), then close the client."""
        await self.deliver_owed()
        if self._near is not None:
            await self._near.aclose()
        await self._redis.aclose()
