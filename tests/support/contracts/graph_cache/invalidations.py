"""The graph cache's contract of ``CacheInvalidations``: what a committed write changes in the cache."""

from __future__ import annotations

from graph_service.domain.models import Edge, Relationship
from graph_service.domain.ports import CacheInvalidations
from tests.support.contracts.graph_cache.harness import (
    FOLLOWERS,
    FOLLOWING,
    LIST_LIMIT,
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

__all__ = ["CacheInvalidationsContract"]


class CacheInvalidationsContract:
    async def test_a_follow_drops_its_state_and_joins_the_cached_lists(self, graph_cache: GraphCacheUnderTest) -> None:
        """After a follow is written through its state is a miss and each cached list of the pair holds it."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b, c = users(3)
        await fill_state(reads, a, b, False)
        await fill_list(reads, FOLLOWING, a, Edge(c, 100))
        await fill_list(reads, FOLLOWERS, b)
        assert await writes.write_edge(a, b, 500, True)
        assert await reads.get_follow_state(a, b) is None
        assert await listed(reads, FOLLOWING, a) == [Edge(b, 500), Edge(c, 100)]
        assert await listed(reads, FOLLOWERS, b) == [Edge(a, 500)]

    async def test_an_unfollow_leaves_the_cached_lists_even_if_its_follow_arrives_late(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """After an unfollow is written through its entry is out of each cached list, and the follow of that
        edge written through late does not put it back: it drops the lists (it may as well be a
        restore of the edge with its own time, SPEC §3b, which only the store can tell), so the next
        read refills them from the store."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b, c = users(3)
        await fill_state(reads, a, b, True)
        await fill_list(reads, FOLLOWING, a, Edge(b, 500))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500), Edge(c, 100))
        assert await writes.write_edge(a, b, 500, False)
        assert await reads.get_follow_state(a, b) is None
        assert await listed(reads, FOLLOWING, a) == []
        assert await listed(reads, FOLLOWERS, b) == [Edge(c, 100)]
        assert await writes.write_edge(a, b, 500, True)
        assert await listed(reads, FOLLOWING, a) is None
        assert await listed(reads, FOLLOWERS, b) is None

    async def test_an_unfollow_that_found_no_edge_drops_only_the_follow_state(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """An unfollow that found no edge (``at_us`` None) drops the follow state and leaves the lists as they were."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b, c = users(3)
        await fill_state(reads, a, b, False)
        await fill_list(reads, FOLLOWING, a, Edge(c, 100))
        await fill_list(reads, FOLLOWERS, b)
        assert await writes.write_edge(a, b, None, False)
        assert await reads.get_follow_state(a, b) is None
        assert await listed(reads, FOLLOWING, a) == [Edge(c, 100)]
        assert await listed(reads, FOLLOWERS, b) == []

    async def test_a_follow_that_takes_a_cached_list_past_list_limit_drops_it(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A follow written through that would make a cached list longer than ``list_limit`` drops the list."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b, *others = users(2 + LIST_LIMIT)
        await fill_list(reads, FOLLOWERS, b, *(Edge(other, 100 * n) for n, other in enumerate(others, 1)))
        assert await writes.write_edge(a, b, 10_000, True)
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None

    async def test_a_write_through_refuses_the_fills_computed_before_it(self, graph_cache: GraphCacheUnderTest) -> None:
        """Fills guarded by epochs read before a follow was written through are refused in both users'
        slots, and fills guarded by later ones are kept."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b = users(2)
        seen_a, seen_b = await epoch(reads, a), await epoch(reads, b)
        assert await writes.write_edge(a, b, 500, True)
        await reads.fill_follow_state(a, b, False, seen_a)
        await reads.fill_relationships(b, {a: Relationship()}, seen_b)
        assert not await reads.fill_list(FOLLOWERS, b, seen_b, iterate([]))
        assert await reads.get_follow_state(a, b) is None
        assert await cached_relationship(reads, b, a) is None
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None
        await fill_state(reads, a, b, True)
        await fill_relationship(reads, b, a, Relationship(followed_by=True))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500))

    async def test_a_touched_pair_drops_both_relationships_and_refuses_fills_before_it(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """After a request or block change is written through both users' entries of the pair are misses,
        and fills computed before it are refused."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b = users(2)
        await fill_relationship(reads, a, b, Relationship())
        await fill_relationship(reads, b, a, Relationship())
        seen_a, seen_b = await epoch(reads, a), await epoch(reads, b)
        assert await writes.touch_pair(a, b)
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) is None
        await reads.fill_relationships(a, {b: Relationship()}, seen_a)
        await reads.fill_relationships(b, {a: Relationship()}, seen_b)
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) is None
        await fill_relationship(reads, a, b, Relationship(requested=True))

    async def test_a_mute_change_drops_the_muters_entry_only_and_refuses_its_fills_before_it(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """After a mute or unmute is written through, the muter's entry of the pair is a miss and a fill
        of it computed before is refused; the muted account's slot is left alone (its epoch included)."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b = users(2)
        await fill_relationship(reads, a, b, Relationship(following=True))
        await fill_relationship(reads, b, a, Relationship(followed_by=True))
        seen_a, seen_b = await epoch(reads, a), await epoch(reads, b)
        assert await writes.drop_mute(a, b)
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) == Relationship(followed_by=True)
        assert await epoch(reads, b) == seen_b
        await reads.fill_relationships(a, {b: Relationship(following=True)}, seen_a)
        assert await cached_relationship(reads, a, b) is None
        muted = Relationship(following=True, mute_expires_us=0)
        await fill_relationship(reads, a, b, muted)

    async def test_a_privacy_change_drops_the_flag_and_refuses_a_fill_before_it(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """After a privacy change is written through the flag is a miss, and a fill computed before it is refused."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        (a,) = users(1)
        await fill_private(reads, a, False)
        seen = await reads.privacy_epoch(a)
        assert seen is not None
        assert await writes.drop_private(a)
        assert await reads.get_private(a) is None
        await reads.fill_private(a, False, seen)
        assert await reads.get_private(a) is None
        await fill_private(reads, a, True)

    async def test_an_invalidated_pair_serves_nothing_a_change_between_them_may_have_made_stale(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """``invalidate_edge`` drops the follow state, both users' lists and their entries of the pair, and
        refuses fills computed before it."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        a, b = users(2)
        await fill_state(reads, a, b, True)
        await fill_list(reads, FOLLOWING, a, Edge(b, 500))
        await fill_list(reads, FOLLOWERS, b, Edge(a, 500))
        await fill_relationship(reads, a, b, Relationship(following=True))
        await fill_relationship(reads, b, a, Relationship(followed_by=True))
        seen_a, seen_b = await epoch(reads, a), await epoch(reads, b)
        assert await writes.invalidate_edge(a, b)
        assert await reads.get_follow_state(a, b) is None
        assert await reads.read_list(FOLLOWING, a, 10, None) is None
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None
        assert await cached_relationship(reads, a, b) is None
        assert await cached_relationship(reads, b, a) is None
        await reads.fill_follow_state(a, b, True, seen_a)
        assert not await reads.fill_list(FOLLOWERS, b, seen_b, iterate([Edge(a, 500)]))
        assert await reads.get_follow_state(a, b) is None
        assert await reads.read_list(FOLLOWERS, b, 10, None) is None

    async def test_invalidating_a_user_with_itself_drops_its_privacy_flag(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """``invalidate_edge(u, u)`` drops u's privacy flag and refuses a fill computed before it."""
        reads, writes = graph_cache.reads, graph_cache.invalidations
        (a,) = users(1)
        await fill_private(reads, a, True)
        seen = await reads.privacy_epoch(a)
        assert seen is not None
        assert await writes.invalidate_edge(a, a, essential=True)
        assert await reads.get_private(a) is None
        await reads.fill_private(a, True, seen)
        assert await reads.get_private(a) is None

    async def test_a_cache_that_cannot_be_reached_takes_no_write(self, graph_cache: GraphCacheUnderTest) -> None:
        """With Redis unreachable every write-through and invalidation returns False."""
        writes: CacheInvalidations = graph_cache.unreachable
        a, b = users(2)
        assert await writes.write_edge(a, b, 1000, True) is False
        assert await writes.write_edge(a, b, None, False) is False
        assert await writes.touch_pair(a, b) is False
        assert await writes.drop_private(a) is False
        assert await writes.drop_mute(a, b) is False
        assert await writes.invalidate_edge(a, b) is False
        assert await writes.invalidate_edge(a, b, essential=True) is False
        assert await writes.invalidate_edge(a, a, essential=True) is False
