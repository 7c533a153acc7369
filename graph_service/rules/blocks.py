"""Block and Unblock.

A block is put, and every follow and request between the two accounts deleted, in one write
conditioned on what was read: a follow that commits in between refuses it, and the next attempt
deletes that follow too.
"""

from __future__ import annotations

from graph_service.domain.errors import Unavailable
from graph_service.domain.ids import require_pair
from graph_service.domain.models import PairState
from graph_service.domain.ports import GraphChanges, GraphWrites
from graph_service.domain.times import now_us
from graph_service.rules.presence import Presence
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["Blocks"]


class Blocks:
    def __init__(self, writes: GraphWrites, changes: GraphChanges, presence: Presence) -> None:
        self._writes = writes
        self._changes = changes
        self._presence = presence

    async def block(self, blocker_id: int, blocked_id: int) -> None:
        require_pair(blocker_id, "blocker_id", blocked_id, "blocked_id")
        # An account away keeps its edges archived: what the block ends must not come back with it,
        # even if the block is lifted before (SPEC §3b).
        await self._presence.forget_archived(blocker_id, blocked_id)
        await self._presence.forget_archived(blocked_id, blocker_id)
        removed = await self._block(blocker_id, blocked_id)
        for follower, followee, edge_at in (
            (blocker_id, blocked_id, removed.following),
            (blocked_id, blocker_id, removed.followed_by),
        ):
            if edge_at is not None:
                await self._changes.follow_settled(follower, followee, edge_at, following=False)
        await self._changes.pair_settled(blocker_id, blocked_id)

    async def _block(self, blocker_id: int, blocked_id: int) -> PairState:
        """What the block removed (nothing if the block was there already)."""
        for _ in range(RACE_ATTEMPTS):
            pair = await self._writes.pair(blocker_id, blocked_id)
            if pair.blocking is not None:
                return PairState()  # no follow or request can exist across a block
            if await self._writes.add_block(blocker_id, blocked_id, now_us(), pair):
                return pair
        raise Unavailable("block kept racing concurrent writes")

    async def unblock(self, blocker_id: int, blocked_id: int) -> None:
        require_pair(blocker_id, "blocker_id", blocked_id, "blocked_id")
        await self._writes.remove_block(blocker_id, blocked_id)
        await self._changes.pair_settled(blocker_id, blocked_id)
