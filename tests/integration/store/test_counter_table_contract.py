"""The counters on DynamoDB Local, fenced by the checkpoints table, keep the counters contract
(which their in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams.checkpoints import CheckpointStore
from tests.support.contracts.counters import CountersUnderTest, CounterTableContract


class TestDynamoCounterTable(CounterTableContract):
    @pytest.fixture
    async def counters(self, shared_tables: Settings) -> AsyncIterator[CountersUnderTest]:
        dynamo = AsyncDynamo.build(shared_tables)
        tables = TableNames(shared_tables.table_prefix)

        async def checkpoint(consumer: str, shard_id: str) -> str | None:
            return (await CheckpointStore(dynamo, tables, consumer).load(shard_id)).sequence

        try:
            yield CountersUnderTest(DynamoCounterTable(dynamo, tables), checkpoint)
        finally:
            dynamo.close()
