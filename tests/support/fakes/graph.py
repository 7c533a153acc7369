"""The graph in memory: ``GraphWrites``, ``GraphReads``, ``RelationshipReads``, ``FollowerSource``,
``MuteWrites`` and ``MuteReads`` with the behaviour of ``DynamoGraphStore``, for unit tests only.

The same contract tests (``tests/support/contracts/graph.py``, ``mutes.py``) run against this fake,
against DynamoDB Local and (the graph's) against the Redis-cached wrappers, so it cannot drift from
the real thing. A mute that has ended stays stored, as it does until DynamoDB's TTL reclaims it
(``reclaim_ended`` is that TTL).
Counts are what the counters consumer would have written: zeros until a test sets them
(``set_counts``) or settles them to the true edge counts (``settle_counts``), so a lagging
counter is as easy to make as an exact one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from graph_service.domain.models import (
    AcceptOutcome,
    Counts,
    Cursor,
    Direction,
    Edge,
    EdgePage,
    Made,
    Mute,
    MutePage,
    PairState,
    Relationship,
)

__all__ = ["FakeGraph"]

Pair = tuple[int, int]
Hook = Callable[[str], Awaitable[None]]


class FakeGraph:
    def __init__(self) -> None:
        self.edges: dict[Pair, int] = {}
        """(follower, followee) -> when the follow was made."""
        self.requests: dict[Pair, int] = {}
        """(requester, asked) -> when the request was made."""
        self.blocks: dict[Pair, int] = {}
        """(blocker, blocked) -> when the block was made."""
        self.mutes: dict[Pair, Mute] = {}
        """(muter, muted) -> the stored mute (also one that has ended and is not reclaimed yet)."""
        self.private: dict[int, bool] = {}
        self.counts: dict[int, Counts] = {}
        self.before_write: Hook | None = None
        """Awaited with the write's name before each conditional write decides: a test's racing
        writer goes here (the store's conditions then see what the racer did)."""
        self.writes = 0
        """Conditional writes attempted (committed or refused)."""

    # -- test controls --------------------------------------------------------------------

    def set_counts(self, user_id: int, counts: Counts) -> None:
        self.counts[user_id] = counts

    def settle_counts(self) -> None:
        """Counts as the counters consumer leaves them once the stream is drained."""
        users = {u for pair in self.edges for u in pair} | set(self.counts)
        for user in users:
            followers = sum(1 for _, b in self.edges if b == user)
            following = sum(1 for a, _ in self.edges if a == user)
            self.counts[user] = Counts(followers, following, self.counts.get(user, Counts()).version + 1)

    def reclaim_ended(self, now_us: int) -> None:
        """Delete the mutes that have ended by ``now_us``, as DynamoDB's TTL does some time after."""
        self.mutes = {pair: mute for pair, mute in self.mutes.items() if mute.in_force(now_us)}

    async def _deciding(self, name: str) -> None:
        self.writes += 1
        if self.before_write is not None:
            await self.before_write(name)

    # -- GraphWrites ----------------------------------------------------------------------

    async def pair(self, actor_id: int, target_id: int) -> PairState:
        return PairState(
            following=self.edges.get((actor_id, target_id)),
            followed_by=self.edges.get((target_id, actor_id)),
            requested=self.requests.get((actor_id, target_id)),
            requested_by=self.requests.get((target_id, actor_id)),
            blocking=self.blocks.get((actor_id, target_id)),
            blocked_by=self.blocks.get((target_id, actor_id)),
        )

    async def request_at(self, user_id: int, requester_id: int) -> int | None:
        return self.requests.get((requester_id, user_id))

    async def edge_at(self, follower_id: int, followee_id: int) -> int | None:
        return self.edges.get((follower_id, followee_id))

    def _blocked(self, a: int, b: int) -> bool:
        return (a, b) in self.blocks or (b, a) in self.blocks

    def outgoing(self, user_id: int) -> int:
        """The user's follows plus pending requests: what the following cap counts."""
        return sum(1 for a, _ in self.edges if a == user_id) + sum(1 for a, _ in self.requests if a == user_id)

    def _refusal(self, pair: Pair, cap: int) -> Made | None:
        if cap and self.outgoing(pair[0]) >= cap:
            return Made.AT_CAP
        if pair in self.edges or pair in self.requests or self._blocked(*pair):
            return Made.REFUSED
        return None

    async def add_edge(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        await self._deciding("add_edge")
        pair = (follower_id, followee_id)
        refused = self._refusal(pair, cap)
        if refused is not None:
            return refused
        self.edges[pair] = at_us
        return Made.CREATED

    async def add_request(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        await self._deciding("add_request")
        pair = (follower_id, followee_id)
        refused = self._refusal(pair, cap)
        if refused is not None:
            return refused
        self.requests[pair] = at_us
        return Made.CREATED

    async def accept(
        self, user_id: int, requester_id: int, requested_at: int, at_us: int, *, while_public: bool
    ) -> AcceptOutcome:
        await self._deciding("accept")
        pair = (requester_id, user_id)
        still_requested = self.requests.get(pair) == requested_at and pair not in self.edges
        public = not (while_public and self.private.get(user_id, False))
        if not (still_requested and public):
            return AcceptOutcome.CHANGED if public else AcceptOutcome.PRIVATE
        del self.requests[pair]
        self.edges[pair] = at_us
        return AcceptOutcome.ACCEPTED

    async def remove(self, follower_id: int, followee_id: int, *, edge_at: int | None, request_at: int | None) -> bool:
        if edge_at is None and request_at is None:
            return True
        await self._deciding("remove")
        pair = (follower_id, followee_id)
        if edge_at is not None and self.edges.get(pair) != edge_at:
            return False
        if request_at is not None and self.requests.get(pair) != request_at:
            return False
        if edge_at is not None:
            del self.edges[pair]
        if request_at is not None:
            del self.requests[pair]
        return True

    async def add_block(self, blocker_id: int, blocked_id: int, at_us: int, pair: PairState) -> bool:
        await self._deciding("add_block")
        if (blocker_id, blocked_id) in self.blocks:
            return False
        for follower, followee, edge_at, request_at in (
            (blocker_id, blocked_id, pair.following, pair.requested),
            (blocked_id, blocker_id, pair.followed_by, pair.requested_by),
        ):
            if self.edges.get((follower, followee)) != edge_at or self.requests.get((follower, followee)) != request_at:
                return False  # a follow or request changed since ``pair`` was read
        self.blocks[(blocker_id, blocked_id)] = at_us
        for follower, followee in ((blocker_id, blocked_id), (blocked_id, blocker_id)):
            self.edges.pop((follower, followee), None)
            self.requests.pop((follower, followee), None)
        return True

    async def remove_block(self, blocker_id: int, blocked_id: int) -> bool:
        return self.blocks.pop((blocker_id, blocked_id), None) is not None

    async def set_private(self, user_id: int, private: bool) -> None:
        self.private[user_id] = private

    async def is_private_now(self, user_id: int) -> bool:
        return self.private.get(user_id, False)

    is_private = is_private_now  # ``GraphReads``' read: the store has no cache to serve it from

    # -- GraphReads -----------------------------------------------------------------------

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        return (follower_id, followee_id) in self.edges

    def _list(self, direction: Direction, user_id: int) -> list[Edge]:
        if direction is Direction.FOLLOWERS:
            entries = [Edge(a, at) for (a, b), at in self.edges.items() if b == user_id]
        else:
            entries = [Edge(b, at) for (a, b), at in self.edges.items() if a == user_id]
        return sorted(entries, key=lambda e: e.position, reverse=True)

    @staticmethod
    def _page(entries: list[Edge], limit: int, after: Cursor | None) -> EdgePage:
        if after is not None:
            entries = [e for e in entries if e.position < after.position]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return self._page(self._list(direction, user_id), limit, after)

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        entries = sorted(
            (Edge(a, at) for (a, b), at in self.requests.items() if b == user_id),
            key=lambda e: e.position,
            reverse=True,
        )
        return self._page(entries, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for other in others:
            pair = (other, user_id) if direction is Direction.FOLLOWERS else (user_id, other)
            if pair in self.edges:
                found[other] = self.edges[pair]
        return found

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return {u: self.counts.get(u, Counts()) for u in dict.fromkeys(user_ids)}

    # -- RelationshipReads ----------------------------------------------------------------

    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        found: dict[int, Relationship] = {}
        for target in dict.fromkeys(target_ids):
            if target == actor_id:
                found[target] = Relationship()
                continue
            relationship = (await self.pair(actor_id, target)).relationship()
            mute = self.mutes.get((actor_id, target))
            if mute is not None:
                relationship = replace(
                    relationship, mute_expires_us=mute.expires_us, muting_notifications=mute.notifications
                )
            found[target] = relationship
        return found

    # -- FollowerSource -------------------------------------------------------------------

    async def follower_count(self, user_id: int) -> int:
        return self.counts.get(user_id, Counts()).followers

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self.list_edges(Direction.FOLLOWERS, user_id, limit, after)

    # -- MuteWrites -----------------------------------------------------------------------

    async def mute_of(self, muter_id: int, muted_id: int) -> Mute | None:
        return self.mutes.get((muter_id, muted_id))

    async def put_mute(self, muter_id: int, mute: Mute, *, replacing: Mute | None) -> bool:
        await self._deciding("put_mute")
        pair = (muter_id, mute.user_id)
        if self.mutes.get(pair) != replacing:
            return False
        self.mutes[pair] = mute
        return True

    async def remove_mute(self, muter_id: int, mute: Mute) -> bool:
        await self._deciding("remove_mute")
        pair = (muter_id, mute.user_id)
        stored = self.mutes.get(pair)
        if stored is None or (stored.at_us, stored.expires_us) != (mute.at_us, mute.expires_us):
            return False  # the store's condition: the ``at`` and ``exp`` read (not ``ntf``)
        del self.mutes[pair]
        return True

    # -- MuteReads ------------------------------------------------------------------------

    async def list_mutes(self, user_id: int, limit: int, after: Cursor | None, *, now_us: int) -> MutePage:
        entries = sorted(
            (m for (muter, _), m in self.mutes.items() if muter == user_id and m.in_force(now_us)),
            key=lambda m: m.position,
            reverse=True,
        )
        if after is not None:
            entries = [m for m in entries if m.position < after.position]
        return MutePage(entries=entries[:limit], has_more=len(entries) > limit)
