"""The graph cache's write side: what a committed write changes in Redis (the write-through of
every replica, and the counters consumer's repairs from the stream), and the invalidations owed
when Redis failed to take one.

A failed write-through is *owed*: retried in the background, and until it is delivered the cache
is not trusted for reads (``CacheCalls.trusted``). The counters consumer also repairs every edge
it sees, which covers other replicas and crashes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from graph_service.cache import keys
from graph_service.cache.cache_calls import CacheCalls
from graph_service.domain.errors import Unavailable
from graph_service.domain.models import Direction, Edge
from graph_service.domain.tasks import detached
from graph_service.domain.times import now_us
from graph_service.redis_client.packed import script_calls

__all__ = ["TOMBSTONE_MS", "Invalidations"]

log = structlog.get_logger(__name__)
TOMBSTONE_MS = 300_000  # far longer than any write takes from commit to cache


class Invalidations(CacheCalls):
    def _owe(self, follower_id: int, followee_id: int) -> None:
        pair = (follower_id, followee_id)
        self._pending[pair] = self._pending.get(pair, 0) + 1
        if self._flusher is None or self._flusher.done():
            self._flusher = detached(self._flush_pending())

    async def _flush_pending(self) -> None:
        while self._pending:
            await asyncio.sleep(max(0.05, self._down_until - time.monotonic()))
            for pair, owed in list(self._pending.items()):
                # Forget the debt only if no write of this edge failed while the invalidation ran.
                if await self.invalidate_edge(*pair) and self._pending.get(pair) == owed:
                    del self._pending[pair]
        log.info("redis_invalidations_delivered")

    @staticmethod
    def _sides(follower_id: int, followee_id: int) -> list[tuple[int, str, Direction, int]]:
        """Each user's slot of an edge: (owner, its follow-state key, the list holding the other,
        the other). The followee's slot holds no state of the edge, so its state key is its epoch."""
        return [
            (follower_id, keys.follow_state(follower_id, followee_id), Direction.FOLLOWING, followee_id),
            (followee_id, keys.epoch(followee_id), Direction.FOLLOWERS, follower_id),
        ]

    async def _in_both_slots(self, calls: list[Callable[[], Awaitable[object]]], *, essential: bool = False) -> bool:
        results = await asyncio.gather(*(self._try(call, essential=essential) for call in calls))
        return all(ok for ok, _ in results)

    async def _on_both_sides(
        self,
        script: AsyncScript,
        follower_id: int,
        followee_id: int,
        args: Callable[[int], list[str | int]],
        *,
        essential: bool = False,
    ) -> bool:
        """Run an edge script (KEYS as ``scripts.WRITE_EDGE``) in each user's slot. ``args(other)``
        builds the ARGV for the side whose list holds ``other``."""

        def edge_keys(owner: int, state_key: str, direction: Direction, other: int) -> list[str]:
            return [
                keys.epoch(owner),
                state_key,
                keys.list_key(direction, owner),
                keys.list_tombstones(direction, owner),
                keys.relationship(owner, other),
                keys.suggestions(owner),
            ]

        sides = self._sides(follower_id, followee_id)
        redis = self._redis
        if isinstance(redis, Redis):  # one node: both slots' calls in one write, one round trip
            calls = [(edge_keys(*side), args(side[3])) for side in sides]
            ok, _ = await self._try(lambda: script_calls(redis, script, calls), essential=essential)
            return ok

        def call(side: tuple[int, str, Direction, int]) -> Callable[[], Awaitable[object]]:
            return lambda: script(keys=edge_keys(*side), args=args(side[3]))

        return await self._in_both_slots([call(side) for side in sides], essential=essential)

    def _dropping(self, owner: int, *stale: str) -> Callable[[], Awaitable[object]]:
        return lambda: self._drop(keys=[keys.epoch(owner), *stale])

    async def write_edge(self, follower_id: int, followee_id: int, at_us: int | None, following: bool) -> bool:
        """Write-through after a committed follow (``following``) or unfollow of the edge made at ``at_us``.

        ``at_us`` is None for an unfollow that found no edge: only the follow state is dropped.
        False: not settled (owed; the caller must not acknowledge before ``CacheLease.settle_failed``).
        """
        add = "1" if following else "0"
        now_ms = now_us() // 1000

        def args(other: int) -> list[str | int]:
            member = "" if at_us is None else Edge(other, at_us).position
            return [add, member, self._list_limit, now_ms, TOMBSTONE_MS]

        if not await self._on_both_sides(self._write_edge, follower_id, followee_id, args, essential=True):
            self._owe(follower_id, followee_id)
            return False
        return await self._owed_delivered(follower_id, followee_id)

    async def _owed_delivered(self, a: int, b: int) -> bool:
        """After a write-through of the pair: if an earlier one failed and its invalidation is still
        owed, deliver it now, since this write is acknowledged only once the pair is settled (a
        retry of a write that committed but was not acknowledged finds nothing to change, and its
        own write-through would leave the first one's stale entries in place)."""
        owed = self._pending.get((a, b))
        if owed is None:
            return True
        if not await self.invalidate_edge(a, b, essential=True):
            return False
        if self._pending.get((a, b)) == owed:
            del self._pending[(a, b)]
        return True

    async def touch_pair(self, a: int, b: int, *, essential: bool = True) -> bool:
        """Write-through after a committed request or block change between ``a`` and ``b`` (and the
        consumer's repair of a mute): both entries of the pair, mutes included, so that no stale
        mute entry waits for a relationship entry to make it whole again. The consumer passes
        ``essential=False``: it has the stream to repeat from."""
        calls = [
            self._dropping(a, keys.relationship(a, b), keys.mute(a, b), keys.suggestions(a)),
            self._dropping(b, keys.relationship(b, a), keys.mute(b, a), keys.suggestions(b)),
        ]
        if not await self._in_both_slots(calls, essential=essential):
            self._owe(a, b)
            return False
        return await self._owed_delivered(a, b) if essential else True

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, following: bool) -> bool:
        """Delete any cached entry that disagrees with a committed change (run by the consumer)."""
        state = "1" if following else "0"
        return await self._on_both_sides(
            self._repair, follower_id, followee_id, lambda other: [state, Edge(other, at_us).position]
        )

    async def invalidate_edge(self, follower_id: int, followee_id: int, *, essential: bool = False) -> bool:
        """Drop every entry a change between the two users may have made stale, in both slots
        (tombstones are kept: they only ever stop a stale add). ``(u, u)`` is a privacy change of u.
        ``essential``: tried even while the breaker is open (a write waits on it)."""
        if follower_id == followee_id:
            ok, _ = await self._try(self._dropping_privacy(follower_id), essential=essential)
            return ok
        calls = [
            self._dropping(
                owner,
                state_key,
                keys.list_key(direction, owner),
                keys.relationship(owner, other),
                keys.mute(owner, other),
                keys.suggestions(owner),
                keys.privacy(owner),
                keys.account_state(owner),
            )
            for owner, state_key, direction, other in self._sides(follower_id, followee_id)
        ]
        return await self._in_both_slots(calls, essential=essential)

    def _dropping_privacy(self, user_id: int) -> Callable[[], Awaitable[object]]:
        """The user's settings entries (privacy and lifecycle state) and their epoch."""
        return lambda: self._drop(
            keys=[keys.privacy_epoch(user_id), keys.privacy(user_id), keys.account_state(user_id)]
        )

    async def drop_private(self, user_id: int, *, essential: bool = True) -> bool:
        """Write-through after a committed privacy or lifecycle change: the user's settings entries
        (privacy and lifecycle state; every near cache's copy with them) go and their epoch moves;
        False: not settled (owed)."""
        ok, _ = await self._try(self._dropping_privacy(user_id), essential=essential)
        if not ok:
            self._owe(user_id, user_id)
            return False
        return await self._owed_delivered(user_id, user_id) if essential else True

    async def drop_mute(self, muter_id: int, muted_id: int, *, essential: bool = True) -> bool:
        """Write-through after a committed mute or unmute: the muter's mute entry of the muted account
        goes, and the muter's epoch moves (a fill that read the store before is refused). Nothing of
        the muted account's slot is touched: muting a popular account costs it no cache fill."""
        ok, _ = await self._try(self._dropping(muter_id, keys.mute(muter_id, muted_id)), essential=essential)
        if not ok:
            self._owe(muter_id, muted_id)  # delivered as an invalidation of the pair's entries
            return False
        return await self._owed_delivered(muter_id, muted_id) if essential else True

    async def forget_account(self, user_id: int) -> None:
        """A deleted account's own entries (lists, counts, settings, suggestions) go and its epochs
        move. Entries of a pair it was part of (``fs``, ``rl``, ``mu``) are left to their TTL: every
        read naming the account answers from its state, not from them."""
        own = [
            keys.list_key(Direction.FOLLOWERS, user_id),
            keys.list_key(Direction.FOLLOWING, user_id),
            keys.list_tombstones(Direction.FOLLOWERS, user_id),
            keys.list_tombstones(Direction.FOLLOWING, user_id),
            keys.counts(user_id),
            keys.suggestions(user_id),
        ]
        ok, _ = await self._try(self._dropping(user_id, *own), essential=True)
        if not ok or not await self.drop_private(user_id):
            raise Unavailable(f"the cache entries of account {user_id} could not be dropped")

    async def deliver_owed(self) -> None:
        """Stop retrying in the background and try every owed invalidation once more, now; what
        still fails is logged and forgotten (the counters consumer's stream repairs cover it)."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        self._down_until = 0.0
        for pair in list(self._pending):
            if await self.invalidate_edge(*pair):
                del self._pending[pair]
        if self._pending:
            log.warning("redis_invalidations_dropped_at_shutdown", count=len(self._pending))
            self._pending.clear()
            self._dropped = True
