"""Followers of one user whom another follows: ListKnownFollowers and ListMutualFollows.

Both answer "followers of U that V follows" (mutuals are V = U), newest first by when they
followed U, so the cursor is a position in U's followers list whichever side is iterated:

* the viewer's followees are the smaller side (by the counters) and at most
  ``intersection_candidate_limit``: load them (giving up past the limit, should the counters
  lag), look each up in U's followers in batches of 100 keys, sort, cut the page;
* otherwise walk U's followers from the cursor in batches and look each batch up in V's
  followees, until the page is full or the list ends.

Neither path holds more than ``intersection_candidate_limit`` IDs or one batch in memory, and
a page that is not the last is never empty. The cost of a page is one pass over the smaller
side, except past the limit, where it is a walk of U's followers until the page fills.
"""

from __future__ import annotations

from graph_service.domain.ids import require_id
from graph_service.domain.models import Cursor, Direction, Edge, EdgePage
from graph_service.domain.ports import IntersectionReads
from graph_service.rules.paging import Page, Pager, no_entries
from graph_service.rules.presence import Presence

__all__ = ["Intersections", "KnownFollowers"]

SCAN_BATCH = 500
LOAD_PAGE = 1000


class Intersections:
    def __init__(self, store: IntersectionReads, candidate_limit: int) -> None:
        self._store = store
        self._candidate_limit = candidate_limit

    async def known_followers(self, user_id: int, viewer_id: int, limit: int, after: Cursor | None) -> EdgePage:
        counts = await self._store.get_counts([user_id, viewer_id])
        followers, followees = counts[user_id].followers, counts[viewer_id].following
        if followees < followers and followees <= self._candidate_limit:
            page = await self._from_followees(user_id, viewer_id, limit, after)
            if page is not None:
                return page
        return await self._from_followers(user_id, viewer_id, limit, after)

    async def _from_followers(self, user_id: int, viewer_id: int, limit: int, after: Cursor | None) -> EdgePage:
        matches: list[Edge] = []
        cursor = after
        while len(matches) <= limit:
            page = await self._store.list_edges(Direction.FOLLOWERS, user_id, SCAN_BATCH, cursor)
            if not page.entries:
                break
            known = await self._store.find_edges(Direction.FOLLOWING, viewer_id, [e.user_id for e in page.entries])
            matches.extend(e for e in page.entries if e.user_id in known)
            if not page.has_more:
                break
            cursor = page.entries[-1]
        return EdgePage(entries=matches[:limit], has_more=len(matches) > limit)

    async def _from_followees(self, user_id: int, viewer_id: int, limit: int, after: Cursor | None) -> EdgePage | None:
        """None if the viewer follows more than the candidate limit after all (the counts lag)."""
        candidates: list[int] = []
        cursor: Cursor | None = None
        while True:
            page = await self._store.list_edges(Direction.FOLLOWING, viewer_id, LOAD_PAGE, cursor)
            candidates.extend(e.user_id for e in page.entries)
            if len(candidates) > self._candidate_limit:
                return None
            if not page.has_more or not page.entries:
                break
            cursor = page.entries[-1]
        found = await self._store.find_edges(Direction.FOLLOWERS, user_id, candidates)
        entries = sorted((Edge(c, at) for c, at in found.items()), key=lambda e: e.position, reverse=True)
        if after is not None:
            entries = [e for e in entries if e.position < after.position]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)


class KnownFollowers:
    """The two RPCs over ``Intersections``, paged."""

    def __init__(self, intersections: Intersections, pager: Pager, presence: Presence) -> None:
        self._intersections = intersections
        self._pager = pager
        self._presence = presence

    async def list_known_followers(self, viewer_id: int, user_id: int, page_size: int, page_token: str) -> Page[Edge]:
        require_id(viewer_id, "viewer_id")
        require_id(user_id, "user_id")
        return await self._page(f"known:{viewer_id}:{user_id}", viewer_id, user_id, page_size, page_token)

    async def list_mutual_follows(self, user_id: int, page_size: int, page_token: str) -> Page[Edge]:
        """The followers of ``user_id`` that it follows back: its known followers as seen by itself."""
        require_id(user_id, "user_id")
        return await self._page(f"mutual:{user_id}", user_id, user_id, page_size, page_token)

    async def _page(self, scope: str, viewer_id: int, user_id: int, page_size: int, page_token: str) -> Page[Edge]:
        if await self._presence.absent([viewer_id, user_id]):
            return await self._pager.page(scope, page_size, page_token, no_entries)
        return await self._pager.page(
            scope, page_size, page_token, lambda n, a: self._intersections.known_followers(user_id, viewer_id, n, a)
        )
