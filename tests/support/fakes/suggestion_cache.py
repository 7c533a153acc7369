"""Kept suggestions in memory: ``SuggestionCache`` as the Redis ``GraphCache`` does it, epochs
included, for unit tests only (held to it by ``tests/support/contracts/suggestion_cache.py``)."""

from __future__ import annotations

__all__ = ["FakeSuggestionCache"]


class FakeSuggestionCache:
    def __init__(self, *, down: bool = False) -> None:
        self.values: dict[int, str] = {}
        self.epochs: dict[int, int] = {}
        self.reads = 0
        self.down = down
        """Redis cannot be reached: nothing is served, no fill is tried, and nothing fails."""

    def bump(self, user_id: int) -> None:
        """What every write touching the user does: moves its epoch and drops its suggestions."""
        self.epochs[user_id] = self.epochs.get(user_id, 0) + 1
        self.values.pop(user_id, None)

    async def get_suggestions(self, user_id: int) -> str | None:
        self.reads += 1
        return None if self.down else self.values.get(user_id)

    async def epoch(self, user_id: int) -> str | None:
        return None if self.down else str(self.epochs.get(user_id, 0))

    async def fill_suggestions(self, user_id: int, value: str, seen: str, ttl_seconds: int) -> None:
        if not self.down and str(self.epochs.get(user_id, 0)) == seen:
            self.values[user_id] = value
