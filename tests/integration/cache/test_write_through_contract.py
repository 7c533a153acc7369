"""The cache write-through over Redis keeps the ``GraphChanges`` contract: once told, the cached
reads of the pair answer as DynamoDB does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.cache.cached_graph import CachedGraphReads
from graph_service.cache.write_through import CacheWriteThrough
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.entrypoints.components import build_graph_cache
from graph_service.settings import Settings
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.contracts.changes import ChangesContract, ChangesUnderTest


class TestCacheWriteThrough(ChangesContract):
    @pytest.fixture
    async def changes(self, shared_tables: Settings) -> AsyncIterator[ChangesUnderTest]:
        dynamo = AsyncDynamo.build(shared_tables)
        store = DynamoGraphStore(dynamo, shared_tables)
        cache = build_graph_cache(shared_tables)
        assert cache is not None
        reads = CachedGraphReads(store, cache)
        try:
            yield ChangesUnderTest(CacheWriteThrough(cache), store, reads, reads)
        finally:
            await reads.aclose()
            await cache.aclose()
            dynamo.close()
