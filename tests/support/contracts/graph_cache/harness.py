"""What the graph cache's contracts share: the cache under test, fresh user IDs, and the fills and
reads a contract sets entries up and looks at them with."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Protocol

from graph_service.domain.models import Direction, Edge, Relationship
from graph_service.domain.ports import CacheInvalidations, CacheRepairs, CountCache, GraphCacheReads, ListCache

__all__ = [
    "FOLLOWERS",
    "FOLLOWING",
    "LIST_LIMIT",
    "GraphCacheRoles",
    "GraphCacheUnderTest",
    "cached_relationship",
    "epoch",
    "fill_list",
    "fill_private",
    "fill_relationship",
    "fill_state",
    "iterate",
    "listed",
    "users",
]

LIST_LIMIT = 4
FOLLOWERS, FOLLOWING = Direction.FOLLOWERS, Direction.FOLLOWING


class GraphCacheRoles(GraphCacheReads, CacheInvalidations, CacheRepairs, Protocol):
    """Every role of the graph cache held to a contract here."""


@dataclass
class GraphCacheUnderTest:
    cache: GraphCacheRoles
    """Keeps whole lists of up to ``LIST_LIMIT`` entries."""
    unreachable: GraphCacheRoles
    """The same kind of cache, whose Redis cannot be reached."""

    @property
    def counts(self) -> CountCache:
        return self.cache

    @property
    def lists(self) -> ListCache:
        return self.cache

    @property
    def reads(self) -> GraphCacheReads:
        return self.cache

    @property
    def invalidations(self) -> CacheInvalidations:
        return self.cache

    @property
    def repairs(self) -> CacheRepairs:
        return self.cache


_ids = itertools.count(random.randrange(1, 2**40) * 1000)


def users(n: int) -> list[int]:
    """Fresh user IDs, in increasing order."""
    return [next(_ids) for _ in range(n)]


async def iterate(entries: Iterable[Edge]) -> AsyncIterator[Edge]:
    for edge in entries:
        yield edge


async def epoch(reads: GraphCacheReads, user_id: int) -> str:
    seen = await reads.epoch(user_id)
    assert seen is not None
    return seen


async def fill_list(reads: GraphCacheReads, direction: Direction, user_id: int, *entries: Edge) -> None:
    """Cache the user's whole list, as the read-through does after reading it from the store."""
    assert await reads.fill_list(direction, user_id, await epoch(reads, user_id), iterate(entries))


async def listed(lists: ListCache, direction: Direction, user_id: int) -> list[Edge] | None:
    """The whole cached list, newest first; None on a miss."""
    page = await lists.read_list(direction, user_id, LIST_LIMIT + 1, None)
    return None if page is None else page.entries


async def fill_state(reads: GraphCacheReads, follower_id: int, followee_id: int, following: bool) -> None:
    await reads.fill_follow_state(follower_id, followee_id, following, await epoch(reads, follower_id))
    assert await reads.get_follow_state(follower_id, followee_id) is following


async def fill_relationship(reads: GraphCacheReads, actor_id: int, target_id: int, relationship: Relationship) -> None:
    await reads.fill_relationships(actor_id, {target_id: relationship}, await epoch(reads, actor_id))
    assert await cached_relationship(reads, actor_id, target_id) == relationship


async def cached_relationship(reads: GraphCacheReads, actor_id: int, target_id: int) -> Relationship | None:
    found, _ = await reads.read_relationships(actor_id, [target_id])
    return found.get(target_id)


async def fill_private(reads: GraphCacheReads, user_id: int, private: bool) -> None:
    seen = await reads.privacy_epoch(user_id)
    assert seen is not None
    await reads.fill_private(user_id, private, seen)
    assert await reads.get_private(user_id) is private
