"""The counter applier's exactly-once effect, on an in-memory counters table with fences."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from counters.applier import CounterApplier
from graph_service.domain.errors import Unavailable
from graph_service.domain.fences import CheckpointMove, EventMarkers, FenceRejected
from graph_service.domain.models import Counts
from graph_service.store.changes import EdgeChange
from tests.support.fakes.counters import FakeCounterTable


def change(follower: int, followee: int, added: bool = True, seq: int = 1) -> EdgeChange:
    return EdgeChange(follower, followee, seq, added, str(seq), f"event-{seq}")


async def no_wait(attempt: int, *, base: float = 0.0, cap: float = 0.0) -> None:
    """The applier's backoff, without the wait (what is tested is how often it tries)."""


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("counters.applier.backoff", no_wait)


async def test_a_chunk_moves_both_users_counters_once_with_its_fence() -> None:
    table = FakeCounterTable()
    applier = CounterApplier(table)
    move = CheckpointMove("counters", "shard-1", None, "30")
    new = await applier.apply([change(1, 2, seq=10), change(3, 2, seq=20), change(1, 2, False, seq=30)], move)
    assert new == {1: Counts(0, 0, 1), 2: Counts(1, 0, 1), 3: Counts(0, 1, 1)}
    assert await applier.read_counts([1, 2, 3]) == new
    assert table.checkpoints == {("counters", "shard-1"): "30"}


async def test_a_replayed_chunk_is_refused_whole_and_counts_nothing() -> None:
    table = FakeCounterTable()
    applier = CounterApplier(table)
    fence = EventMarkers("counters-lambda", ("a", "b"), 2**31)
    await applier.apply([change(1, 2, seq=1), change(3, 2, seq=2)], fence)
    with pytest.raises(FenceRejected) as replay:
        await applier.apply([change(1, 2, seq=1), change(3, 2, seq=2)], fence)
    assert replay.value.positions == [0, 1]
    assert (await applier.read_counts([2]))[2] == Counts(2, 0, 1)


async def test_a_removal_never_counted_clamps_at_zero_and_says_so() -> None:
    applier = CounterApplier(FakeCounterTable())
    with capture_logs() as logs:
        new = await applier.apply([change(1, 2, False)], EventMarkers("c", ("r",), 0))
    assert new == {1: Counts(0, 0, 1), 2: Counts(0, 0, 1)}
    assert [entry["event"] for entry in logs] == ["counter_clamped_at_zero"]
    assert logs[0]["users"] == [1, 2]
    assert (await applier.apply([change(1, 2, True, seq=2)], EventMarkers("c", ("a",), 0)))[2] == Counts(1, 0, 2)


async def test_a_counter_another_shard_moved_meanwhile_is_read_again_and_nothing_is_lost() -> None:
    table = FakeCounterTable()
    applier = CounterApplier(table)
    await applier.apply([change(5, 2, seq=1)], EventMarkers("c", ("x",), 0))
    table.conflicts = 3
    new = await applier.apply([change(6, 2, seq=2)], EventMarkers("c", ("y",), 0))
    assert new[2] == Counts(2, 0, 2)
    assert table.commits == 1 + 4


async def test_a_counter_that_keeps_moving_ends_as_unavailable_with_nothing_written() -> None:
    table = FakeCounterTable()
    table.conflicts = 1000
    with pytest.raises(Unavailable):
        await CounterApplier(table).apply([change(1, 2)], CheckpointMove("c", "s", None, "1"))
    assert table.commits == 20
    assert not table.counts
    assert not table.checkpoints
