"""The recording notices, and no cache at all, keep the contract the cache write-through keeps."""

from __future__ import annotations

import pytest

from graph_service.cache.write_through import NoGraphCache
from tests.support.contracts.changes import ChangesContract, ChangesUnderTest
from tests.support.fakes.changes import RecordingChanges
from tests.support.fakes.graph import FakeGraph


class TestRecordingChanges(ChangesContract):
    @pytest.fixture
    def changes(self) -> ChangesUnderTest:
        graph = FakeGraph()
        return ChangesUnderTest(RecordingChanges(), graph, graph, graph)


class TestNoGraphCache(ChangesContract):
    @pytest.fixture
    def changes(self) -> ChangesUnderTest:
        graph = FakeGraph()
        return ChangesUnderTest(NoGraphCache(), graph, graph, graph)
