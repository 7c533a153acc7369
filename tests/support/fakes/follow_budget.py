"""The follow rate limit's ledger in memory, with the behaviour of ``RedisFollowBudget``, for unit tests only.

``tests/support/contracts/follow_budget.py`` holds it and the Redis ledger to one behaviour."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from graph_service.domain.models import BudgetGrant

__all__ = ["FakeFollowBudget"]


class FakeFollowBudget:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.counted: dict[int, dict[str, int]] = {}
        """actor -> ticket -> when it was counted (ms)."""
        self._tickets = itertools.count(1)

    async def take(self, actor_id: int, limit: int, window_seconds: int) -> BudgetGrant:
        now, window = int(self._clock() * 1000), window_seconds * 1000
        mine = {t: at for t, at in self.counted.get(actor_id, {}).items() if at > now - window}
        self.counted[actor_id] = mine
        if len(mine) >= limit:
            return BudgetGrant(granted=False, retry_after_seconds=max(min(mine.values()) + window - now, 1) / 1000)
        ticket = f"t{next(self._tickets)}"
        mine[ticket] = now
        return BudgetGrant(granted=True, ticket=ticket)

    async def give_back(self, actor_id: int, ticket: str) -> None:
        self.counted.get(actor_id, {}).pop(ticket, None)
