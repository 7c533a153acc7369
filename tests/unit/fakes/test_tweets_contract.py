"""The in-memory tweets table keeps the contract that the DynamoDB tweets table keeps."""

from __future__ import annotations

import pytest

from tests.support.contracts.tweets import TweetsContract
from tests.support.fakes.tweets import FakeTweets


class TestFakeTweets(TweetsContract):
    @pytest.fixture
    def tweets(self) -> FakeTweets:
        return FakeTweets()
