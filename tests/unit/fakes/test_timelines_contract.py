"""The in-memory timelines keep the contract that the Redis timelines keep."""

from __future__ import annotations

import pytest

from tests.support.contracts.timelines import RECENT_CAP, TIMELINE_CAP, TimelinesContract
from tests.support.fakes.timelines import FakeTimelines


class TestFakeTimelines(TimelinesContract):
    @pytest.fixture
    def timelines(self) -> FakeTimelines:
        return FakeTimelines(timeline_cap=TIMELINE_CAP, recent_cap=RECENT_CAP)
