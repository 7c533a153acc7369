"""The graph cache's contract of ``CountCache``: counts kept by version."""

from __future__ import annotations

from graph_service.domain.models import Counts
from graph_service.domain.ports import CountCache
from tests.support.contracts.graph_cache.harness import (
    GraphCacheUnderTest,
    users,
)

__all__ = ["CountCacheContract"]


class CountCacheContract:
    async def test_counts_never_cached_are_left_out(self, graph_cache: GraphCacheUnderTest) -> None:
        """A user whose counts were never cached is not in the answer."""
        counts = graph_cache.counts
        (a,) = users(1)
        assert await counts.get_counts([a]) == {}
        assert await counts.get_counts([]) == {}

    async def test_cached_counts_are_read_back_for_their_user_only(self, graph_cache: GraphCacheUnderTest) -> None:
        """Counts set for one user are read back for that user, and for no other."""
        counts = graph_cache.counts
        a, b = users(2)
        assert await counts.set_counts(a, Counts(followers=7, following=3, version=2))
        assert await counts.get_counts([a, b]) == {a: Counts(followers=7, following=3, version=2)}

    async def test_counts_are_kept_unless_a_version_as_new_is_cached(self, graph_cache: GraphCacheUnderTest) -> None:
        """Counts of an older or the same version are refused (True: nothing owed), a newer version replaces them."""
        counts = graph_cache.counts
        (a,) = users(1)
        assert await counts.set_counts(a, Counts(followers=7, following=3, version=5))
        assert await counts.set_counts(a, Counts(followers=1, following=1, version=4))
        assert await counts.set_counts(a, Counts(followers=2, following=2, version=5))
        assert await counts.get_counts([a]) == {a: Counts(followers=7, following=3, version=5)}
        assert await counts.set_counts(a, Counts(followers=8, following=3, version=6))
        assert await counts.get_counts([a]) == {a: Counts(followers=8, following=3, version=6)}

    async def test_a_cache_that_cannot_be_reached_serves_and_keeps_no_counts(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """With Redis unreachable no user's counts are served and setting them returns False."""
        counts: CountCache = graph_cache.unreachable
        (a,) = users(1)
        assert await counts.set_counts(a, Counts(followers=1, following=1, version=1)) is False
        assert await counts.get_counts([a]) == {}
