"""The in-memory graph keeps the mutes contract that DynamoDB Local keeps."""

from __future__ import annotations

import pytest

from graph_service.domain.models import Mute
from tests.support.contracts.mutes import MuteContract, MutesUnderTest, T
from tests.support.fakes.graph import FakeGraph


class TestFakeGraphMutes(MuteContract):
    @pytest.fixture
    def fake(self) -> FakeGraph:
        return FakeGraph()

    @pytest.fixture
    def mutes(self, fake: FakeGraph) -> MutesUnderTest:
        async def seed(muter_id: int, made: list[Mute]) -> None:
            fake.mutes.update({(muter_id, m.user_id): m for m in made})

        return MutesUnderTest(fake, fake, fake, fake, seed)


async def test_reclaiming_drops_only_the_mutes_that_have_ended() -> None:
    """``reclaim_ended`` is the fake's TTL: an ended mute is stored until it runs, and gone after."""
    fake = FakeGraph()
    kept, forever, ended = Mute(2, T, T + 10, False), Mute(3, T, 0, True), Mute(4, T, T + 5, False)
    for mute in (kept, forever, ended):
        assert await fake.put_mute(1, mute, replacing=None)
    assert await fake.mute_of(1, 4) == ended
    fake.reclaim_ended(T + 5)
    assert (await fake.mute_of(1, 2), await fake.mute_of(1, 3), await fake.mute_of(1, 4)) == (kept, forever, None)
