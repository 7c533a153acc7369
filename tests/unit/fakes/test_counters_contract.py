"""The in-memory counters table keeps the contract that the DynamoDB counters and checkpoints keep."""

from __future__ import annotations

import pytest

from tests.support.contracts.counters import CountersUnderTest, CounterTableContract
from tests.support.fakes.counters import FakeCounterTable


class TestFakeCounterTable(CounterTableContract):
    @pytest.fixture
    def counters(self) -> CountersUnderTest:
        table = FakeCounterTable()

        async def checkpoint(consumer: str, shard_id: str) -> str | None:
            return table.checkpoints.get((consumer, shard_id))

        return CountersUnderTest(table, checkpoint)
