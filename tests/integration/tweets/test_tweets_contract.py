"""The tweets table on DynamoDB Local keeps the tweets contract (which its in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.settings import Settings
from graph_service.tweets.tweet_store import DynamoTweetStore
from tests.support.contracts.tweets import TweetsContract


class TestDynamoTweetStore(TweetsContract):
    @pytest.fixture
    async def tweets(self, shared_tables: Settings) -> AsyncIterator[DynamoTweetStore]:
        dynamo = AsyncDynamo.build(shared_tables)
        try:
            yield DynamoTweetStore(dynamo, TableNames(shared_tables.table_prefix))
        finally:
            dynamo.close()
