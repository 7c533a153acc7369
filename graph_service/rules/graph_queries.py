"""The graph's reads: IsFollowing, ListFollowers, ListFollowing, GetCounts, BatchGetCounts,
GetRelationships (a mute that has ended is left out of it). Validation and paging here; the reads
themselves are strongly consistent behind ``GraphReads`` and ``RelationshipReads`` (the caches are
kept exact).

An account out of the graph (SPEC §3b: deactivated or deleted) is answered for as if no edge or
request touched it: no follow to or from it, its own lists empty and its counts zero; blocks and
mutes stand. Its edges are still stored until its job has archived them, so this is decided
here, from its state, not from what the store holds."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from graph_service.domain.errors import BatchTooLarge
from graph_service.domain.ids import require_id
from graph_service.domain.models import Counts, Direction, Edge, Relationship
from graph_service.domain.ports import GraphReads, RelationshipReads
from graph_service.domain.times import now_us
from graph_service.rules.paging import Page, Pager, no_entries
from graph_service.rules.presence import Presence

__all__ = ["GraphQueries", "require_batch", "without_graph"]


def without_graph(relationship: Relationship) -> Relationship:
    """The relationship with an account out of the graph: its blocks and mutes, no follow or request."""
    return replace(relationship, following=False, followed_by=False, requested=False, requested_by=False)


def require_batch(ids: Sequence[int], field: str, max_size: int) -> None:
    """A batch RPC's IDs: at most ``max_size``, each a valid ID (the error names its index)."""
    if len(ids) > max_size:
        raise BatchTooLarge(len(ids), max_size)
    for index, value in enumerate(ids):
        require_id(value, f"{field}[{index}]")


class GraphQueries:
    def __init__(
        self,
        reads: GraphReads,
        relationships: RelationshipReads,
        pager: Pager,
        presence: Presence,
        *,
        max_batch_size: int,
    ) -> None:
        self._reads = reads
        self._presence = presence
        self._relationships = relationships
        self._pager = pager
        self._max_batch = max_batch_size

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return False
        # One after the other, not gathered: from the near cache the second read shares the first's
        # fence (domain/arrival.py) and costs no task; on a miss each is one Redis round trip.
        if await self._presence.absent([follower_id, followee_id]):
            return False
        return await self._reads.is_following(follower_id, followee_id)

    async def list_edges(self, direction: Direction, user_id: int, page_size: int, page_token: str) -> Page[Edge]:
        require_id(user_id, "user_id")
        if not await self._presence.in_graph(user_id):
            return await self._pager.page(f"{direction.value}:{user_id}", page_size, page_token, no_entries)
        return await self._pager.page(
            f"{direction.value}:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._reads.list_edges(direction, user_id, n, a),
            remember=True,
        )

    async def get_counts(self, user_id: int) -> Counts:
        require_id(user_id, "user_id")
        if await self._presence.absent([user_id]):  # then the counts: as is_following says why
            return Counts()
        return (await self._reads.get_counts([user_id]))[user_id]

    async def batch_get_counts(self, user_ids: Sequence[int]) -> list[tuple[int, Counts]]:
        require_batch(user_ids, "user_ids", self._max_batch)
        if not user_ids:
            return []
        found, absent = await asyncio.gather(self._reads.get_counts(user_ids), self._presence.absent(user_ids))
        return [(u, Counts() if u in absent else found[u]) for u in user_ids]

    async def get_relationships(self, actor_id: int, target_ids: Sequence[int]) -> list[tuple[int, Relationship]]:
        require_id(actor_id, "actor_id")
        require_batch(target_ids, "target_ids", self._max_batch)
        if not target_ids:
            return []
        found, absent = await asyncio.gather(
            self._relationships.relationships(actor_id, target_ids), self._presence.absent([actor_id, *target_ids])
        )
        now = now_us()
        if actor_id in absent:
            return [(t, without_graph(found[t].as_of(now))) for t in target_ids]
        return [(t, without_graph(found[t].as_of(now)) if t in absent else found[t].as_of(now)) for t in target_ids]
