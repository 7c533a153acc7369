"""The in-memory follow budget keeps the contract that the Redis ledger keeps."""

from __future__ import annotations

import pytest

from tests.support.contracts.follow_budget import FollowBudgetContract, LedgerUnderTest, ManualClock
from tests.support.fakes.follow_budget import FakeFollowBudget


class TestFakeFollowBudget(FollowBudgetContract):
    @pytest.fixture
    def ledger(self) -> LedgerUnderTest:
        clock = ManualClock()
        return LedgerUnderTest(FakeFollowBudget(clock), clock)
