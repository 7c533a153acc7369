"""The service layer: validation, paging and every rule of the graph, over role interfaces.

Transport-free: it speaks in ints and domain errors (``servicer.py`` speaks gRPC), and storage-free:
it decides, the adapters store and fetch. A write is tried as one conditional write; when a
condition refuses it (another write between the two accounts came first), the pair is read again
as one snapshot and the decision is made afresh, so concurrent writes serialise in the store.

Every acknowledged write then tells ``GraphChanges`` what it settled between the two accounts, also
when it found that state already there, before it returns: that is what keeps the caches exact.

A ``Follow`` also passes the abuse limits of SPEC §7.2 here: it takes a rate-limit ticket from a
``FollowBudget`` (given back when the follow surely made nothing new: a repeat, a refusal, the
accept of its own earlier request, a failure before any write), and it hands the store the
following cap, which the store makes a condition of the same transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from graph_service.api.identity_memo import IdentityMemo
from graph_service.api.intersections import Intersections
from graph_service.api.page_tokens import PageTokenCodec
from graph_service.api.paging import Page, page_size
from graph_service.api.suggestions import MAX_SUGGESTIONS, Suggester, Suggestion
from graph_service.domain.errors import (
    BatchTooLarge,
    Blocked,
    FollowLimit,
    InvalidLimit,
    RateLimited,
    RequestNotFound,
    SelfFollow,
    Unavailable,
)
from graph_service.domain.ids import require_id, require_pair
from graph_service.domain.models import (
    AcceptOutcome,
    BudgetGrant,
    Counts,
    Cursor,
    Direction,
    EdgePage,
    FollowResult,
    FollowState,
    Made,
    PairState,
    Relationship,
)
from graph_service.domain.ports import FollowBudget, GraphChanges, GraphReads, GraphWrites, RelationshipReads
from graph_service.domain.times import now_us
from graph_service.settings import Settings

__all__ = ["REPLIES_REMEMBERED", "GraphService"]

log = structlog.get_logger(__name__)
RACE_ATTEMPTS = 8
"""Times one write reads the pair again and decides afresh before giving up as ``Unavailable``."""
REPLIES_REMEMBERED = 1024
"""First pages of followers and followings (and, in the servicer, their replies) kept by the page
object they came from: at the default page size of 50, about 50,000 entries at most."""
DEFAULT_SUGGESTIONS = 20
SWEEP_BATCH = 100


class _AccountIsPrivate(Exception):
    """An accept made on behalf of a public account found it private: the request stays pending."""


class GraphService:
    def __init__(
        self,
        writes: GraphWrites,
        changes: GraphChanges,
        reads: GraphReads,
        relationships: RelationshipReads,
        suggester: Suggester,
        settings: Settings,
        *,
        budget: FollowBudget,
    ) -> None:
        self._writes = writes
        self._budget = budget
        self._returns: set[asyncio.Future[Any]] = set()
        self._changes = changes
        self._reads = reads
        self._relationships = relationships
        self._suggester = suggester
        self._settings = settings
        self._tokens = PageTokenCodec(*settings.page_token_secrets)
        self._first_pages: IdentityMemo[Page] = IdentityMemo(REPLIES_REMEMBERED)
        """Signed first pages by the page object they came from (``identity_memo.py``)."""
        self._intersections = Intersections(reads, settings.intersection_candidate_limit)

    # -- follows and requests -------------------------------------------------------------

    async def follow(self, follower_id: int, followee_id: int) -> FollowState:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            raise SelfFollow(follower_id)
        private, grant = await self._privacy_and_budget(follower_id, followee_id)
        if not grant.granted:
            await self._refuse_unless_made(follower_id, followee_id, grant)
        try:
            result = await self._follow_or_ask(follower_id, followee_id, private=private)
        except (Blocked, FollowLimit):
            await self._give_back(follower_id, grant)  # refused by the store: nothing was made
            raise
        # Any other failure, a cancellation included, may come after a write the store committed
        # (boto3 runs on a thread that finishes it): the ticket stays counted.
        if not result.created:
            await self._give_back(follower_id, grant)  # a repeat costs no budget
        if result.state is FollowState.FOLLOWING:
            await self._changes.follow_settled(follower_id, followee_id, result.at_us, following=True)
        else:
            await self._changes.pair_settled(follower_id, followee_id)
        # A new request: the account may have turned public after the privacy read, and its sweep
        # of pending requests may have run before this request committed; then nobody else would
        # accept it.
        if (
            result.created
            and result.state is FollowState.REQUESTED
            and not await self._writes.is_private_now(followee_id)
        ):
            try:
                if await self._accept_settled(followee_id, follower_id, while_public=True) is not None:
                    return FollowState.FOLLOWING
            except _AccountIsPrivate:
                pass  # private again already: the request stands
        return result.state

    async def _privacy_and_budget(self, follower_id: int, followee_id: int) -> tuple[bool, BudgetGrant]:
        """Whether the followee is private, and the follower's rate-limit ticket: the Redis round
        trip of the ticket overlaps the privacy read. If the follow fails or is cancelled here, the
        ticket is given back once it is taken (even if that is after this call ended)."""
        limit = self._settings.follow_rate_limit
        if not limit:
            return await self._reads.is_private(followee_id), BudgetGrant(granted=True)
        take = asyncio.ensure_future(self._budget.take(follower_id, limit, self._settings.follow_rate_window_seconds))
        self._hold(take)
        try:
            private = await self._reads.is_private(followee_id)
            grant = await asyncio.shield(take)
        except BaseException:
            take.add_done_callback(lambda done: self._give_back_taken(follower_id, done))
            raise
        return private, grant

    def _give_back_taken(self, follower_id: int, take: asyncio.Future[BudgetGrant]) -> None:
        if take.cancelled() or take.exception() is not None or not take.result().counted:
            return
        self._hold(asyncio.ensure_future(self._budget.give_back(follower_id, take.result().ticket)))

    def _hold(self, task: asyncio.Future[Any]) -> None:
        """Keep a background task until it is done: the loop keeps only a weak reference."""
        self._returns.add(task)
        task.add_done_callback(self._returns.discard)

    async def _refuse_unless_made(self, follower_id: int, followee_id: int, grant: BudgetGrant) -> None:
        """Over the rate limit: a repeat (or a pending request an accept can finish) still goes
        ahead, since it makes no new follow; a block is said as such; anything else is RATE_LIMITED."""
        pair = await self._writes.pair(follower_id, followee_id)
        if pair.blocked:
            raise Blocked(follower_id, followee_id)
        if pair.following is None and pair.requested is None:
            raise RateLimited(
                follower_id,
                self._settings.follow_rate_limit,
                self._settings.follow_rate_window_seconds,
                grant.retry_after_seconds,
            )

    async def _give_back(self, follower_id: int, grant: BudgetGrant) -> None:
        if grant.counted:
            await self._budget.give_back(follower_id, grant.ticket)

    async def _follow_or_ask(self, follower_id: int, followee_id: int, *, private: bool) -> FollowResult:
        """Follow a public account, or ask to follow a private one; a repeat finds what the first
        call made. A pending request to a public account (left by an account turning public) is
        accepted instead. A new follow or request past the following cap is FOLLOW_LIMIT."""
        cap = self._settings.max_following
        for _ in range(RACE_ATTEMPTS):
            at = now_us()
            make = self._writes.add_request if private else self._writes.add_edge
            made = await make(follower_id, followee_id, at, cap=cap)
            if made is Made.CREATED:
                return FollowResult(True, at, FollowState.REQUESTED if private else FollowState.FOLLOWING)
            pair = await self._writes.pair(follower_id, followee_id)
            if pair.blocked:
                raise Blocked(follower_id, followee_id)
            if pair.following is not None:
                return FollowResult(False, pair.following)
            if pair.requested is not None:
                if private:
                    return FollowResult(False, pair.requested, FollowState.REQUESTED)
                accepted = await self._accept(followee_id, follower_id, while_public=False)
                if accepted is not None:
                    # Not a new follow for the rate limit: the request was counted when it was made.
                    return FollowResult(False, accepted.at_us)
            elif made is Made.AT_CAP:
                raise FollowLimit(follower_id, cap)
            # What refused the write is gone again (a racing unfollow or reject): go again.
        raise Unavailable("follow kept racing concurrent writes")

    async def _accept(self, user_id: int, requester_id: int, *, while_public: bool) -> FollowResult | None:
        """Turn the pending request into a follow; the follow if there is one already, else None.

        ``while_public``: an accept made on behalf of a public account (the sweep of SetPrivacy, a
        follower's own re-check) must not commit after the account turned private again."""
        for _ in range(RACE_ATTEMPTS):
            requested_at = await self._writes.request_at(user_id, requester_id)
            if requested_at is None:
                edge_at = await self._writes.edge_at(requester_id, user_id)
                return None if edge_at is None else FollowResult(False, edge_at)
            at = now_us()
            outcome = await self._writes.accept(user_id, requester_id, requested_at, at, while_public=while_public)
            if outcome is AcceptOutcome.ACCEPTED:
                return FollowResult(True, at)
            if outcome is AcceptOutcome.PRIVATE:
                raise _AccountIsPrivate(user_id)
        raise Unavailable("accept kept racing concurrent writes")

    async def _accept_settled(self, user_id: int, requester_id: int, *, while_public: bool) -> FollowResult | None:
        """``_accept``, and the follow it made or found settled."""
        result = await self._accept(user_id, requester_id, while_public=while_public)
        if result is not None:
            await self._changes.follow_settled(requester_id, user_id, result.at_us, following=True)
        return result

    async def _remove(self, follower_id: int, followee_id: int) -> None:
        """Remove the follow and withdraw a pending request, whichever exist."""
        for _ in range(RACE_ATTEMPTS):
            pair = await self._writes.pair(follower_id, followee_id)
            nothing = pair.following is None and pair.requested is None
            if nothing or await self._writes.remove(
                follower_id, followee_id, edge_at=pair.following, request_at=pair.requested
            ):
                await self._changes.follow_settled(follower_id, followee_id, pair.following, following=False)
                return
            # An item changed under us (removed, or re-made with a new timestamp): read again.
        raise Unavailable("unfollow kept racing concurrent writes")

    async def unfollow(self, follower_id: int, followee_id: int) -> None:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return  # there is never such an edge; unfollow is idempotent
        await self._remove(follower_id, followee_id)

    async def remove_follower(self, user_id: int, follower_id: int) -> None:
        require_pair(user_id, "user_id", follower_id, "follower_id")
        await self._remove(follower_id, user_id)

    async def accept_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        if await self._accept_settled(user_id, requester_id, while_public=False) is None:
            raise RequestNotFound(user_id, requester_id)

    async def reject_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        for _ in range(RACE_ATTEMPTS):
            requested_at = await self._writes.request_at(user_id, requester_id)
            if requested_at is None or await self._writes.remove(
                requester_id, user_id, edge_at=None, request_at=requested_at
            ):
                await self._changes.pair_settled(requester_id, user_id)
                return
        raise Unavailable("reject kept racing concurrent writes")

    async def set_privacy(self, user_id: int, private: bool) -> None:
        """Private: later follows become requests; followers stay. Public: every pending request
        is accepted before the call returns (a failed call, retried, finishes the sweep)."""
        require_id(user_id, "user_id")
        await self._writes.set_private(user_id, private)
        await self._changes.privacy_settled(user_id)
        if private:
            return
        accepted = 0
        while True:
            page = await self._reads.list_requests(user_id, SWEEP_BATCH, None)
            if not page.entries:
                break
            outcomes = await asyncio.gather(
                *(self._accept_settled(user_id, e.user_id, while_public=True) for e in page.entries),
                return_exceptions=True,
            )
            failures = [o for o in outcomes if isinstance(o, BaseException)]
            if any(isinstance(f, _AccountIsPrivate) for f in failures):
                log.info("pending_requests_sweep_stopped_account_private", user_id=user_id, accepted=accepted)
                return  # a later SetPrivacy(private) won: the remaining requests stay pending
            if failures:
                raise failures[0]
            accepted += len(page.entries)
        if accepted:
            log.info("pending_requests_accepted", user_id=user_id, count=accepted)

    async def list_requests(self, user_id: int, page_size: int, page_token: str) -> Page:
        require_id(user_id, "user_id")
        return await self._paged(
            f"requests:{user_id}", page_size, page_token, lambda n, a: self._reads.list_requests(user_id, n, a)
        )

    # -- blocks ---------------------------------------------------------------------------

    async def block(self, blocker_id: int, blocked_id: int) -> None:
        """Put the block and delete every follow and request between the two in one write,
        conditioned on what was read: a follow that commits in between refuses it, and the next
        attempt deletes that follow too."""
        require_pair(blocker_id, "blocker_id", blocked_id, "blocked_id")
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

    # -- reads ----------------------------------------------------------------------------

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return False
        return await self._reads.is_following(follower_id, followee_id)

    async def _paged(
        self,
        scope: str,
        requested_size: int,
        page_token: str,
        fetch: Callable[[int, Cursor | None], Awaitable[EdgePage]],
        *,
        remember: bool = False,
    ) -> Page:
        """One AIP-158 page: validate size and token (bound to ``scope``), fetch, sign the next token."""
        limit = page_size(requested_size, self._settings.default_page_size, self._settings.max_page_size)
        after = self._tokens.decode_edge(scope, page_token)
        page = await fetch(limit, after)

        def signed() -> Page:
            token = self._tokens.encode(scope, page.entries[-1]) if page.has_more and page.entries else ""
            return Page(entries=page.entries, next_page_token=token)

        if not remember or after is not None:  # the near cache keeps first lists' pages only
            return signed()
        return self._first_pages.get(scope, page, signed)

    async def list_edges(self, direction: Direction, user_id: int, page_size: int, page_token: str) -> Page:
        require_id(user_id, "user_id")
        return await self._paged(
            f"{direction.value}:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._reads.list_edges(direction, user_id, n, a),
            remember=True,
        )

    async def list_known_followers(self, viewer_id: int, user_id: int, page_size: int, page_token: str) -> Page:
        require_id(viewer_id, "viewer_id")
        require_id(user_id, "user_id")
        return await self._paged(
            f"known:{viewer_id}:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._intersections.known_followers(user_id, viewer_id, n, a),
        )

    async def list_mutual_follows(self, user_id: int, page_size: int, page_token: str) -> Page:
        require_id(user_id, "user_id")
        return await self._paged(
            f"mutual:{user_id}",
            page_size,
            page_token,
            lambda n, a: self._intersections.known_followers(user_id, user_id, n, a),
        )

    async def get_relationships(self, actor_id: int, target_ids: Sequence[int]) -> list[tuple[int, Relationship]]:
        require_id(actor_id, "actor_id")
        self._require_batch(target_ids, "target_ids")
        found = await self._relationships.relationships(actor_id, target_ids) if target_ids else {}
        return [(t, found[t]) for t in target_ids]

    async def suggest_follows(self, user_id: int, limit: int) -> list[Suggestion]:
        require_id(user_id, "user_id")
        if not 0 <= limit <= MAX_SUGGESTIONS:
            raise InvalidLimit(limit, MAX_SUGGESTIONS)
        return await self._suggester.suggest(user_id, limit or DEFAULT_SUGGESTIONS)

    def _require_batch(self, ids: Sequence[int], field: str) -> None:
        if len(ids) > self._settings.max_batch_size:
            raise BatchTooLarge(len(ids), self._settings.max_batch_size)
        for index, value in enumerate(ids):
            require_id(value, f"{field}[{index}]")

    async def get_counts(self, user_id: int) -> Counts:
        require_id(user_id, "user_id")
        return (await self._reads.get_counts([user_id]))[user_id]

    async def batch_get_counts(self, user_ids: Sequence[int]) -> list[tuple[int, Counts]]:
        self._require_batch(user_ids, "user_ids")
        found = await self._reads.get_counts(user_ids) if user_ids else {}
        return [(u, found[u]) for u in user_ids]
