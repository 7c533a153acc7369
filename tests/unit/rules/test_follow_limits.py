"""The follow rate limit and the following cap as the service layer applies them (SPEC §7.2).

On the in-memory graph and ledger; the Redis ledger and the DynamoDB cap condition are held to the
same behaviour by their contract tests, and tests/integration/api/test_limits.py runs it all on the
real servers."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from graph_service.domain.errors import Blocked, FollowLimit, RateLimited, SelfFollow
from graph_service.domain.models import BudgetGrant, FollowState
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.settings import Settings
from tests.support.contracts.follow_budget import ManualClock
from tests.support.fakes.follow_budget import FakeFollowBudget
from tests.support.fakes.graph import FakeGraph
from tests.support.polling import eventually
from tests.support.rules import rules_on

SETTINGS = Settings(page_token_secret="unit-test-secret", follow_rate_limit=3, follow_rate_window_seconds=100)


class Limited:
    def __init__(self, settings: Settings = SETTINGS) -> None:
        self.graph = FakeGraph()
        self.clock = ManualClock()
        self.budget = FakeFollowBudget(self.clock)
        self.service = rules_on(self.graph, rule_limits(settings), budget=self.budget)

    def spent(self, actor: int) -> int:
        return len(self.budget.counted.get(actor, {}))


@pytest.fixture
def limited() -> Limited:
    return Limited()


async def test_follows_past_the_limit_are_rate_limited_with_the_wait_and_write_nothing(limited: Limited) -> None:
    for followee in (2, 3, 4):
        assert await limited.service.follows.follow(1, followee) is FollowState.FOLLOWING
        limited.clock.now += 10
    with pytest.raises(RateLimited) as refused:
        await limited.service.follows.follow(1, 5)
    assert refused.value.retry_after_seconds == pytest.approx(70.0)  # the first follow leaves at t0 + 100 s
    assert refused.value.metadata == {"actor_id": "1", "limit": "3", "window_seconds": "100"}
    assert (1, 5) not in limited.graph.edges
    assert limited.spent(1) == 3


async def test_the_window_slides(limited: Limited) -> None:
    for followee in (2, 3, 4):
        await limited.service.follows.follow(1, followee)
    limited.clock.now += 99.999
    with pytest.raises(RateLimited):
        await limited.service.follows.follow(1, 5)
    limited.clock.now += 0.001
    assert await limited.service.follows.follow(1, 5) is FollowState.FOLLOWING


async def test_repeats_cost_nothing_and_still_answer_over_the_limit(limited: Limited) -> None:
    for _ in range(5):
        assert await limited.service.follows.follow(1, 2) is FollowState.FOLLOWING
    assert limited.spent(1) == 1
    await limited.service.follows.follow(1, 3)
    await limited.service.follows.follow(1, 4)
    assert await limited.service.follows.follow(1, 2) is FollowState.FOLLOWING  # over the limit, but a repeat
    await limited.service.requests.set_privacy(9, True)
    limited.clock.now += 200
    assert await limited.service.follows.follow(1, 9) is FollowState.REQUESTED
    await limited.service.follows.follow(1, 5)
    await limited.service.follows.follow(1, 6)
    assert await limited.service.follows.follow(1, 9) is FollowState.REQUESTED  # a pending request, repeated


async def test_refused_follows_cost_nothing(limited: Limited) -> None:
    await limited.service.blocks.block(7, 1)
    for _ in range(4):
        with pytest.raises(SelfFollow):
            await limited.service.follows.follow(1, 1)
        with pytest.raises(Blocked):
            await limited.service.follows.follow(1, 7)
    assert limited.spent(1) == 0
    capped = Limited(replace(SETTINGS, max_following=1))
    await capped.service.follows.follow(1, 2)
    for followee in (3, 4, 5):
        with pytest.raises(FollowLimit):
            await capped.service.follows.follow(1, followee)
    assert capped.spent(1) == 1


async def test_a_block_is_said_as_such_over_the_limit(limited: Limited) -> None:
    for followee in (2, 3, 4):
        await limited.service.follows.follow(1, followee)
    await limited.service.blocks.block(8, 1)
    with pytest.raises(Blocked):
        await limited.service.follows.follow(1, 8)


async def test_unfollowing_does_not_refund(limited: Limited) -> None:
    for followee in (2, 3, 4):
        await limited.service.follows.follow(1, followee)
        await limited.service.follows.unfollow(1, followee)
    with pytest.raises(RateLimited):
        await limited.service.follows.follow(1, 5)


async def test_concurrent_follows_of_one_actor_never_pass_the_limit_together(limited: Limited) -> None:
    outcomes = await asyncio.gather(
        *(limited.service.follows.follow(1, f) for f in range(10, 30)), return_exceptions=True
    )
    assert sum(o is FollowState.FOLLOWING for o in outcomes) == 3
    assert all(isinstance(o, RateLimited) for o in outcomes if o is not FollowState.FOLLOWING)
    assert sum(1 for a, _ in limited.graph.edges if a == 1) == 3


async def test_a_limit_of_zero_turns_it_off() -> None:
    unlimited = Limited(replace(SETTINGS, follow_rate_limit=0))
    for followee in range(2, 30):
        await unlimited.service.follows.follow(1, followee)
    assert unlimited.spent(1) == 0
    assert sum(1 for a, _ in unlimited.graph.edges if a == 1) == 28


async def test_a_failure_of_unknown_outcome_keeps_the_ticket(limited: Limited) -> None:
    """A write that fails or is cancelled may have committed (boto3 finishes it on its thread):
    the ticket stays counted, so a caller cannot make uncounted follows by cutting calls short."""

    async def failing(name: str) -> None:
        raise ConnectionError("the store went away")

    limited.graph.before_write = failing
    with pytest.raises(ConnectionError):
        await limited.service.follows.follow(1, 2)
    assert limited.spent(1) == 1


async def test_a_follow_cancelled_during_its_write_stays_counted(limited: Limited) -> None:
    """The write commits and the caller's deadline passes before the answer: still counted."""
    committed, answer = asyncio.Event(), asyncio.Event()

    async def slow_commit(name: str) -> None:
        committed.set()
        await answer.wait()

    limited.graph.before_write = slow_commit
    follow = asyncio.create_task(limited.service.follows.follow(1, 2))
    await asyncio.wait_for(committed.wait(), 5)
    follow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follow
    assert limited.spent(1) == 1


