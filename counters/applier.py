"""Applies edge changes to the users' counters with an exactly-once effect.

Per chunk: read the current counters (strongly consistent), compute the new absolute values
(clamped at zero), and write them in ONE transaction together with a *fence*: the checkpoint
move (stream consumer) or one marker per event (Lambda). Every counter write is conditioned on
the version it was computed from, so concurrent shards never lose an update, and the fence
makes a replayed chunk fail as a whole instead of counting twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from graph_service.domain.errors import Unavailable
from graph_service.domain.fences import CounterUpdate, Fence
from graph_service.domain.models import Counts
from graph_service.domain.ports import CounterTable
from graph_service.dynamodb.operations import backoff
from graph_service.store.changes import EdgeChange

__all__ = ["MAX_USERS_PER_CHUNK", "CounterApplier", "chunk_changes"]

log = structlog.get_logger(__name__)
MAX_USERS_PER_CHUNK = 90
MAX_ATTEMPTS = 20


class CounterApplier:
    def __init__(self, table: CounterTable) -> None:
        self._table = table

    async def read_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Current counters, strongly consistent (zeros for users never counted)."""
        return await self._table.read_counts(user_ids)

    async def apply(self, changes: Sequence[EdgeChange], fence: Fence) -> dict[int, Counts]:
        """Commit the chunk's deltas with the fence; returns the new counters of every touched user.

        Raises ``FenceRejected`` when the fence refuses (a replay); nothing is written then.
        """
        deltas: dict[int, list[int]] = {}
        for change in changes:
            for user, d_followers, d_following in change.deltas():
                entry = deltas.setdefault(user, [0, 0])
                entry[0] += d_followers
                entry[1] += d_following
        users = sorted(deltas)
        for attempt in range(MAX_ATTEMPTS):
            current = await self._table.read_counts(users)
            new = {
                u: Counts(
                    followers=max(0, current[u].followers + deltas[u][0]),
                    following=max(0, current[u].following + deltas[u][1]),
                    version=current[u].version + 1,
                )
                for u in users
            }
            if any(current[u].followers + deltas[u][0] < 0 or current[u].following + deltas[u][1] < 0 for u in users):
                log.warning("counter_clamped_at_zero", users=users)
            if await self._table.commit([CounterUpdate(u, current[u], new[u]) for u in users], fence):
                return new
            await backoff(attempt, base=0.005, cap=0.2)  # another shard moved a counter: read again
        raise Unavailable("counter transaction kept conflicting")


def chunk_changes(changes: list[EdgeChange], max_users: int = MAX_USERS_PER_CHUNK) -> list[list[EdgeChange]]:
    """Split into chunks that touch at most ``max_users`` users each (a transaction holds 100 items)."""
    chunks: list[list[EdgeChange]] = []
    current: list[EdgeChange] = []
    users: set[int] = set()
    for change in changes:
        touched = {change.follower_id, change.followee_id}
        if current and len(users | touched) > max_users:
            chunks.append(current)
            current, users = [], set()
        current.append(change)
        users |= touched
    if current:
        chunks.append(current)
    return chunks
