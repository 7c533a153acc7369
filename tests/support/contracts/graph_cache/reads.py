"""The graph cache's contract of ``GraphCacheReads``: misses, fills guarded by epochs, and what is read back."""

from __future__ import annotations

from graph_service.domain.models import Edge, EdgePage, Relationship
from graph_service.domain.ports import GraphCacheReads
from tests.support.contracts.graph_cache.harness import (
    FOLLOWING,
    LIST_LIMIT,
    GraphCacheUnderTest,
    cached_relationship,
    epoch,
    fill_private,
    iterate,
    users,
)

__all__ = ["GraphCacheReadsContract"]


class GraphCacheReadsContract:
    async def test_a_follow_state_is_a_miss_until_filled_under_the_current_epoch(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A follow state is a miss until filled under the follower's epoch, then read back as filled, for
        that direction of the pair only."""
        reads = graph_cache.reads
        a, b, c = users(3)
        assert await reads.get_follow_state(a, b) is None
        seen = await epoch(reads, a)
        await reads.fill_follow_state(a, b, True, seen)
        assert await epoch(reads, a) == seen  # reading the epoch does not move it
        await reads.fill_follow_state(a, c, False, seen)
        assert await reads.get_follow_state(a, b) is True
        assert await reads.get_follow_state(a, c) is False
        assert await reads.get_follow_state(b, a) is None

    async def test_a_whole_list_of_list_limit_entries_is_kept(self, graph_cache: GraphCacheUnderTest) -> None:
        """``fill_list`` keeps a list of exactly ``list_limit`` entries, says so, and the list is read back whole."""
        reads = graph_cache.reads
        assert reads.list_limit == LIST_LIMIT
        a, *others = users(1 + LIST_LIMIT)
        entries = [Edge(other, 100 * n) for n, other in enumerate(others, 1)]
        assert await reads.fill_list(FOLLOWING, a, await epoch(reads, a), iterate(entries))
        assert await reads.read_list(FOLLOWING, a, LIST_LIMIT, None) == EdgePage(entries[::-1], has_more=False)

    async def test_a_list_longer_than_list_limit_is_not_kept(self, graph_cache: GraphCacheUnderTest) -> None:
        """``fill_list`` refuses a list of more than ``list_limit`` entries, which stays a miss."""
        reads = graph_cache.reads
        a, *others = users(2 + LIST_LIMIT)
        entries = [Edge(other, 100 * n) for n, other in enumerate(others, 1)]
        assert not await reads.fill_list(FOLLOWING, a, await epoch(reads, a), iterate(entries))
        assert await reads.read_list(FOLLOWING, a, 10, None) is None

    async def test_relationships_are_a_miss_until_filled_under_the_actor_epoch(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """``read_relationships`` returns the cached entries and an epoch that a fill of the others is kept under."""
        reads = graph_cache.reads
        a, b, c, d = users(4)
        found, seen = await reads.read_relationships(a, [b, c])
        assert found == {}
        assert seen is not None
        await reads.fill_relationships(a, {b: Relationship(following=True, requested_by=True), c: Relationship()}, seen)
        found, seen = await reads.read_relationships(a, [b, c, d])
        assert found == {b: Relationship(following=True, requested_by=True), c: Relationship()}
        assert seen is not None  # to fill d
        assert await cached_relationship(reads, b, a) is None  # the other user's side is its own entry

    async def test_a_relationship_is_read_back_with_its_mute(self, graph_cache: GraphCacheUnderTest) -> None:
        """The mute's end and notifications flag come back as filled, ended or not (the rules apply ``as_of``)."""
        reads = graph_cache.reads
        a, b, c, d = users(4)
        filled = {
            b: Relationship(following=True, mute_expires_us=0, muting_notifications=True),
            c: Relationship(mute_expires_us=1_700_000_000_000_000),
            d: Relationship(blocked_by=True),
        }
        await reads.fill_relationships(a, filled, await epoch(reads, a))
        found, _ = await reads.read_relationships(a, [b, c, d])
        assert found == filled

    async def test_a_privacy_flag_is_a_miss_until_filled_under_the_privacy_epoch(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """A privacy flag is a miss until filled under the user's privacy epoch, then read back as filled."""
        reads = graph_cache.reads
        a, b = users(2)
        assert await reads.get_private(a) is None
        await fill_private(reads, a, True)
        await fill_private(reads, b, False)
        assert await reads.get_private(a) is True

    async def test_a_follow_moves_the_epoch_but_not_the_privacy_epoch(self, graph_cache: GraphCacheUnderTest) -> None:
        """A follow moves the user's epoch but not its privacy epoch, so a privacy flag read across it is kept."""
        reads = graph_cache.reads
        writes = graph_cache.invalidations
        a, b = users(2)
        seen, private_seen = await epoch(reads, a), await reads.privacy_epoch(a)
        assert private_seen is not None
        assert await writes.write_edge(b, a, 1000, True)
        assert await reads.epoch(a) != seen
        assert await reads.privacy_epoch(a) == private_seen
        await reads.fill_private(a, True, private_seen)
        assert await reads.get_private(a) is True

    async def test_a_cache_that_cannot_be_reached_serves_nothing_and_keeps_no_fill(
        self, graph_cache: GraphCacheUnderTest
    ) -> None:
        """With Redis unreachable there is no epoch to fill under, every read misses and every fill is dropped."""
        reads: GraphCacheReads = graph_cache.unreachable
        a, b = users(2)
        assert await reads.epoch(a) is None
        assert await reads.privacy_epoch(a) is None
        await reads.fill_follow_state(a, b, True, "1")
        await reads.fill_relationships(a, {b: Relationship(following=True)}, "1")
        await reads.fill_private(a, True, "1")
        assert not await reads.fill_list(FOLLOWING, a, "1", iterate([Edge(b, 1000)]))
        assert await reads.get_follow_state(a, b) is None
        assert await reads.read_relationships(a, [b]) == ({}, None)
        assert await reads.get_private(a) is None
        assert await reads.read_list(FOLLOWING, a, 10, None) is None
