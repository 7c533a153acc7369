"""The read-through wrapper, the write-through notices and the fanout's cached follower source over
DynamoDB Local and Redis keep the graph contract: whatever Redis holds, every read answers as the
store alone would, right after each write."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.cache.cached_graph import CachedGraphReads
from graph_service.cache.follower_source import CachedFollowerSource
from graph_service.cache.write_through import CacheWriteThrough
from graph_service.domain.fences import CounterUpdate, EventMarkers
from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.contracts.graph import GraphContract, GraphUnderTest, NotifyingWrites


class TestCachedGraph(GraphContract):
    @pytest.fixture
    async def graph(self, shared_tables: Settings) -> AsyncIterator[GraphUnderTest]:
        dynamo = AsyncDynamo.build(shared_tables)
        tables = TableNames(shared_tables.table_prefix)
        store = DynamoGraphStore(dynamo, tables)
        cache = build_graph_cache(shared_tables)
        assert cache is not None
        reads = CachedGraphReads(store, cache)
        table = DynamoCounterTable(dynamo, tables)

        async def set_counts(user_id: int, counts: Counts) -> None:
            """As the counters consumer does: the counters table, then the absolute values into Redis."""
            assert await table.commit([CounterUpdate(user_id, Counts(), counts)], EventMarkers("contract", (), 0))
            assert await cache.set_counts(user_id, counts)

        try:
            writes = NotifyingWrites(store, CacheWriteThrough(cache))
            yield GraphUnderTest(writes, reads, reads, CachedFollowerSource(store, cache), set_counts)
        finally:
            await reads.aclose()
            await cache.aclose()
            dynamo.close()
