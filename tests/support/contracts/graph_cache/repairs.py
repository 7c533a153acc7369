"""The graph cache's contract of ``CacheRepairs``: what the counters consumer's repairs change in the cache."""

from __future__ import annotations

from graph_service.domain.models import Counts, Edge, Relationship
from graph_service.domain.ports import CacheRepairs
from tests.support.contracts.graph_cache.harness import (
    FOLLOWERS,
    FOLLOWING,
    GraphCacheUnderTest,
    cached_relationship,
    epoch,
    fill_list,
    fill_private,
    fill_relationship,
    fill_state,
    iterate,
    listed,
    users,
)

__all__ = ["CacheRepairsContract"]


class CacheRepairsContract:
    async def test_a_repaired_follow_drops_each_cached_list_without_it(self, graph_cache: GraphCacheUnderTest) -> None:
        """A repair of a follow drops each cached list of the pair that lacks its entry."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        a, b, c = users(3)
        await fill_list(reads, FOLLOWING, a)
        await fill_list(reads, FOLLOWERS, b, Edge(c, 100))
        assert await repairs.repair_edge(a, b, 500, True)
        assert await reads.read_list(FOLLOWING, a, 10, None) is None
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None

    async def test_a_repaired_follow_keeps_what_agrees_with_it(self, graph_cache: GraphCacheUnderTest) -> None:
        """A repair of a follow keeps the follow state and the cached lists that already hold it."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        a, b, c = users(3)
        await fill_state(reads, a, b, True)
        await fill_list(reads, FOLLOWING, a, Edge(b, 500))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500), Edge(c, 100))
        assert await repairs.repair_edge(a, b, 500, True)
        assert await reads.get_follow_state(a, b) is True
        assert await listed(reads, FOLLOWING, a) == [Edge(b, 500)]
        assert await listed(reads, FOLLOWERS, b) == [Edge(a, 500), Edge(c, 100)]

    async def test_a_repaired_unfollow_drops_the_lists_that_hold_it_and_a_state_that_disagrees(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A repair of an unfollow drops each cached list that still holds its entry (a late record may
        name a member a restore put back since: the store decides at the next read) and a state saying
        following; a list that agrees stays."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        a, b, c = users(3)
        await fill_state(reads, a, b, True)
        await fill_list(reads, FOLLOWING, a, Edge(b, 500), Edge(c, 100))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500))
        await fill_list(reads, FOLLOWERS, c, Edge(a, 100))
        assert await repairs.repair_edge(a, b, 500, False)
        assert await reads.get_follow_state(a, b) is None
        assert await listed(reads, FOLLOWING, a) is None
        assert await listed(reads, FOLLOWERS, b) is None
        assert await repairs.repair_edge(b, c, 700, False)  # no list holds it: they stay
        assert await listed(reads, FOLLOWERS, c) == [Edge(a, 100)]

    async def test_a_late_repair_of_a_follow_undone_since_never_puts_it_back(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A repair of a follow whose unfollow was written through since never shows its entry again: it
        drops the lists (a restore puts an edge back with its own time, so a made edge missing from a
        cached list is always a reason to read the store again)."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        writes = graph_cache.invalidations
        a, b = users(2)
        await fill_list(reads, FOLLOWING, a, Edge(b, 500))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500))
        assert await writes.write_edge(a, b, 500, False)
        assert await repairs.repair_edge(a, b, 500, True)
        assert await listed(reads, FOLLOWING, a) is None
        assert await listed(reads, FOLLOWERS, b) is None

    async def test_a_repair_drops_the_pair_and_refuses_fills_computed_before_it(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A repair drops both users' entries of the pair and refuses fills guarded by epochs read before it."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        a, b = users(2)
        await fill_relationship(reads, a, b, Relationship())
        await fill_relationship(reads, b, a, Relationship())
        seen_a, seen_b = await epoch(reads, a), await epoch(reads, b)
        assert await repairs.repair_edge(a, b, 500, True)
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) is None
        await reads.fill_follow_state(a, b, False, seen_a)
        await reads.fill_relationships(b, {a: Relationship()}, seen_b)
        assert not await reads.fill_list(FOLLOWERS, b, seen_b, iterate([]))
        assert await reads.get_follow_state(a, b) is None
        assert await cached_relationship(reads, b, a) is None
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None

    async def test_pair_and_privacy_drops_that_are_not_essential_still_drop(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """``touch_pair`` and ``drop_private`` with ``essential=False`` drop the pair's relationships and the flag."""
        reads, repairs = graph_cache.reads, graph_cache.repairs
        a, b = users(2)
        await fill_relationship(reads, a, b, Relationship(requested=True))
        await fill_relationship(reads, b, a, Relationship(requested_by=True))
        await fill_private(reads, b, True)
        assert await repairs.touch_pair(a, b, essential=False)
        assert await repairs.drop_private(b, essential=False)
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) is None
        assert await reads.get_private(b) is None

    async def test_a_cache_that_cannot_be_reached_takes_no_repair(self, graph_cache: GraphCacheUnderTest) -> None:
        """With Redis unreachable every repair returns False."""
        repairs: CacheRepairs = graph_cache.unreachable
        a, b = users(2)
        assert await repairs.repair_edge(a, b, 500, True) is False
        assert await repairs.touch_pair(a, b, essential=False) is False
        assert await repairs.drop_private(a, essential=False) is False
        assert await repairs.set_counts(a, Counts(followers=1, following=0, version=1)) is False
