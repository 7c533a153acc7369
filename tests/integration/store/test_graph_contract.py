"""The graph store on DynamoDB Local keeps the graph contract (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.domain.fences import CounterUpdate, EventMarkers
from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.contracts.graph import GraphContract, GraphUnderTest


class TestDynamoGraphStore(GraphContract):
    @pytest.fixture
    async def graph(self, shared_tables: Settings) -> AsyncIterator[GraphUnderTest]:
        dynamo = AsyncDynamo.build(shared_tables)
        tables = TableNames(shared_tables.table_prefix)
        store = DynamoGraphStore(dynamo, tables)
        table = DynamoCounterTable(dynamo, tables)

        async def set_counts(user_id: int, counts: Counts) -> None:
            assert await table.commit([CounterUpdate(user_id, Counts(), counts)], EventMarkers("contract", (), 0))

        try:
            yield GraphUnderTest(store, store, store, store, set_counts)
        finally:
            dynamo.close()
