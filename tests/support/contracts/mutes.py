"""What every implementation of a user's mutes must do: ``MuteWrites``, ``MuteReads``, and the mute
fields of ``RelationshipReads``.

``MuteContract`` is run against the in-memory fake (``tests/unit/fakes``) and DynamoDB Local
(``tests/integration/store``): a subclass provides the ``mutes`` fixture. Every test takes fresh
user IDs from ``users``, so implementations may share tables between tests. Times are far in the
future (``T``): no mute of these tests ends by the clock, so a TTL of the real table never reclaims
one while a test looks; "ended" is always said by the ``now_us`` a test passes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from graph_service.domain.models import Edge, Made, Mute, Relationship
from graph_service.domain.ports import GraphWrites, MuteReads, MuteWrites, RelationshipReads

__all__ = ["MuteContract", "MutesUnderTest", "Users"]

Users = Callable[[int], list[int]]
T = 4_000_000_000_000_000  # µs: the year 2096
HOUR = 3_600_000_000


@dataclass
class MutesUnderTest:
    writes: MuteWrites
    reads: MuteReads
    relationships: RelationshipReads
    graph: GraphWrites
    """Follows beside the mutes (a mute changes none)."""
    seed: Callable[[int, list[Mute]], Awaitable[None]]
    """Store many mutes of one muter at once, as ``put_mute`` would have stored each (a real store
    writes its items in batches, straight into the table)."""


async def _walk(mutes: MutesUnderTest, user: int, page: int, now_us: int) -> list[list[Mute]]:
    """Every page of the user's mutes, following the cursor until the last."""
    pages: list[list[Mute]] = []
    after: Edge | None = None
    while True:
        found = await mutes.reads.list_mutes(user, page, after, now_us=now_us)
        pages.append(found.entries)
        if not found.has_more:
            return pages
        after = found.entries[-1]


