"""The in-memory graph cache keeps every contract of the graph cache's roles that the Redis one keeps."""

from __future__ import annotations

import pytest

from tests.support.contracts.graph_cache import (
    LIST_LIMIT,
    CacheInvalidationsContract,
    CacheRepairsContract,
    CountCacheContract,
    GraphCacheReadsContract,
    GraphCacheUnderTest,
    ListCacheContract,
)
from tests.support.contracts.suggestion_cache import SuggestionCacheContract, SuggestionCacheUnderTest
from tests.support.fakes.graph_cache import FakeGraphCache


@pytest.fixture
def graph_cache() -> GraphCacheUnderTest:
    return GraphCacheUnderTest(FakeGraphCache(list_limit=LIST_LIMIT), FakeGraphCache(list_limit=LIST_LIMIT, down=True))


class TestFakeCountCache(CountCacheContract):
    pass


class TestFakeListCache(ListCacheContract):
    pass


class TestFakeGraphCacheReads(GraphCacheReadsContract):
    pass


class TestFakeCacheInvalidations(CacheInvalidationsContract):
    pass


class TestFakeCacheRepairs(CacheRepairsContract):
    pass


class TestFakeGraphCacheSuggestions(SuggestionCacheContract):
    @pytest.fixture
    def suggestions(self) -> SuggestionCacheUnderTest:
        cache = FakeGraphCache()

        async def write_touching(user_id: int) -> None:
            await cache.touch_pair(user_id, user_id + 1)

        return SuggestionCacheUnderTest(cache, write_touching, FakeGraphCache(down=True))
