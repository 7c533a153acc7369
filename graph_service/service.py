"""The service layer: validation, paging and the graph rules, over an ``EdgeStore``.

Transport-free: it speaks in ints and domain errors; ``servicer.py`` speaks gRPC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from graph_service.errors import BatchTooLarge, InvalidPageSize, InvalidUserId, SelfFollow
from graph_service.models import Counts, Direction, Edge
from graph_service.page_tokens import PageTokenCodec
from graph_service.settings import Settings
from graph_service.store.edge_store import EdgeStore

__all__ = ["FollowState", "GraphService", "Page"]

MAX_USER_ID = 2**64 - 1


class FollowState(Enum):
    FOLLOWING = "following"
    REQUESTED = "requested"


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[Edge]
    next_page_token: str


def require_user_id(value: int, field: str) -> int:
    if not 0 < value <= MAX_USER_ID:
        raise InvalidUserId(field)
    return value


class GraphService:
    def __init__(self, store: EdgeStore, settings: Settings) -> None:
        self._store = store
        self._settings = settings
        self._tokens = PageTokenCodec(settings.page_token_secret)

    async def follow(self, follower_id: int, followee_id: int) -> FollowState:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            raise SelfFollow(follower_id)
        await self._store.follow(follower_id, followee_id)
        return FollowState.FOLLOWING

    async def unfollow(self, follower_id: int, followee_id: int) -> None:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return  # there is never such an edge; unfollow is idempotent
        await self._store.unfollow(follower_id, followee_id)

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return False
        return await self._store.is_following(follower_id, followee_id)

    def page_size(self, requested: int) -> int:
        """AIP-158: 0 is the default, too large is clamped, negative is an error."""
        if requested < 0:
            raise InvalidPageSize(requested)
        if requested == 0:
            return self._settings.default_page_size
        return min(requested, self._settings.max_page_size)

    async def list_edges(self, direction: Direction, user_id: int, page_size: int, page_token: str) -> Page:
        require_user_id(user_id, "user_id")
        limit = self.page_size(page_size)
        scope = f"{direction.value}:{user_id}"
        after = self._tokens.decode(scope, page_token)
        page = await self._store.list_edges(direction, user_id, limit, after)
        token = self._tokens.encode(scope, page.entries[-1]) if page.has_more and page.entries else ""
        return Page(entries=page.entries, next_page_token=token)

    async def get_counts(self, user_id: int) -> Counts:
        require_user_id(user_id, "user_id")
        return (await self._store.get_counts([user_id]))[user_id]

    async def batch_get_counts(self, user_ids: Sequence[int]) -> list[tuple[int, Counts]]:
        if len(user_ids) > self._settings.max_batch_size:
            raise BatchTooLarge(len(user_ids), self._settings.max_batch_size)
        for index, user_id in enumerate(user_ids):
            require_user_id(user_id, f"user_ids[{index}]")
        found = await self._store.get_counts(user_ids) if user_ids else {}
        return [(u, found[u]) for u in user_ids]
