"""The interface every edge store (DynamoDB, the write-through cache) implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from graph_service.models import Counts, Cursor, Direction, EdgePage, FollowResult

__all__ = ["EdgeStore"]


class EdgeStore(Protocol):
    async def follow(self, follower_id: int, followee_id: int) -> FollowResult:
        """Create the edge unless it exists; never half-written."""
        ...

    async def unfollow(self, follower_id: int, followee_id: int) -> int | None:
        """Remove the edge if present; the removed edge's timestamp, or None if there was none."""
        ...

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        """Strongly consistent follow state."""
        ...

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        """Up to ``limit`` entries, newest first, strictly after ``after``."""
        ...

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Counters of each distinct user (zeros for users never counted)."""
        ...

    async def close(self) -> None:
        """Release connections and threads."""
        ...
