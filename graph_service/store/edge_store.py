"""The interface every edge store (DynamoDB, the write-through cache) implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_service.models import BlockResult, Counts, Cursor, Direction, EdgePage, FollowResult, Relationship, Removal

__all__ = ["AccountIsPrivate", "EdgeStore"]


class AccountIsPrivate(Exception):
    """An accept made ``while_public`` found the account private: the request stays pending."""


class EdgeStore(Protocol):
    async def follow(self, follower_id: int, followee_id: int, *, private: bool = False) -> FollowResult:
        """Make the edge (or, for a private followee, a pending request) unless it exists; never
        half-written. Raises ``Blocked`` if either account blocks the other."""
        ...

    async def unfollow(self, follower_id: int, followee_id: int) -> Removal:
        """Remove the edge and withdraw a pending request, whichever exist."""
        ...

    async def accept_request(
        self, user_id: int, requester_id: int, *, while_public: bool = False
    ) -> FollowResult | None:
        """Turn a pending request into an edge; the existing edge if it was accepted before; None if neither.
        ``while_public``: only if the account is public at the commit, else ``AccountIsPrivate``."""
        ...

    async def reject_request(self, user_id: int, requester_id: int) -> int | None:
        """Drop a pending request; its timestamp, or None if there was none."""
        ...

    async def block(self, blocker_id: int, blocked_id: int) -> BlockResult:
        """Block, removing every edge and request between the two in the same write."""
        ...

    async def unblock(self, blocker_id: int, blocked_id: int) -> bool:
        """Lift a block; whether there was one."""
        ...

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        """Strongly consistent follow state."""
        ...

    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        """How the actor relates to each distinct target (strongly consistent)."""
        ...

    async def is_private(self, user_id: int, *, consistent: bool = False) -> bool:
        """Whether the account is private; ``consistent`` bypasses any cache."""
        ...

    async def set_private(self, user_id: int, private: bool) -> None:
        """Store the account's privacy setting (requests are not touched here)."""
        ...

    async def list_edges(
        self, direction: Direction, user_id: int, limit: int, after: Cursor | None, *, warm: bool = True
    ) -> EdgePage:
        """Up to ``limit`` entries, newest first, strictly after ``after``. ``warm=False``: a
        bulk reader's call, which must not start filling the whole list into a cache."""
        ...

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        """Incoming pending requests, newest first, strictly after ``after``."""
        ...

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        """Which of ``others`` are in ``user_id``'s list (FOLLOWERS or FOLLOWING), with the follow times."""
        ...

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Counters of each distinct user (zeros for users never counted)."""
        ...

    async def close(self) -> None:
        """Release connections and threads."""
        ...
