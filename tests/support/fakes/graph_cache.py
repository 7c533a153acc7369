"""The graph cache in memory: every role of the Redis ``GraphCache`` (``CountCache``, ``ListCache``,
``FollowerCache``, ``GraphCacheReads``, ``CacheInvalidations``, ``CacheRepairs``, ``SuggestionCache``)
as its Lua scripts do them (``graph_service/cache/scripts.py``), for unit tests only (held to it by
``tests/support/contracts/graph_cache/``).

Left out: TTLs (nothing expires, tombstones included), the near cache, the circuit breaker and the
owed invalidations (a fake set ``down`` and back up serves what it held before).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from graph_service.domain.models import Counts, Cursor, Direction, Edge, EdgePage, Relationship

__all__ = ["FakeGraphCache"]

ListKey = tuple[Direction, int]


def _sides(follower_id: int, followee_id: int) -> list[tuple[int, ListKey, int]]:
    """Each user's side of an edge: (owner, the owner's list holding the other, the other)."""
    return [
        (follower_id, (Direction.FOLLOWING, follower_id), followee_id),
        (followee_id, (Direction.FOLLOWERS, followee_id), follower_id),
    ]


class FakeGraphCache:
    def __init__(self, *, list_limit: int = 1000, down: bool = False) -> None:
        self.down = down
        """Redis cannot be reached: every read misses, no fill is kept, every write returns False."""
        self._list_limit = list_limit
        self.epochs: dict[int, int] = {}
        """Each user's epoch: moved by every write touching the user; guards every fill but privacy's."""
        self.privacy_epochs: dict[int, int] = {}
        self.follow_states: dict[tuple[int, int], bool] = {}
        self.lists: dict[ListKey, set[Edge]] = {}
        self.tombstones: dict[ListKey, set[Edge]] = {}
        """Entries removed from a list by a write-through: a later write-through never adds them back."""
        self.counts: dict[int, Counts] = {}
        self.relationships: dict[tuple[int, int], Relationship] = {}
        self.private: dict[int, bool] = {}
        self.suggestions: dict[int, str] = {}

    @property
    def list_limit(self) -> int:
        return self._list_limit

    def _fresh(self, epochs: dict[int, int], user_id: int, seen: str) -> bool:
        """A fill guarded by ``seen`` may be kept: Redis answers and no write moved the epoch since."""
        return not self.down and str(epochs.get(user_id, 0)) == seen

    def _touch(self, owner: int, other: int) -> None:
        """What every write between the two does in the owner's slot (the ``DROP`` script and the
        start of the edge scripts): move its epoch, drop its entry of the pair and its suggestions."""
        self.epochs[owner] = self.epochs.get(owner, 0) + 1
        self.relationships.pop((owner, other), None)
        self.suggestions.pop(owner, None)

    # -- reads and fills ----------------------------------------------------------------------

    async def epoch(self, user_id: int) -> str | None:
        return None if self.down else str(self.epochs.get(user_id, 0))

    async def privacy_epoch(self, user_id: int) -> str | None:
        return None if self.down else str(self.privacy_epochs.get(user_id, 0))

    async def get_follow_state(self, follower_id: int, followee_id: int) -> bool | None:
        return None if self.down else self.follow_states.get((follower_id, followee_id))

    async def fill_follow_state(self, follower_id: int, followee_id: int, following: bool, seen: str) -> None:
        if self._fresh(self.epochs, follower_id, seen):
            self.follow_states[(follower_id, followee_id)] = following

    async def read_list(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage | None:
        cached = None if self.down else self.lists.get((direction, user_id))
        if cached is None:
            return None
        entries = sorted(cached, key=lambda edge: edge.position, reverse=True)
        if after is not None:
            entries = [edge for edge in entries if edge.position < after.position]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)

    async def fill_list(self, direction: Direction, user_id: int, seen: str, entries: AsyncIterator[Edge]) -> bool:
        whole: set[Edge] = set()
        async for edge in entries:
            whole.add(edge)
            if len(whole) > self._list_limit:
                return False
        if not self._fresh(self.epochs, user_id, seen):
            return False
        self.lists[(direction, user_id)] = whole
        return True

    async def read_relationships(
        self, actor_id: int, target_ids: Sequence[int]
    ) -> tuple[dict[int, Relationship], str | None]:
        if self.down or not target_ids:
            return {}, None
        found = {t: self.relationships[(actor_id, t)] for t in target_ids if (actor_id, t) in self.relationships}
        return found, str(self.epochs.get(actor_id, 0))

    async def fill_relationships(self, actor_id: int, found: dict[int, Relationship], seen: str) -> None:
        if self._fresh(self.epochs, actor_id, seen):
            self.relationships.update({(actor_id, t): r for t, r in found.items()})

    async def get_private(self, user_id: int) -> bool | None:
        return None if self.down else self.private.get(user_id)

    async def fill_private(self, user_id: int, private: bool, seen: str) -> None:
        if self._fresh(self.privacy_epochs, user_id, seen):
            self.private[user_id] = private

    async def get_suggestions(self, user_id: int) -> str | None:
        return None if self.down else self.suggestions.get(user_id)

    async def fill_suggestions(self, user_id: int, value: str, seen: str, ttl_seconds: int) -> None:
        if self._fresh(self.epochs, user_id, seen):
            self.suggestions[user_id] = value

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return {} if self.down else {u: self.counts[u] for u in user_ids if u in self.counts}

    async def set_counts(self, user_id: int, counts: Counts) -> bool:
        if self.down:
            return False
        cached = self.counts.get(user_id)
        if cached is None or cached.version < counts.version:
            self.counts[user_id] = counts
        return True

    # -- writes -------------------------------------------------------------------------------

    async def write_edge(self, follower_id: int, followee_id: int, at_us: int | None, following: bool) -> bool:
        """``WRITE_EDGE`` in both slots: the follow state is dropped, cached lists are corrected."""
        if self.down:
            return False
        self.follow_states.pop((follower_id, followee_id), None)
        for owner, key, other in _sides(follower_id, followee_id):
            self._touch(owner, other)
            if at_us is None:
                continue
            edge = Edge(other, at_us)
            gone = self.tombstones.setdefault(key, set())
            if not following:
                gone.add(edge)
            cached = self.lists.get(key)
            if cached is None:
                continue
            if not following:
                cached.discard(edge)
            elif edge not in gone:
                cached.add(edge)
            else:  # late, or restored with its own time: the store alone can tell
                del self.lists[key]
                continue
            if len(cached) > self._list_limit:
                del self.lists[key]
        return True

    async def touch_pair(self, a: int, b: int, *, essential: bool = True) -> bool:
        if self.down:
            return False
        self._touch(a, b)
        self._touch(b, a)
        return True

    async def drop_mute(self, muter_id: int, muted_id: int, *, essential: bool = True) -> bool:
        """The muter's slot only: its epoch moves and its entry of the pair goes."""
        if self.down:
            return False
        self.epochs[muter_id] = self.epochs.get(muter_id, 0) + 1
        self.relationships.pop((muter_id, muted_id), None)
        return True

    async def drop_private(self, user_id: int, *, essential: bool = True) -> bool:
        if self.down:
            return False
        self.privacy_epochs[user_id] = self.privacy_epochs.get(user_id, 0) + 1
        self.private.pop(user_id, None)
        return True

    async def invalidate_edge(self, follower_id: int, followee_id: int, *, essential: bool = False) -> bool:
        """Drops the pair's entries in both slots, whole lists and privacy flags included (tombstones stay)."""
        if follower_id == followee_id:
            return await self.drop_private(follower_id)
        if self.down:
            return False
        self.follow_states.pop((follower_id, followee_id), None)
        for owner, key, other in _sides(follower_id, followee_id):
            self._touch(owner, other)
            self.lists.pop(key, None)
            self.private.pop(owner, None)
        return True

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, following: bool) -> bool:
        """``REPAIR_EDGE`` in both slots: only ever deletes what disagrees with the committed change."""
        if self.down:
            return False
        if self.follow_states.get((follower_id, followee_id), following) != following:
            del self.follow_states[(follower_id, followee_id)]
        for owner, key, other in _sides(follower_id, followee_id):
            self._touch(owner, other)
            edge = Edge(other, at_us)
            cached = self.lists.get(key)
            if cached is None:
                continue
            if (edge in cached) != following:  # disagrees with the record: dropped, not edited
                del self.lists[key]
        return True
