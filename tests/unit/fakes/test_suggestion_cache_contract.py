"""The in-memory suggestion cache keeps the contract that the Redis graph cache keeps."""

from __future__ import annotations

import pytest

from tests.support.contracts.suggestion_cache import SuggestionCacheContract, SuggestionCacheUnderTest
from tests.support.fakes.suggestion_cache import FakeSuggestionCache


class TestFakeSuggestionCache(SuggestionCacheContract):
    @pytest.fixture
    def suggestions(self) -> SuggestionCacheUnderTest:
        cache = FakeSuggestionCache()

        async def write_touching(user_id: int) -> None:
            cache.bump(user_id)

        return SuggestionCacheUnderTest(cache, write_touching, FakeSuggestionCache(down=True))
