"""What every implementation of the graph's roles must do: ``GraphWrites``, ``GraphReads``,
``RelationshipReads`` and ``FollowerSource``.

``GraphContract`` is run against the in-memory fake (``tests/unit/fakes``), DynamoDB Local
(``tests/integration/store``) and the Redis-cached wrappers over DynamoDB Local
(``tests/integration/cache``): a subclass provides the ``graph`` fixture. Every test takes fresh
user IDs from ``users``, so implementations may share tables between tests.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from graph_service.domain.models import AcceptOutcome, Counts, Direction, Edge, Made, PairState, Relationship
from graph_service.domain.ports import FollowerSource, GraphChanges, GraphReads, GraphWrites, RelationshipReads

__all__ = ["GraphContract", "GraphUnderTest", "NotifyingWrites", "Users"]

Users = Callable[[int], list[int]]


@dataclass
class GraphUnderTest:
    writes: GraphWrites
    reads: GraphReads
    relationships: RelationshipReads
    followers: FollowerSource
    set_counts: Callable[[int, Counts], Awaitable[None]]
    """Put counters as the counters consumer would (into the store, and into the cache if there is one)."""


class NotifyingWrites:
    """``GraphWrites`` that, after each write that commits, tells ``GraphChanges`` what it settled,
    as the service layer does: for a cached graph under test, reads after writes are then exact."""

    def __init__(self, store: GraphWrites, changes: GraphChanges) -> None:
        self._store = store
        self._changes = changes

    async def pair(self, actor_id: int, target_id: int) -> PairState:
        return await self._store.pair(actor_id, target_id)

    async def request_at(self, user_id: int, requester_id: int) -> int | None:
        return await self._store.request_at(user_id, requester_id)

    async def edge_at(self, follower_id: int, followee_id: int) -> int | None:
        return await self._store.edge_at(follower_id, followee_id)

    async def is_private_now(self, user_id: int) -> bool:
        return await self._store.is_private_now(user_id)

    async def add_edge(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        made = await self._store.add_edge(follower_id, followee_id, at_us, cap=cap)
        if made is Made.CREATED:
            await self._changes.follow_settled(follower_id, followee_id, at_us, following=True)
        return made

    async def add_request(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        made = await self._store.add_request(follower_id, followee_id, at_us, cap=cap)
        if made is Made.CREATED:
            await self._changes.pair_settled(follower_id, followee_id)
        return made

    async def accept(
        self, user_id: int, requester_id: int, requested_at: int, at_us: int, *, while_public: bool
    ) -> AcceptOutcome:
        outcome = await self._store.accept(user_id, requester_id, requested_at, at_us, while_public=while_public)
        if outcome is AcceptOutcome.ACCEPTED:
            await self._changes.follow_settled(requester_id, user_id, at_us, following=True)
        return outcome

    async def remove(self, follower_id: int, followee_id: int, *, edge_at: int | None, request_at: int | None) -> bool:
        removed = await self._store.remove(follower_id, followee_id, edge_at=edge_at, request_at=request_at)
        if removed:
            await self._changes.follow_settled(follower_id, followee_id, edge_at, following=False)
        return removed

    async def add_block(self, blocker_id: int, blocked_id: int, at_us: int, pair: PairState) -> bool:
        made = await self._store.add_block(blocker_id, blocked_id, at_us, pair)
        if made:
            for follower, followee, edge_at in (
                (blocker_id, blocked_id, pair.following),
                (blocked_id, blocker_id, pair.followed_by),
            ):
                if edge_at is not None:
                    await self._changes.follow_settled(follower, followee, edge_at, following=False)
            await self._changes.pair_settled(blocker_id, blocked_id)
        return made

    async def remove_block(self, blocker_id: int, blocked_id: int) -> bool:
        lifted = await self._store.remove_block(blocker_id, blocked_id)
        await self._changes.pair_settled(blocker_id, blocked_id)
        return lifted

    async def set_private(self, user_id: int, private: bool) -> None:
        await self._store.set_private(user_id, private)
        await self._changes.settings_settled(user_id)


class GraphContract:
    @pytest.fixture
    def users(self) -> Users:
        """``users(n)``: n user IDs no other test of the session uses."""
        ids = itertools.count(random.randrange(1, 2**40) * 1000)
        return lambda n: [next(ids) for _ in range(n)]

    # -- follows --------------------------------------------------------------------------

    async def test_a_follow_is_seen_by_every_read(self, graph: GraphUnderTest, users: Users) -> None:
        a, b, c = users(3)
        assert await graph.writes.add_edge(a, b, 1000) is Made.CREATED
        assert await graph.writes.edge_at(a, b) == 1000
        assert await graph.writes.edge_at(b, a) is None
        assert await graph.reads.is_following(a, b)
        assert not await graph.reads.is_following(b, a)
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(a, 1000)]
        assert (await graph.reads.list_edges(Direction.FOLLOWING, a, 10, None)).entries == [Edge(b, 1000)]
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, a, 10, None)).entries == []
        assert await graph.reads.find_edges(Direction.FOLLOWERS, b, [a, c]) == {a: 1000}
        assert await graph.reads.find_edges(Direction.FOLLOWING, a, [b, c]) == {b: 1000}
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship(following=True)}
        assert await graph.relationships.relationships(b, [a]) == {a: Relationship(followed_by=True)}
        assert await graph.writes.pair(a, b) == PairState(following=1000)
        assert (await graph.followers.list_followers(b, 10, None)).entries == [Edge(a, 1000)]

    async def test_a_repeat_follow_is_refused_and_the_first_stays(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await graph.writes.add_edge(a, b, 1000) is Made.CREATED
        assert await graph.writes.add_edge(a, b, 2000) is Made.REFUSED
        assert await graph.writes.edge_at(a, b) == 1000
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(a, 1000)]

    async def test_a_pending_request_refuses_a_follow_of_the_same_direction_only(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        assert await graph.writes.add_request(a, b, 1000) is Made.CREATED
        assert await graph.writes.add_edge(a, b, 2000) is Made.REFUSED
        assert await graph.writes.add_edge(b, a, 3000) is Made.CREATED
        assert await graph.writes.pair(a, b) == PairState(followed_by=3000, requested=1000)

    async def test_a_block_either_way_refuses_follows_and_requests(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await graph.writes.add_block(a, b, 1000, await graph.writes.pair(a, b))
        for follower, followee in ((a, b), (b, a)):
            assert await graph.writes.add_edge(follower, followee, 2000) is Made.REFUSED
            assert await graph.writes.add_request(follower, followee, 2000) is Made.REFUSED
        assert await graph.writes.pair(b, a) == PairState(blocked_by=1000)

    # -- the following cap -----------------------------------------------------------------

    async def test_the_cap_counts_follows_and_pending_requests(self, graph: GraphUnderTest, users: Users) -> None:
        a, b, c, d = users(4)
        assert await graph.writes.add_edge(a, b, 1000, cap=2) is Made.CREATED
        assert await graph.writes.add_request(a, c, 2000, cap=2) is Made.CREATED
        assert await graph.writes.add_edge(a, d, 3000, cap=2) is Made.AT_CAP
        assert await graph.writes.add_request(a, d, 3000, cap=2) is Made.AT_CAP
        assert await graph.writes.pair(a, d) == PairState()
        assert await graph.writes.add_edge(a, d, 3000, cap=3) is Made.CREATED
        assert await graph.writes.add_edge(b, d, 3000, cap=1) is Made.CREATED  # another follower's own count

    async def test_an_accept_keeps_the_place_its_request_held(self, graph: GraphUnderTest, users: Users) -> None:
        a, b, c = users(3)
        await graph.writes.add_request(a, b, 1000, cap=1)
        assert await graph.writes.accept(b, a, 1000, 2000, while_public=False) is AcceptOutcome.ACCEPTED
        assert await graph.writes.add_edge(a, c, 3000, cap=1) is Made.AT_CAP
        assert await graph.writes.add_edge(a, c, 3000, cap=2) is Made.CREATED

    async def test_unfollows_withdrawals_and_blocks_give_places_back(self, graph: GraphUnderTest, users: Users) -> None:
        a, b, c, d, e = users(5)
        await graph.writes.add_edge(a, b, 1000, cap=3)
        await graph.writes.add_request(a, c, 1000, cap=3)
        await graph.writes.add_edge(a, d, 1000, cap=3)
        await graph.writes.add_edge(d, a, 1000, cap=1)
        assert await graph.writes.add_edge(a, e, 2000, cap=3) is Made.AT_CAP
        assert await graph.writes.remove(a, b, edge_at=1000, request_at=None)
        assert await graph.writes.add_edge(a, e, 2000, cap=3) is Made.CREATED
        assert await graph.writes.remove(a, c, edge_at=None, request_at=1000)
        assert await graph.writes.add_request(a, c, 3000, cap=3) is Made.CREATED
        assert await graph.writes.add_block(d, a, 4000, await graph.writes.pair(d, a))  # removes a->d and d->a
        assert await graph.writes.add_edge(a, b, 5000, cap=3) is Made.CREATED
        assert await graph.writes.add_edge(d, b, 5000, cap=1) is Made.CREATED

    # -- requests -------------------------------------------------------------------------

    async def test_a_request_is_pending_and_no_follow(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await graph.writes.add_request(a, b, 1000) is Made.CREATED
        assert await graph.writes.request_at(b, a) == 1000
        assert await graph.writes.request_at(a, b) is None
        assert not await graph.reads.is_following(a, b)
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == []
        assert (await graph.reads.list_requests(b, 10, None)).entries == [Edge(a, 1000)]
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship(requested=True)}
        assert await graph.relationships.relationships(b, [a]) == {a: Relationship(requested_by=True)}
        assert await graph.writes.add_request(a, b, 2000) is Made.REFUSED
        assert await graph.writes.request_at(b, a) == 1000

    async def test_a_follow_refuses_a_request_of_the_same_direction(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await graph.writes.add_edge(a, b, 1000) is Made.CREATED
        assert await graph.writes.add_request(a, b, 2000) is Made.REFUSED
        assert await graph.writes.request_at(b, a) is None

    async def test_accept_turns_the_request_read_into_a_follow(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        await graph.writes.add_request(a, b, 1000)
        assert await graph.writes.accept(b, a, 1000, 5000, while_public=False) is AcceptOutcome.ACCEPTED
        assert await graph.writes.request_at(b, a) is None
        assert await graph.writes.edge_at(a, b) == 5000
        assert await graph.reads.is_following(a, b)
        assert (await graph.reads.list_requests(b, 10, None)).entries == []
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(a, 5000)]
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship(following=True)}

    async def test_accept_of_a_request_changed_since_it_was_read_is_refused(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        assert await graph.writes.accept(b, a, 1000, 5000, while_public=False) is AcceptOutcome.CHANGED
        await graph.writes.add_request(a, b, 1000)
        assert await graph.writes.accept(b, a, 999, 5000, while_public=False) is AcceptOutcome.CHANGED
        assert await graph.writes.request_at(b, a) == 1000
        assert not await graph.reads.is_following(a, b)

    async def test_accept_while_public_is_refused_once_the_account_is_private(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        await graph.writes.add_request(a, b, 1000)
        await graph.writes.set_private(b, True)
        assert await graph.writes.accept(b, a, 1000, 5000, while_public=True) is AcceptOutcome.PRIVATE
        assert await graph.writes.request_at(b, a) == 1000
        await graph.writes.set_private(b, False)
        assert await graph.writes.accept(b, a, 1000, 5000, while_public=True) is AcceptOutcome.ACCEPTED
        assert await graph.writes.edge_at(a, b) == 5000

    async def test_accept_on_the_owner_s_own_behalf_ignores_privacy(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        await graph.writes.set_private(b, True)
        await graph.writes.add_request(a, b, 1000)
        assert await graph.writes.accept(b, a, 1000, 5000, while_public=False) is AcceptOutcome.ACCEPTED

    # -- removals -------------------------------------------------------------------------

    async def test_remove_deletes_the_follow_read_and_only_that(self, graph: GraphUnderTest, users: Users) -> None:
        a, b, c = users(3)
        await graph.writes.add_edge(a, b, 1000)
        await graph.writes.add_edge(c, b, 2000)
        assert await graph.reads.is_following(a, b)  # a cached reader has it cached now
        assert not await graph.writes.remove(a, b, edge_at=999, request_at=None)
        assert await graph.writes.edge_at(a, b) == 1000
        assert await graph.writes.remove(a, b, edge_at=1000, request_at=None)
        assert await graph.writes.edge_at(a, b) is None
        assert not await graph.reads.is_following(a, b)
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(c, 2000)]
        assert (await graph.reads.list_edges(Direction.FOLLOWING, a, 10, None)).entries == []
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship()}
        assert not await graph.writes.remove(a, b, edge_at=1000, request_at=None)

    async def test_remove_withdraws_the_request_read(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        await graph.writes.add_request(a, b, 1000)
        assert not await graph.writes.remove(a, b, edge_at=None, request_at=2000)
        assert await graph.writes.remove(a, b, edge_at=None, request_at=1000)
        assert await graph.writes.request_at(b, a) is None
        assert (await graph.reads.list_requests(b, 10, None)).entries == []
        assert await graph.writes.remove(a, b, edge_at=None, request_at=None)  # nothing to remove: nothing to refuse

    # -- blocks ---------------------------------------------------------------------------

    async def test_a_block_removes_every_follow_and_request_it_read(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        await graph.writes.add_edge(a, b, 1000)
        await graph.writes.add_request(b, a, 2000)
        assert await graph.reads.is_following(a, b)
        pair = await graph.writes.pair(a, b)
        assert pair == PairState(following=1000, requested_by=2000)
        assert await graph.writes.add_block(a, b, 3000, pair)
        assert await graph.writes.pair(a, b) == PairState(blocking=3000)
        assert not await graph.reads.is_following(a, b)
        assert (await graph.reads.list_edges(Direction.FOLLOWING, a, 10, None)).entries == []
        assert (await graph.reads.list_requests(a, 10, None)).entries == []
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship(blocking=True)}
        assert await graph.relationships.relationships(b, [a]) == {a: Relationship(blocked_by=True)}
        assert not await graph.writes.add_block(a, b, 4000, await graph.writes.pair(a, b))

    async def test_a_block_is_refused_when_the_pair_changed_since_it_was_read(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        pair = await graph.writes.pair(a, b)
        await graph.writes.add_edge(b, a, 1000)
        assert not await graph.writes.add_block(a, b, 2000, pair)
        assert await graph.writes.pair(a, b) == PairState(followed_by=1000)

    async def test_remove_block_says_whether_there_was_one(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        await graph.writes.add_block(a, b, 1000, await graph.writes.pair(a, b))
        assert await graph.writes.remove_block(a, b)
        assert not await graph.writes.remove_block(a, b)
        assert await graph.relationships.relationships(a, [b]) == {b: Relationship()}
        assert await graph.writes.add_edge(a, b, 2000) is Made.CREATED

    # -- privacy --------------------------------------------------------------------------

    async def test_the_privacy_setting_round_trips(self, graph: GraphUnderTest, users: Users) -> None:
        (a,) = users(1)
        assert not await graph.writes.is_private_now(a)
        assert not await graph.reads.is_private(a)
        await graph.writes.set_private(a, True)
        assert await graph.writes.is_private_now(a)
        assert await graph.reads.is_private(a)
        await graph.writes.set_private(a, False)
        assert not await graph.reads.is_private(a)

    # -- lists, relationships, counts -----------------------------------------------------

    async def test_lists_are_newest_first_and_page_strictly_after_the_cursor(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        b, *fans = users(5)
        times = [3000, 1000, 3000, 2000]  # two follows in the same microsecond: the larger ID first
        for fan, at in zip(fans, times, strict=True):
            await graph.writes.add_edge(fan, b, at)
        expected = sorted(
            (Edge(f, at) for f, at in zip(fans, times, strict=True)), key=lambda e: (-e.at_us, -e.user_id)
        )
        first = await graph.reads.list_edges(Direction.FOLLOWERS, b, 2, None)
        assert (first.entries, first.has_more) == (expected[:2], True)
        rest = await graph.reads.list_edges(Direction.FOLLOWERS, b, 2, first.entries[-1])
        assert (rest.entries, rest.has_more) == (expected[2:], False)
        assert (await graph.reads.list_edges(Direction.FOLLOWERS, b, 10, expected[-1])).entries == []
        source = await graph.followers.list_followers(b, 3, None)
        assert (source.entries, source.has_more) == (expected[:3], True)

    async def test_requests_are_listed_newest_first_and_paged(self, graph: GraphUnderTest, users: Users) -> None:
        b, *askers = users(4)
        for at, asker in enumerate(askers, start=1):
            await graph.writes.add_request(asker, b, at * 1000)
        first = await graph.reads.list_requests(b, 2, None)
        assert (first.entries, first.has_more) == ([Edge(askers[2], 3000), Edge(askers[1], 2000)], True)
        rest = await graph.reads.list_requests(b, 2, first.entries[-1])
        assert (rest.entries, rest.has_more) == ([Edge(askers[0], 1000)], False)

    async def test_relationships_answer_each_distinct_target_and_self_is_nothing(
        self, graph: GraphUnderTest, users: Users
    ) -> None:
        a, b, c = users(3)
        await graph.writes.add_edge(a, b, 1000)
        await graph.writes.add_edge(c, a, 2000)
        found = await graph.relationships.relationships(a, [b, a, c, b])
        assert found == {b: Relationship(following=True), a: Relationship(), c: Relationship(followed_by=True)}

    async def test_counts_are_what_the_counters_hold(self, graph: GraphUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await graph.reads.get_counts([a, b, a]) == {a: Counts(), b: Counts()}
        assert await graph.followers.follower_count(a) == 0
        await graph.set_counts(a, Counts(followers=3, following=4, version=1))
        assert (await graph.reads.get_counts([a]))[a] == Counts(3, 4, 1)
        assert await graph.followers.follower_count(a) == 3
