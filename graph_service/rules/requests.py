"""Follow requests and privacy: SetPrivacy, ListFollowRequests, AcceptFollowRequest, RejectFollowRequest.

An account turning public accepts every pending request before SetPrivacy returns; one turning
private again meanwhile stops the sweep (each accept is conditioned on the account being public).
"""

from __future__ import annotations

import asyncio

import structlog

from graph_service.domain.errors import RequestNotFound, Unavailable
from graph_service.domain.ids import require_id, require_pair
from graph_service.domain.models import Edge
from graph_service.domain.ports import GraphChanges, GraphReads, GraphWrites
from graph_service.rules.accepting import Acceptance, AccountIsPrivate
from graph_service.rules.paging import Page, Pager, no_entries
from graph_service.rules.presence import Presence
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["SWEEP_BATCH", "FollowRequests"]

log = structlog.get_logger(__name__)
SWEEP_BATCH = 100
"""Pending requests SetPrivacy(public) accepts at a time."""


class FollowRequests:
    def __init__(
        self,
        writes: GraphWrites,
        changes: GraphChanges,
        reads: GraphReads,
        acceptance: Acceptance,
        pager: Pager,
        presence: Presence,
    ) -> None:
        self._presence = presence
        self._writes = writes
        self._changes = changes
        self._reads = reads
        self._acceptance = acceptance
        self._pager = pager

    async def accept_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        await self._presence.require(user_id, requester_id)
        if await self._acceptance.accept_settled(user_id, requester_id, while_public=False) is None:
            raise RequestNotFound(user_id, requester_id)

    async def reject_request(self, user_id: int, requester_id: int) -> None:
        require_pair(user_id, "user_id", requester_id, "requester_id")
        await self._presence.forget_archived(requester_id, user_id, edge=False)
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
        await self._changes.settings_settled(user_id)
        if private:
            return
        accepted = 0
        while True:
            page = await self._reads.list_requests(user_id, SWEEP_BATCH, None)
            if not page.entries:
                break
            outcomes = await asyncio.gather(
                *(self._acceptance.accept_settled(user_id, e.user_id, while_public=True) for e in page.entries),
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

    async def list_requests(self, user_id: int, page_size: int, page_token: str) -> Page[Edge]:
        require_id(user_id, "user_id")
        if not await self._presence.in_graph(user_id):
            return await self._pager.page(f"requests:{user_id}", page_size, page_token, no_entries)
        return await self._pager.page(
            f"requests:{user_id}", page_size, page_token, lambda n, a: self._reads.list_requests(user_id, n, a)
        )