class MuteContract:
    @pytest.fixture
    def users(self) -> Users:
        """``users(n)``: n user IDs no other test of the session uses."""
        ids = itertools.count(random.randrange(1, 2**40) * 1000)
        return lambda n: [next(ids) for _ in range(n)]

    # -- put, replace, remove ---------------------------------------------------------------

    async def test_a_new_mute_is_stored_once_and_read_back(self, mutes: MutesUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await mutes.writes.mute_of(a, b) is None
        mute = Mute(b, T, T + HOUR, True)
        assert await mutes.writes.put_mute(a, mute, replacing=None)
        assert await mutes.writes.mute_of(a, b) == mute
        assert await mutes.writes.mute_of(b, a) is None  # one direction only
        assert not await mutes.writes.put_mute(a, Mute(b, T + 1, 0, False), replacing=None)
        assert await mutes.writes.mute_of(a, b) == mute
        assert (await mutes.reads.list_mutes(a, 10, None, now_us=T)).entries == [mute]

    async def test_a_replace_needs_the_mute_read_and_leaves_one_entry(
        self, mutes: MutesUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        first = Mute(b, T, 0, False)
        assert not await mutes.writes.put_mute(a, first, replacing=Mute(b, T, 0, False))  # none stored
        assert await mutes.writes.put_mute(a, first, replacing=None)
        later = Mute(b, T + 5, T + HOUR, True)
        for stale in (Mute(b, T - 1, 0, False), Mute(b, T, 1, False), Mute(b, T, 0, True)):
            assert not await mutes.writes.put_mute(a, later, replacing=stale)  # at, exp or ntf differ
        assert await mutes.writes.mute_of(a, b) == first
        assert await mutes.writes.put_mute(a, later, replacing=first)  # made anew: a new place
        assert await mutes.writes.mute_of(a, b) == later
        assert (await mutes.reads.list_mutes(a, 10, None, now_us=T)).entries == [later]
        same_place = Mute(b, T + 5, 0, False)  # still in force: it keeps its time, new end and flag
        assert await mutes.writes.put_mute(a, same_place, replacing=later)
        assert await mutes.writes.mute_of(a, b) == same_place
        assert (await mutes.reads.list_mutes(a, 10, None, now_us=T)).entries == [same_place]
        assert not await mutes.writes.put_mute(a, first, replacing=later)  # replaced since

    async def test_remove_needs_the_mute_read(self, mutes: MutesUnderTest, users: Users) -> None:
        a, b, c = users(3)
        mute = Mute(b, T, T + HOUR, True)
        other = Mute(c, T + 1, 0, False)
        await mutes.writes.put_mute(a, mute, replacing=None)
        await mutes.writes.put_mute(a, other, replacing=None)
        assert not await mutes.writes.remove_mute(a, Mute(b, T + 1, T + HOUR, True))  # another time
        assert not await mutes.writes.remove_mute(a, Mute(b, T, 0, True))  # another end
        assert await mutes.writes.mute_of(a, b) == mute
        assert await mutes.writes.remove_mute(a, mute)
        assert await mutes.writes.mute_of(a, b) is None
        assert (await mutes.reads.list_mutes(a, 10, None, now_us=T)).entries == [other]
        assert not await mutes.writes.remove_mute(a, mute)  # nothing left to remove
        assert await mutes.writes.put_mute(a, Mute(b, T + 2, 0, False), replacing=None)  # mutable again

    async def test_a_mute_changes_no_follow(self, mutes: MutesUnderTest, users: Users) -> None:
        a, b = users(2)
        assert await mutes.graph.add_edge(a, b, T) is Made.CREATED
        await mutes.writes.put_mute(a, Mute(b, T + 1, 0, True), replacing=None)
        assert await mutes.graph.edge_at(a, b) == T
        found = await mutes.relationships.relationships(a, [b])
        assert found == {b: Relationship(following=True, mute_expires_us=0, muting_notifications=True)}
        assert await mutes.relationships.relationships(b, [a]) == {a: Relationship(followed_by=True)}
        await mutes.writes.remove_mute(a, Mute(b, T + 1, 0, True))
        assert await mutes.relationships.relationships(a, [b]) == {b: Relationship(following=True)}

    # -- relationships ----------------------------------------------------------------------

    async def test_relationships_say_the_stored_mute_ended_or_not(self, mutes: MutesUnderTest, users: Users) -> None:
        a, b, c, d = users(4)
        await mutes.writes.put_mute(a, Mute(b, T, 0, False), replacing=None)
        await mutes.writes.put_mute(a, Mute(c, T, T + HOUR, True), replacing=None)
        found = await mutes.relationships.relationships(a, [b, c, d, a])
        assert found == {
            b: Relationship(mute_expires_us=0),
            c: Relationship(mute_expires_us=T + HOUR, muting_notifications=True),
            d: Relationship(),
            a: Relationship(),
        }
        assert found[c].as_of(T + HOUR - 1) == found[c]
        assert found[c].as_of(T + HOUR) == Relationship()  # ended: the rules leave it out
        assert found[b].as_of(T + 100 * HOUR) == found[b]  # until unmuted

    # -- ListMutes ----------------------------------------------------------------------------

    async def test_mutes_are_listed_newest_first_and_paged_strictly_after_the_cursor(
        self, mutes: MutesUnderTest, users: Users
    ) -> None:
        a, *muted = users(5)
        times = [T + 3, T + 1, T + 3, T + 2]  # two in the same microsecond: the larger ID first
        made = [Mute(m, at, 0, i % 2 == 0) for i, (m, at) in enumerate(zip(muted, times, strict=True))]
        for mute in made:
            assert await mutes.writes.put_mute(a, mute, replacing=None)
        expected = sorted(made, key=lambda m: (-m.at_us, -m.user_id))
        first = await mutes.reads.list_mutes(a, 2, None, now_us=T)
        assert (first.entries, first.has_more) == (expected[:2], True)
        rest = await mutes.reads.list_mutes(a, 2, first.entries[-1], now_us=T)
        assert (rest.entries, rest.has_more) == (expected[2:], False)
        cursor = Edge(expected[-1].user_id, expected[-1].at_us)  # a plain cursor, as a page token gives
        assert (await mutes.reads.list_mutes(a, 10, cursor, now_us=T)).entries == []
        assert (await mutes.reads.list_mutes(muted[0], 10, None, now_us=T)).entries == []

    async def test_ended_mutes_are_skipped_and_no_page_before_the_last_is_empty(
        self, mutes: MutesUnderTest, users: Users
    ) -> None:
        """Newest first: 2 in force, 40 ended, 1 in force, 30 ended. Pages of 2 are the two, then the
        one alone and the last (no empty page between, nor after it); an end at ``now`` has ended."""
        a, *muted = users(74)
        now = T + 10 * HOUR
        at = itertools.count(T + 1000, -1)

        def mute(user: int, expires: int) -> Mute:
            return Mute(user, next(at), expires, False)

        newest = [mute(u, 0) for u in muted[:2]]
        ended = [mute(u, now - i % 3) for i, u in enumerate(muted[2:42])]  # ``now`` itself too
        between = mute(muted[42], now + 1)
        oldest = [mute(u, T + HOUR) for u in muted[43:73]]
        await mutes.seed(a, [*newest, *ended, between, *oldest])
        assert await _walk(mutes, a, 2, now) == [newest, [between]]
        assert await _walk(mutes, a, 1, now) == [[newest[0]], [newest[1]], [between]]
        assert await _walk(mutes, a, 50, now) == [[*newest, between]]
        everything = [*newest, *ended, between, *oldest]
        assert [m for page in await _walk(mutes, a, 50, T) for m in page] == everything  # none ended at T
        assert await _walk(mutes, a, 3, now + 2) == [newest]  # ``between`` ended too: the list ends there
