"""What every implementation of ``CounterTable`` must do: version-guarded counters committed
together with their fence (the fake, and DynamoDB Local with the checkpoints table)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from graph_service.domain.fences import CheckpointMove, CounterUpdate, EventMarkers, FenceRejected
from graph_service.domain.models import Counts
from graph_service.domain.ports import CounterTable

__all__ = ["NO_FENCE", "CounterTableContract", "CountersUnderTest"]

NO_FENCE = EventMarkers("contract", (), 0)


@dataclass
class CountersUnderTest:
    table: CounterTable
    checkpoint: Callable[[str, str], Awaitable[str | None]]
    """The sequence a consumer's shard checkpoint is at (None: never moved)."""


class CounterTableContract:
    @pytest.fixture
    def user(self) -> Callable[[], int]:
        ids = itertools.count(random.randrange(1, 2**40) * 1000)
        return lambda: next(ids)

    async def test_users_never_counted_read_zeros(self, counters: CountersUnderTest, user: Callable[[], int]) -> None:
        a = user()
        assert await counters.table.read_counts([a, a]) == {a: Counts()}

    async def test_a_commit_writes_the_new_counters(self, counters: CountersUnderTest, user: Callable[[], int]) -> None:
        a, b = user(), user()
        assert await counters.table.commit(
            [CounterUpdate(a, Counts(), Counts(1, 0, 1)), CounterUpdate(b, Counts(), Counts(0, 1, 1))], NO_FENCE
        )
        assert await counters.table.read_counts([a, b]) == {a: Counts(1, 0, 1), b: Counts(0, 1, 1)}
        assert await counters.table.commit([CounterUpdate(a, Counts(1, 0, 1), Counts(2, 0, 2))], NO_FENCE)
        assert (await counters.table.read_counts([a]))[a] == Counts(2, 0, 2)

    async def test_a_counter_moved_since_it_was_read_refuses_the_whole_commit(
        self, counters: CountersUnderTest, user: Callable[[], int]
    ) -> None:
        a, b = user(), user()
        await counters.table.commit([CounterUpdate(a, Counts(), Counts(1, 0, 1))], NO_FENCE)
        move = CheckpointMove("contract", f"shard-{a}", None, "10")
        stale = [CounterUpdate(b, Counts(), Counts(0, 1, 1)), CounterUpdate(a, Counts(), Counts(5, 0, 1))]
        assert not await counters.table.commit(stale, move)
        assert await counters.table.read_counts([a, b]) == {a: Counts(1, 0, 1), b: Counts()}
        assert await counters.checkpoint("contract", f"shard-{a}") is None

    async def test_a_checkpoint_move_applies_once(self, counters: CountersUnderTest, user: Callable[[], int]) -> None:
        a = user()
        shard = f"shard-{a}"
        first = CheckpointMove("contract", shard, None, "10", note="[]")
        assert await counters.table.commit([CounterUpdate(a, Counts(), Counts(1, 0, 1))], first)
        assert await counters.checkpoint("contract", shard) == "10"
        with pytest.raises(FenceRejected) as replay:
            await counters.table.commit([CounterUpdate(a, Counts(1, 0, 1), Counts(2, 0, 2))], first)
        assert replay.value.positions == [0]
        assert (await counters.table.read_counts([a]))[a] == Counts(1, 0, 1)
        after = CheckpointMove("contract", shard, "10", "20")
        assert await counters.table.commit([CounterUpdate(a, Counts(1, 0, 1), Counts(2, 0, 2))], after)
        assert await counters.checkpoint("contract", shard) == "20"

    async def test_event_markers_refuse_the_events_applied_before(
        self, counters: CountersUnderTest, user: Callable[[], int]
    ) -> None:
        a = user()
        e1, e2, e3 = (f"{a}-{n}" for n in (1, 2, 3))
        assert await counters.table.commit(
            [CounterUpdate(a, Counts(), Counts(1, 0, 1))], EventMarkers("contract", (e1,), 2**31)
        )
        with pytest.raises(FenceRejected) as replay:
            await counters.table.commit(
                [CounterUpdate(a, Counts(1, 0, 1), Counts(3, 0, 2))], EventMarkers("contract", (e2, e1, e3), 2**31)
            )
        assert replay.value.positions == [1]
        assert (await counters.table.read_counts([a]))[a] == Counts(1, 0, 1)
        assert await counters.table.commit(
            [CounterUpdate(a, Counts(1, 0, 1), Counts(3, 0, 2))], EventMarkers("contract", (e2, e3), 2**31)
        )
        other = EventMarkers("another-consumer", (e1,), 2**31)  # markers are per consumer
        assert await counters.table.commit([CounterUpdate(a, Counts(3, 0, 2), Counts(4, 0, 3))], other)

    async def test_a_commit_that_cannot_be_one_transaction_is_refused_before_it_is_sent(
        self, counters: CountersUnderTest, user: Callable[[], int]
    ) -> None:
        """More than 100 items, or two operations on one item: a chunk cut wrong is a bug, said at once."""
        users = [user() for _ in range(100)]
        too_many = [CounterUpdate(u, Counts(), Counts(1, 0, 1)) for u in users]
        with pytest.raises(ValueError, match="items in one transaction"):
            await counters.table.commit(too_many, CheckpointMove("contract", f"shard-{users[0]}", None, "1"))
        twice = [CounterUpdate(users[0], Counts(), Counts(1, 0, 1)), CounterUpdate(users[0], Counts(), Counts(2, 0, 1))]
        with pytest.raises(ValueError, match="two operations on one item"):
            await counters.table.commit(twice, NO_FENCE)
        with pytest.raises(ValueError, match="two operations on one item"):
            await counters.table.commit(too_many[:1], EventMarkers("contract", ("e", "e"), 2**31))
        assert (await counters.table.read_counts(users[:1]))[users[0]] == Counts()
        assert await counters.checkpoint("contract", f"shard-{users[0]}") is None
