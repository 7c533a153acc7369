"""What every ``FollowBudget`` must do: the in-memory fake (``tests/unit/fakes``) and Redis, single
node and Cluster (``tests/integration/limits``). A subclass provides ``ledger``: a budget and the
clock it reads, which the test moves."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from graph_service.domain.ports import FollowBudget

__all__ = ["FollowBudgetContract", "LedgerUnderTest", "ManualClock"]


class ManualClock:
    """A wall clock the test sets; starts at a fixed, realistic time."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class LedgerUnderTest:
    budget: FollowBudget
    clock: ManualClock


def _actor() -> int:
    return random.randrange(1, 2**40)


class FollowBudgetContract:
    async def test_the_limit_is_counted_per_actor(self, ledger: LedgerUnderTest) -> None:
        a, b = _actor(), _actor()
        for _ in range(3):
            assert (await ledger.budget.take(a, 3, 60)).granted
        assert not (await ledger.budget.take(a, 3, 60)).granted
        assert (await ledger.budget.take(b, 3, 60)).granted

    async def test_a_refusal_says_when_the_oldest_follow_leaves_the_window(self, ledger: LedgerUnderTest) -> None:
        a = _actor()
        assert (await ledger.budget.take(a, 2, 100)).granted
        ledger.clock.now += 30
        assert (await ledger.budget.take(a, 2, 100)).granted
        ledger.clock.now += 10
        refused = await ledger.budget.take(a, 2, 100)
        assert not refused.granted
        assert not refused.counted
        assert refused.retry_after_seconds == pytest.approx(60.0, abs=0.002)

    async def test_the_window_slides_to_the_millisecond(self, ledger: LedgerUnderTest) -> None:
        a = _actor()
        assert (await ledger.budget.take(a, 1, 10)).granted
        ledger.clock.now += 9.999
        refused = await ledger.budget.take(a, 1, 10)
        assert not refused.granted
        assert refused.retry_after_seconds == pytest.approx(0.001, abs=0.0005)
        ledger.clock.now += 0.001
        assert (await ledger.budget.take(a, 1, 10)).granted

    async def test_a_refused_take_is_not_counted(self, ledger: LedgerUnderTest) -> None:
        a = _actor()
        assert (await ledger.budget.take(a, 1, 10)).granted
        ledger.clock.now += 5
        for _ in range(5):
            assert not (await ledger.budget.take(a, 1, 10)).granted
        ledger.clock.now += 5
        assert (await ledger.budget.take(a, 1, 10)).granted  # the refusals did not push the window on

    async def test_a_ticket_given_back_frees_its_place_and_only_its_own(self, ledger: LedgerUnderTest) -> None:
        a = _actor()
        first = await ledger.budget.take(a, 2, 60)
        second = await ledger.budget.take(a, 2, 60)
        assert first.counted
        assert second.counted
        assert first.ticket != second.ticket
        await ledger.budget.give_back(a, first.ticket)
        await ledger.budget.give_back(a, first.ticket)  # twice: still one place
        assert (await ledger.budget.take(a, 2, 60)).granted
        assert not (await ledger.budget.take(a, 2, 60)).granted

    async def test_concurrent_takes_never_pass_the_limit_together(self, ledger: LedgerUnderTest) -> None:
        a = _actor()
        grants = await asyncio.gather(*(ledger.budget.take(a, 7, 60) for _ in range(30)))
        counted = sum(g.counted for g in grants)
        # Failed open: Redis did not answer in time (a loaded CI machine, the 0.25 s socket timeout)
        # and the follow went through uncounted, by design. The counted ones still never pass 7.
        failed_open = sum(g.granted and not g.counted for g in grants)
        assert counted == 7 or (failed_open and counted <= 7), (counted, failed_open)
        assert sum(g.granted for g in grants) == counted + failed_open
