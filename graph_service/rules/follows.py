"""Follow, Unfollow and RemoveFollower.

A Follow of a public account makes the follow; of a private one, a pending request. It passes the
abuse limits of SPEC §7.2 here: it takes a rate-limit ticket (``follow_tickets.py``) and hands the
store the following cap, which the store makes a condition of the same transaction.

Every acknowledged write tells ``GraphChanges`` what it settled between the two accounts, also
when it found that state already there, before it returns: that is what keeps the caches exact.
"""

from __future__ import annotations

from graph_service.domain.errors import Blocked, FollowLimit, RateLimited, SelfFollow, Unavailable
from graph_service.domain.ids import require_id, require_pair
from graph_service.domain.models import BudgetGrant, FollowResult, FollowState, Made
from graph_service.domain.ports import GraphChanges, GraphReads, GraphWrites
from graph_service.domain.times import now_us
from graph_service.rules.accepting import Acceptance, AccountIsPrivate
from graph_service.rules.follow_tickets import FollowTickets
from graph_service.rules.presence import Presence
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["Follows"]


class Follows:
    def __init__(
        self,
        writes: GraphWrites,
        changes: GraphChanges,
        reads: GraphReads,
        acceptance: Acceptance,
        tickets: FollowTickets,
        presence: Presence,
        *,
        max_following: int,
    ) -> None:
        self._presence = presence
        self._writes = writes
        self._changes = changes
        self._reads = reads
        self._acceptance = acceptance
        self._tickets = tickets
        self._max_following = max_following

    async def follow(self, follower_id: int, followee_id: int) -> FollowState:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            raise SelfFollow(follower_id)
        await self._presence.require(follower_id, followee_id)
        private, grant = await self._tickets.take_during(follower_id, self._reads.is_private(followee_id))
        if not grant.granted:
            await self._refuse_unless_made(follower_id, followee_id, grant)
        try:
            result = await self._follow_or_ask(follower_id, followee_id, private=private)
        except (Blocked, FollowLimit):
            await self._tickets.give_back(follower_id, grant)  # refused by the store: nothing was made
            raise
        # Any other failure, a cancellation included, may come after a write the store committed
        # (boto3 runs on a thread that finishes it): the ticket stays counted.
        if not result.created:
            await self._tickets.give_back(follower_id, grant)  # a repeat costs no budget
        else:
            requested = result.state is FollowState.REQUESTED
            await self._presence.after_made(follower_id, followee_id, result.at_us, request=requested)
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
                if await self._acceptance.accept_settled(followee_id, follower_id, while_public=True) is not None:
                    return FollowState.FOLLOWING
            except AccountIsPrivate:
                pass  # private again already: the request stands
        return result.state

    async def _refuse_unless_made(self, follower_id: int, followee_id: int, grant: BudgetGrant) -> None:
        """Over the rate limit: a repeat (or a pending request an accept can finish) still goes
        ahead, since it makes no new follow; a block is said as such; anything else is RATE_LIMITED."""
        pair = await self._writes.pair(follower_id, followee_id)
        if pair.blocked:
            raise Blocked(follower_id, followee_id)
        if pair.following is None and pair.requested is None:
            raise RateLimited(follower_id, self._tickets.limit, self._tickets.window_seconds, grant.retry_after_seconds)

    async def _follow_or_ask(self, follower_id: int, followee_id: int, *, private: bool) -> FollowResult:
        """Follow a public account, or ask to follow a private one; a repeat finds what the first
        call made. A pending request to a public account (left by an account turning public) is
        accepted instead. A new follow or request past the following cap is FOLLOW_LIMIT."""
        cap = self._max_following
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
                accepted = await self._acceptance.accept(followee_id, follower_id, while_public=False)
                if accepted is not None:
                    # Not a new follow for the rate limit: the request was counted when it was made.
                    return FollowResult(False, accepted.at_us)
            elif made is Made.AT_CAP:
                raise FollowLimit(follower_id, cap)
            # What refused the write is gone again (a racing unfollow or reject): go again.
        raise Unavailable("follow kept racing concurrent writes")

    async def unfollow(self, follower_id: int, followee_id: int) -> None:
        require_id(follower_id, "follower_id")
        require_id(followee_id, "followee_id")
        if follower_id == followee_id:
            return  # there is never such an edge; unfollow is idempotent
        await self._remove(follower_id, followee_id)

    async def remove_follower(self, user_id: int, follower_id: int) -> None:
        require_pair(user_id, "user_id", follower_id, "follower_id")
        await self._remove(follower_id, user_id)

    async def _remove(self, follower_id: int, followee_id: int) -> None:
        """Remove the follow and withdraw a pending request, whichever exist (archived ones too)."""
        await self._presence.forget_archived(follower_id, followee_id)
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
