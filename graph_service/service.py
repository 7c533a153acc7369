"""The service layer: validation, paging and the graph rules, over an ``EdgeStore``.

Transport-free: it speaks in ints and domain errors; ``servicer.py`` speaks gRPC.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from graph_service.errors import (
    BatchTooLarge,
    InvalidLimit,
    InvalidPageSize,
    InvalidUserId,
    RequestNotFound,
    SelfFollow,
    SelfRelation,
)
from graph_service.intersections import Intersections
from graph_service.models import Counts, Cursor, Direction, Edge, EdgePage, FollowState, Relationship
from graph_service.page_tokens import PageTokenCodec
from graph_service.settings import Settings
from graph_service.store.edge_store import AccountIsPrivate, EdgeStore
from graph_service.suggestions import MAX_SUGGESTIONS, Suggester, Suggestion

__all__ = ["FollowState", "GraphService", "Page", "page_size", "require_pair", "require_user_id"]

log = structlog.get_logger(__name__)
MAX_USER_ID = 2**64 - 1
DEFAULT_SUGGESTIONS = 20
SWEEP_BATCH = 100


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[Edge]
    next_page_token: str


def require_user_id(value: int, field: str) -> int:
    if not 0 < value <= MAX_USER_ID:
        raise InvalidUserId(field)
    return value


def page_size(requested: int, default: int, maximum: int) -> int:
    """AIP-158: 0 is the default, too large is clamped, negative is an error."""
    if requested < 0:
        raise InvalidPageSize(requested)
    return min(requested or default, maximum)


def require_pair(first: int, first_field: str, second: int, second_field: str) -> None:
    """Two valid IDs of two different accounts."""
    require_user_id(first, first_field)
    require_user_id(second, second_field)
    if first == second:
        raise SelfRelation(first)


class GraphService:
    def __init__(self, store: EdgeStore, settings: Settings, suggester: Suggester) -> None:
        self._store = store
        self._settings = settings
        self._tokens = PageTokenCodec(settings.page_token_secret)
        self._intersections = Intersections(store, settings.intersection_candidate_limit)
        self._suggester = suggester

    # -- follows and requests -------------------------------------------------------------

    async def follow(self, follower_id: int, followee_id: int) -> FollowState:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            raise SelfFollow(follower_id)
        private = await self._store.is_private(followee_id)
        result = await self._store.follow(follower_id, followee_id, private=private)
        # A new request: the account may have turned public after the privacy read, and its sweep
        # of pending requests may have run before this request committed; then nobody else would
        # accept it.
        if (
            result.created
            and result.state is FollowState.REQUESTED
            and not await self._store.is_private(followee_id, consistent=True)
        ):
            try:
                if await self._store.accept_request(followee_id, follower_id, while_public=True) is not None:
                    return FollowState.FOLLOWING
            except AccountIsPrivate:
                pass  # private again already: the request stands
        return result.state

    async def unfollow(self, follower_id: int, followee_id: int) -> None:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return  # there is never such an edge; unfollow is idempotent
        await self._store.unfollow(follower_id, followee_id)

    async def remove_follower(self, user_id: int, follower_id: int) -> None:
        require_pair(user_id, "user_id", follower_id, "follower_id")
        await self._store.unfollow(follower_id, user_id)

    async def accept_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        if await self._store.accept_request(user_id, requester_id) is None:
            raise RequestNotFound(user_id, requester_id)

    async def reject_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        await self._store.reject_request(user_id, requester_id)

    async def set_privacy(self, user_id: int, private: bool) -> None:
        """Private: later follows become requests; followers stay. Public: every pending request
        is accepted before the call returns (a failed call, retried, finishes the sweep)."""
        require_user_id(user_id, "user_id")
        await self._store.set_private(user_id, private)
        if private:
            return
        accepted = 0
        while True:
            page = await self._store.list_requests(user_id, SWEEP_BATCH, None)
            if not page.entries:
                break
            outcomes = await asyncio.gather(
                *(self._store.accept_request(user_id, e.user_id, while_public=True) for e in page.entries),
                return_exceptions=True,
            )
            failures = [o for o in outcomes if isinstance(o, BaseException)]
            if any(isinstance(f, AccountIsPrivate) for f in failures):
                log.info("pending_requests_sweep_stopped_account_private", user_id=user_id, accepted=accepted)
                return  # a later SetPrivacy(private) won: the remaining requests stay pending
            if failures:
                raise failures[0]
            accepted += len(page.entries)
        if accepted:
            log.info("pending_requests_accepted", user_id=user_id, count=accepted)

    async def list_requests(self, user_id: int, page_size: int, page_token: str) -> Page:
        require_user_id(user_id, "user_id")
        return await self._paged(
            f"requests:{user_id}", page_size, page_token, lambda n, a: self._store.list_requests(user_id, n, a)
        )

    # -- blocks ---------------------------------------------------------------------------

    async def block(self, blocker_id: int, blocked_id: int) -> None:
        require_pair(blocker_id, "blocker_id", blocked_id, "blocked_id")
        await self._store.block(blocker_id, blocked_id)

    async def unblock(self, blocker_id: int, blocked_id: int) -> None:
        require_pair(blocker_id, "blocker_id", blocked_id, "blocked_id")
        await self._store.unblock(blocker_id, blocked_id)

    # -- reads ----------------------------------------------------------------------------

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        require_user_id(follower_id, "follower_id")
        require_user_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return False
        return await self._store.is_following(follower_id, followee_id)

    def page_size(self, requested: int) -> int:
        return page_size(requested, self._settings.default_page_size, self._settings.max_page_size)

    async def _paged(
        self,
        scope: str,
        page_size: int,
        page_token: str,
        fetch: Callable[[int, Cursor | None], Awaitable[EdgePage]],
    ) -> Page:
        """One AIP-158 page: validate size and token (bound to ``scope``), fetch, sign the next token."""
        limit = self.page_size(page_size)
        after = self._tokens.decode(scope, page_token)
        page = await fetch(limit, after)
        token = self._tokens.encode(scope, page.entries[-1]) if page.has_more and page.entries else ""
        return Page(entries=page.entries, next_page_token=token)

    async def list_edges(self, direction: Direction, user_id: int, page_size: int, page_token: str) -> Page:
        require_user_id(user_id, "user_id")
        return await self._paged(
            f"{direction.value}:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._store.list_edges(direction, user_id, n, a),
        )

    async def list_known_followers(self, viewer_id: int, user_id: int, page_size: int, page_token: str) -> Page:
        require_user_id(viewer_id, "viewer_id")
        require_user_id(user_id, "user_id")
        return await self._paged(
            f"known:{viewer_id}:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._intersections.known_followers(user_id, viewer_id, n, a),
        )

    async def list_mutual_follows(self, user_id: int, page_size: int, page_token: str) -> Page:
        require_user_id(user_id, "user_id")
        return await self._paged(
            f"mutual:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._intersections.known_followers(user_id, user_id, n, a),
        )

    async def get_relationships(self, actor_id: int, target_ids: Sequence[int]) -> list[tuple[int, Relationship]]:
        require_user_id(actor_id, "actor_id")
        self._require_batch(target_ids, "target_ids")
        found = await self._store.relationships(actor_id, target_ids) if target_ids else {}
        return [(t, found[t]) for t in target_ids]

    async def suggest_follows(self, user_id: int, limit: int) -> list[Suggestion]:
        require_user_id(user_id, "user_id")
        if not 0 <= limit <= MAX_SUGGESTIONS:
            raise InvalidLimit(limit, MAX_SUGGESTIONS)
        return await self._suggester.suggest(user_id, limit or DEFAULT_SUGGESTIONS)

    def _require_batch(self, ids: Sequence[int], field: str) -> None:
        if len(ids) > self._settings.max_batch_size:
            raise BatchTooLarge(len(ids), self._settings.max_batch_size)
        for index, value in enumerate(ids):
            require_user_id(value, f"{field}[{index}]")

    async def get_counts(self, user_id: int) -> Counts:
        require_user_id(user_id, "user_id")
        return (await self._store.get_counts([user_id]))[user_id]

    async def batch_get_counts(self, user_ids: Sequence[int]) -> list[tuple[int, Counts]]:
        self._require_batch(user_ids, "user_ids")
        found = await self._store.get_counts(user_ids) if user_ids else {}
        return [(u, found[u]) for u in user_ids]