# -- the following cap ---------------------------------------------------------------------------

CAPPED = replace(SETTINGS, follow_rate_limit=0, max_following=3)


async def test_the_cap_counts_follows_and_pending_requests() -> None:
    capped = Limited(CAPPED)
    await capped.service.requests.set_privacy(3, True)
    await capped.service.follows.follow(1, 2)
    assert await capped.service.follows.follow(1, 3) is FollowState.REQUESTED
    await capped.service.follows.follow(1, 4)
    for followee in (5, 6):
        with pytest.raises(FollowLimit) as refused:
            await capped.service.follows.follow(1, followee)
        assert refused.value.metadata == {"follower_id": "1", "cap": "3"}
    assert capped.graph.outgoing(1) == 3
    assert await capped.service.follows.follow(1, 2) is FollowState.FOLLOWING  # a repeat at the cap is no new follow


async def test_an_accepted_request_never_passes_the_cap() -> None:
    capped = Limited(CAPPED)
    await capped.service.requests.set_privacy(3, True)
    await capped.service.follows.follow(1, 2)
    await capped.service.follows.follow(1, 3)
    await capped.service.follows.follow(1, 4)
    await capped.service.requests.accept_request(3, 1)
    await capped.service.requests.set_privacy(3, False)
    assert capped.graph.outgoing(1) == 3
    assert await capped.service.queries.is_following(1, 3)


async def test_unfollowing_makes_room() -> None:
    capped = Limited(CAPPED)
    for followee in (2, 3, 4):
        await capped.service.follows.follow(1, followee)
    await capped.service.follows.unfollow(1, 2)
    assert await capped.service.follows.follow(1, 5) is FollowState.FOLLOWING
    await capped.service.follows.remove_follower(3, 1)
    await capped.service.blocks.block(4, 1)
    assert await capped.service.follows.follow(1, 6) is FollowState.FOLLOWING
    assert await capped.service.follows.follow(1, 7) is FollowState.FOLLOWING


async def test_concurrent_follows_at_the_cap_leave_exactly_the_cap() -> None:
    capped = Limited(replace(CAPPED, max_following=25))
    for followee in range(100, 120):
        await capped.service.follows.follow(1, followee)
    outcomes = await asyncio.gather(
        *(capped.service.follows.follow(1, f) for f in range(200, 220)), return_exceptions=True
    )
    assert sum(o is FollowState.FOLLOWING for o in outcomes) == 5
    assert all(isinstance(o, FollowLimit) for o in outcomes if o is not FollowState.FOLLOWING)
    assert capped.graph.outgoing(1) == 25


async def test_a_failed_privacy_read_gives_the_ticket_back(limited: Limited) -> None:
    """The privacy read and the ticket run together; when the read fails, the ticket is returned."""

    async def unreachable(user_id: int) -> bool:
        raise ConnectionError("the store went away")

    limited.graph.is_private = unreachable  # type: ignore[method-assign]  # the failing read, in place
    with pytest.raises(ConnectionError):
        await limited.service.follows.follow(1, 2)
    await eventually(lambda: asyncio.sleep(0, limited.spent(1)), lambda spent: spent == 0, timeout=5)


async def test_a_follow_cancelled_while_its_ticket_is_taken_gives_it_back_once_taken(limited: Limited) -> None:
    """A caller that goes away (deadline, disconnect) while Redis counts its ticket leaves nothing
    counted: the ticket is given back when the take finishes, after the call has ended."""
    entered, release = asyncio.Event(), asyncio.Event()
    take = limited.budget.take

    async def slow_take(actor_id: int, limit: int, window_seconds: int) -> BudgetGrant:
        entered.set()
        await release.wait()
        return await take(actor_id, limit, window_seconds)

    limited.budget.take = slow_take  # type: ignore[method-assign]  # the slow take, in place
    follow = asyncio.create_task(limited.service.follows.follow(1, 2))
    await asyncio.wait_for(entered.wait(), 5)
    follow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follow
    release.set()
    await eventually(lambda: asyncio.sleep(0.01, limited.budget.counted.get(1)), lambda t: t == {}, timeout=5)
    assert (1, 2) not in limited.graph.edges


async def test_accepting_a_leftover_request_is_not_counted_again(limited: Limited) -> None:
    """A follow that finds its own pending request on a now public account accepts it; the request
    was counted when it was made, so the follow costs nothing more."""
    limited.graph.requests[(1, 2)] = 1_000  # left by a sweep that stopped midway
    assert await limited.service.follows.follow(1, 2) is FollowState.FOLLOWING
    assert (1, 2) in limited.graph.edges
    assert limited.spent(1) == 0
