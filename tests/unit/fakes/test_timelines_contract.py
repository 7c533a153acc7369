"""The in-memory timelines keep the contract that the Redis timelines keep."""

from __future__ import annotations

import pytest

from tests.support.contracts.timelines import (
    NEW_FOLLOW_SECONDS,
    RECENT_CAP,
    TIMELINE_CAP,
    ManualClock,
    TimelinesContract,
)
from tests.support.fakes.timelines import FakeTimelines


class TestFakeTimelines(TimelinesContract):
    @pytest.fixture
    def timelines(self, clock: ManualClock) -> FakeTimelines:
        return FakeTimelines(
            timeline_cap=TIMELINE_CAP, recent_cap=RECENT_CAP, new_follow_seconds=NEW_FOLLOW_SECONDS, clock=clock
        )
