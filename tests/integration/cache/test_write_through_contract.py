"""The cache write-through over Redis keeps the ``GraphChanges`` contract: once told, the cached
reads of the pair answer as DynamoDB does."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from graph_service.cache.cached_graph import CachedGraphReads
from graph_service.cache.write_through import CacheWriteThrough
from graph_service.domain.models import Direction, Edge, Made
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache
from graph_service.settings import Settings
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.contracts.changes import ChangesContract, ChangesUnderTest


class TestCacheWriteThrough(ChangesContract):
    @pytest.fixture
    async def changes(self, shared_tables: Settings) -> AsyncIterator[ChangesUnderTest]:
        dynamo = AsyncDynamo.build(shared_tables)
        store = DynamoGraphStore(dynamo, TableNames(shared_tables.table_prefix))
        cache = build_graph_cache(shared_tables)
        assert cache is not None
        reads = CachedGraphReads(store, cache)
        try:
            yield ChangesUnderTest(CacheWriteThrough(cache), store, reads, reads)
        finally:
            await reads.aclose()
            await cache.aclose()
            dynamo.close()

    async def test_a_write_through_after_redis_lost_its_scripts_still_lands(
        self, changes: ChangesUnderTest, shared_tables: Settings
    ) -> None:
        """On one node both users' slots are written in one packed write of ``EVALSHA`` calls; after
        a restart or a ``SCRIPT FLUSH`` the script is loaded again and the write sent again, so the
        cache is not left owing an invalidation (which would stop it being read)."""
        a = random.randrange(1, 2**40) * 1000 + 1
        b = a + 1
        assert not await changes.reads.is_following(a, b)
        raw = aioredis.from_url(shared_tables.redis_url)
        try:
            await raw.script_flush()
        finally:
            await raw.aclose()
        assert await changes.store.add_edge(a, b, 1000) is Made.CREATED
        await changes.changes.follow_settled(a, b, 1000, following=True)
        assert isinstance(changes.reads, CachedGraphReads)
        assert changes.reads.cache.trusted  # nothing owed: the write-through landed
        assert await changes.reads.is_following(a, b)
        assert (await changes.reads.list_edges(Direction.FOLLOWERS, b, 10, None)).entries == [Edge(a, 1000)]
