"""The cache lease registry on DynamoDB Local keeps the contract (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS
from graph_service.settings import Settings
from graph_service.store.cache_leases import DynamoLeaseRegistry
from tests.support.contracts.cache_leases import LeaseRegistryContract


class TestDynamoLeaseRegistry(LeaseRegistryContract):
    @pytest.fixture
    async def registry(self, shared_tables: Settings) -> AsyncIterator[DynamoLeaseRegistry]:
        dynamo = AsyncDynamo.build(shared_tables)
        try:
            yield DynamoLeaseRegistry(dynamo, shared_tables.table(CHECKPOINTS))
        finally:
            dynamo.close()
