"""The graph cache's contract of ``ListCache``: pages of cached whole lists."""

from __future__ import annotations

from graph_service.domain.models import Edge, EdgePage
from graph_service.domain.ports import ListCache
from tests.support.contracts.graph_cache.harness import (
    FOLLOWERS,
    FOLLOWING,
    GraphCacheUnderTest,
    fill_list,
    listed,
    users,
)

__all__ = ["ListCacheContract"]


class ListCacheContract:
    """Lists are put in the cache by the read role (``GraphCacheReads.fill_list``), as the read-through does."""

    async def test_a_list_never_filled_is_a_miss(self, graph_cache: GraphCacheUnderTest) -> None:
        """Either list of a user is a miss until it is filled."""
        lists = graph_cache.lists
        (a,) = users(1)
        assert await lists.read_list(FOLLOWERS, a, 10, None) is None
        assert await lists.read_list(FOLLOWING, a, 10, None) is None

    async def test_a_cached_empty_list_is_a_hit(self, graph_cache: GraphCacheUnderTest) -> None:
        """An empty list filled whole is read as a page with no entries and nothing more."""
        lists = graph_cache.lists
        (a,) = users(1)
        await fill_list(graph_cache.reads, FOLLOWERS, a)
        assert await lists.read_list(FOLLOWERS, a, 10, None) == EdgePage(entries=[], has_more=False)

    async def test_pages_are_newest_first_and_strictly_after_the_cursor(self, graph_cache: GraphCacheUnderTest) -> None:
        """A page holds the newest entries older than the cursor (at one time, the higher user ID first)
        and says whether more follow."""
        lists = graph_cache.lists
        a, w, x, y, z = users(5)
        await fill_list(graph_cache.reads, FOLLOWERS, a, Edge(w, 100), Edge(x, 300), Edge(y, 200), Edge(z, 200))
        assert await lists.read_list(FOLLOWERS, a, 2, None) == EdgePage(
            entries=[Edge(x, 300), Edge(z, 200)], has_more=True
        )
        assert await lists.read_list(FOLLOWERS, a, 2, Edge(z, 200)) == EdgePage(
            entries=[Edge(y, 200), Edge(w, 100)], has_more=False
        )
        assert await lists.read_list(FOLLOWERS, a, 2, Edge(w, 100)) == EdgePage(entries=[], has_more=False)
        between = Edge(a, 250)  # a cursor that is no entry of the list
        assert await lists.read_list(FOLLOWERS, a, 2, between) == EdgePage(
            entries=[Edge(z, 200), Edge(y, 200)], has_more=True
        )
        assert await lists.read_list(FOLLOWERS, a, 3, between) == EdgePage(
            entries=[Edge(z, 200), Edge(y, 200), Edge(w, 100)], has_more=False
        )

    async def test_a_list_is_served_for_its_user_and_direction_only(self, graph_cache: GraphCacheUnderTest) -> None:
        """A filled list is read back for its user and direction, and the user's other list stays a miss."""
        lists = graph_cache.lists
        a, b = users(2)
        await fill_list(graph_cache.reads, FOLLOWERS, a, Edge(b, 100))
        assert await listed(lists, FOLLOWERS, a) == [Edge(b, 100)]
        assert await lists.read_list(FOLLOWING, a, 10, None) is None
        assert await lists.read_list(FOLLOWERS, b, 10, None) is None

    async def test_a_cache_that_cannot_be_reached_serves_no_list(self, graph_cache: GraphCacheUnderTest) -> None:
        """With Redis unreachable a list read is a miss."""
        lists: ListCache = graph_cache.unreachable
        (a,) = users(1)
        assert await lists.read_list(FOLLOWERS, a, 10, None) is None
