"""The in-memory graph keeps the graph contract that DynamoDB Local and the cached graph keep."""

from __future__ import annotations

import pytest

from graph_service.domain.models import Counts
from tests.support.contracts.graph import GraphContract, GraphUnderTest
from tests.support.fakes.graph import FakeGraph


class TestFakeGraph(GraphContract):
    @pytest.fixture
    def graph(self) -> GraphUnderTest:
        fake = FakeGraph()

        async def set_counts(user_id: int, counts: Counts) -> None:
            fake.set_counts(user_id, counts)

        return GraphUnderTest(fake, fake, fake, fake, set_counts)
