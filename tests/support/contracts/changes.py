"""What every implementation of ``GraphChanges`` must do: once told, the reads of the pair answer as
the store does (the cache write-through over Redis, the recording fake, and no cache at all)."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Protocol

from graph_service.domain.models import Direction, Edge, Made, Mute, Relationship
from graph_service.domain.ports import GraphChanges, GraphReads, GraphWrites, MuteWrites, RelationshipReads

__all__ = ["ChangesContract", "ChangesUnderTest"]


class Store(GraphWrites, MuteWrites, Protocol):
    """The graph store's writes the contract makes."""


@dataclass
class ChangesUnderTest:
    changes: GraphChanges
    store: Store
    """Writes straight to the store, as the service layer makes them."""
    reads: GraphReads
    relationships: RelationshipReads
    """The reads callers get (through the cache, where there is one)."""


_ids = itertools.count(random.randrange(1, 2**40) * 1000)


def _users(n: int) -> list[int]:
    return [next(_ids) for _ in range(n)]


class ChangesContract:
    async def test_a_settled_follow_is_read_at_once(self, changes: ChangesUnderTest) -> None:
        a, b = _users(2)
        assert not await changes.reads.is_following(a, b)  # read (and cached, where there is a cache)
        assert (await changes.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == []
        assert await changes.store.add_edge(a, b, 1000) is Made.CREATED
        await changes.changes.follow_settled(a, b, 1000, following=True)
        assert await changes.reads.is_following(a, b)
        assert (await changes.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(a, 1000)]
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship(following=True)}

    async def test_a_settled_removal_is_read_at_once(self, changes: ChangesUnderTest) -> None:
        a, b = _users(2)
        await changes.store.add_edge(a, b, 1000)
        await changes.changes.follow_settled(a, b, 1000, following=True)
        assert await changes.reads.is_following(a, b)
        assert await changes.relationships.relationships(b, [a]) == {a: Relationship(followed_by=True)}
        assert await changes.store.remove(a, b, edge_at=1000, request_at=None)
        await changes.changes.follow_settled(a, b, 1000, following=False)
        assert not await changes.reads.is_following(a, b)
        assert (await changes.reads.list_edges(Direction.FOLLOWING, a, 10, None)).entries == []
        assert await changes.relationships.relationships(b, [a]) == {a: Relationship()}

    async def test_a_settled_pair_and_privacy_are_read_at_once(self, changes: ChangesUnderTest) -> None:
        a, b = _users(2)
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship()}
        assert not await changes.reads.is_private(b)
        await changes.store.set_private(b, True)
        await changes.changes.settings_settled(b)
        assert await changes.store.add_request(a, b, 1000) is Made.CREATED
        await changes.changes.pair_settled(a, b)
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship(requested=True)}
        assert await changes.reads.is_private(b)

    async def test_a_settled_mute_and_unmute_are_read_at_once(self, changes: ChangesUnderTest) -> None:
        a, b = _users(2)
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship()}
        mute = Mute(b, 1000, 0, True)
        assert await changes.store.put_mute(a, mute, replacing=None)
        await changes.changes.mute_settled(a, b)
        muting = Relationship(mute_expires_us=0, muting_notifications=True)
        assert await changes.relationships.relationships(a, [b]) == {b: muting}
        assert await changes.relationships.relationships(b, [a]) == {a: Relationship()}
        assert await changes.store.remove_mute(a, mute)
        await changes.changes.mute_settled(a, b)
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship()}

    async def test_notices_that_change_nothing_are_harmless(self, changes: ChangesUnderTest) -> None:
        a, b = _users(2)
        for _ in range(2):
            await changes.changes.follow_settled(a, b, None, following=False)
            await changes.changes.pair_settled(a, b)
            await changes.changes.settings_settled(a)
            await changes.changes.mute_settled(a, b)
        assert not await changes.reads.is_following(a, b)
        assert await changes.relationships.relationships(a, [b]) == {b: Relationship()}
