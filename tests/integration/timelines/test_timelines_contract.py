"""The Redis timelines keep the timelines contract (which their in-memory fake keeps too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from graph_service.timelines.timeline_store import TimelineStore
from tests.support.contracts.timelines import (
    NEW_FOLLOW_SECONDS,
    RECENT_CAP,
    TIMELINE_CAP,
    ManualClock,
    TimelinesContract,
)


class TestRedisTimelines(TimelinesContract):
    @pytest.fixture
    async def timelines(self, redis_url: str, clock: ManualClock) -> AsyncIterator[TimelineStore]:
        store = TimelineStore(
            build_redis(redis_url, cluster=False, settings=Settings()),
            timeline_cap=TIMELINE_CAP,
            recent_cap=RECENT_CAP,
            author_ttl_seconds=60,
            new_follow_seconds=NEW_FOLLOW_SECONDS,
            clock=clock,
        )
        await store.load_scripts()
        try:
            yield store
        finally:
            await store.aclose()
