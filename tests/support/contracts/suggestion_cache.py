"""What every implementation of ``SuggestionCache`` must do (the fake, and Redis through ``GraphCache``)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from graph_service.domain.ports import SuggestionCache

__all__ = ["SuggestionCacheContract", "SuggestionCacheUnderTest"]


@dataclass
class SuggestionCacheUnderTest:
    cache: SuggestionCache
    write_touching: Callable[[int], Awaitable[None]]
    """What a committed write between the user and anyone does to the cache."""
    unreachable: SuggestionCache
    """The same kind of cache, whose Redis cannot be reached."""


def _user() -> int:
    return random.randrange(1, 2**40)


class SuggestionCacheContract:
    async def test_a_fill_made_under_the_current_epoch_is_kept(self, suggestions: SuggestionCacheUnderTest) -> None:
        user = _user()
        assert await suggestions.cache.get_suggestions(user) is None
        seen = await suggestions.cache.epoch(user)
        assert seen is not None
        await suggestions.cache.fill_suggestions(user, "[[2, 1.0, 1]]", seen, 300)
        assert await suggestions.cache.get_suggestions(user) == "[[2, 1.0, 1]]"

    async def test_a_write_drops_them_and_refuses_a_fill_computed_before_it(
        self, suggestions: SuggestionCacheUnderTest
    ) -> None:
        user = _user()
        seen = await suggestions.cache.epoch(user)
        assert seen is not None
        await suggestions.cache.fill_suggestions(user, "[]", seen, 300)
        await suggestions.write_touching(user)
        assert await suggestions.cache.get_suggestions(user) is None
        await suggestions.cache.fill_suggestions(user, "[[3, 1.0, 1]]", seen, 300)  # computed before the write
        assert await suggestions.cache.get_suggestions(user) is None
        now = await suggestions.cache.epoch(user)
        assert now is not None
        assert now != seen
        await suggestions.cache.fill_suggestions(user, "[[3, 1.0, 1]]", now, 300)
        assert await suggestions.cache.get_suggestions(user) == "[[3, 1.0, 1]]"

    async def test_a_cache_that_cannot_be_reached_serves_nothing_and_fails_nothing(
        self, suggestions: SuggestionCacheUnderTest
    ) -> None:
        user = _user()
        assert await suggestions.unreachable.get_suggestions(user) is None
        assert await suggestions.unreachable.epoch(user) is None  # so no fill is tried
        await suggestions.unreachable.fill_suggestions(user, "[]", "0", 300)
        assert await suggestions.unreachable.get_suggestions(user) is None
