"""Turning a pending follow request into a follow: AcceptFollowRequest, SetPrivacy's sweep of
pending requests, and a Follow that finds its own request pending to an account now public."""

from __future__ import annotations

from graph_service.domain.errors import Unavailable
from graph_service.domain.models import AcceptOutcome, FollowResult
from graph_service.domain.ports import GraphChanges, GraphWrites
from graph_service.domain.times import now_us
from graph_service.rules.presence import Presence
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["Acceptance", "AccountIsPrivate"]


class AccountIsPrivate(Exception):
    """An accept made on behalf of a public account found it private: the request stays pending."""


class Acceptance:
    def __init__(self, writes: GraphWrites, changes: GraphChanges, presence: Presence) -> None:
        self._writes = writes
        self._changes = changes
        self._presence = presence

    async def accept(self, user_id: int, requester_id: int, *, while_public: bool) -> FollowResult | None:
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
                await self._presence.after_made(requester_id, user_id, at, request=False)
                return FollowResult(True, at)
            if outcome is AcceptOutcome.PRIVATE:
                raise AccountIsPrivate(user_id)
        raise Unavailable("accept kept racing concurrent writes")

    async def accept_settled(self, user_id: int, requester_id: int, *, while_public: bool) -> FollowResult | None:
        """``accept``, and the follow it made or found settled."""
        result = await self.accept(user_id, requester_id, while_public=while_public)
        if result is not None:
            await self._changes.follow_settled(requester_id, user_id, result.at_us, following=True)
        return result
