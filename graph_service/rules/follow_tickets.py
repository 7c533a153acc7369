"""A Follow's rate-limit ticket (SPEC §7.2), taken from a ``FollowBudget`` before the follow writes.

The ticket is given back when the follow surely made nothing new (a repeat, a refusal, the accept
of its own earlier request, a failure before any write), so concurrent follows of one actor never
pass the limit together and only follows that created an edge or a request stay counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from graph_service.domain.models import BudgetGrant
from graph_service.domain.ports import FollowBudget

__all__ = ["FollowTickets"]


class FollowTickets:
    def __init__(self, budget: FollowBudget, limit: int, window_seconds: int) -> None:
        """``limit`` 0: no limit (every follow is granted, nothing is asked of the budget)."""
        self._budget = budget
        self.limit = limit
        self.window_seconds = window_seconds
        self._returns: set[asyncio.Future[Any]] = set()

    async def take_during(self, follower_id: int, read: Awaitable[bool]) -> tuple[bool, BudgetGrant]:
        """``read``'s result and the follower's ticket: the Redis round trip of the ticket overlaps
        the read. If the follow fails or is cancelled here, the ticket is given back once it is
        taken (even if that is after this call ended)."""
        if not self.limit:
            return await read, BudgetGrant(granted=True)
        take = asyncio.ensure_future(self._budget.take(follower_id, self.limit, self.window_seconds))
        self._hold(take)
        try:
            value = await read
            grant = await asyncio.shield(take)
        except BaseException:
            take.add_done_callback(lambda done: self._give_back_taken(follower_id, done))
            raise
        return value, grant

    async def give_back(self, follower_id: int, grant: BudgetGrant) -> None:
        """Uncount the ticket of a follow that made nothing (nothing to do if it was not counted)."""
        if grant.counted:
            await self._budget.give_back(follower_id, grant.ticket)

    def _give_back_taken(self, follower_id: int, take: asyncio.Future[BudgetGrant]) -> None:
        if take.cancelled() or take.exception() is not None or not take.result().counted:
            return
        self._hold(asyncio.ensure_future(self._budget.give_back(follower_id, take.result().ticket)))

    def _hold(self, task: asyncio.Future[Any]) -> None:
        """Keep a background task until it is done: the loop keeps only a weak reference."""
        self._returns.add(task)
        task.add_done_callback(self._returns.discard)
