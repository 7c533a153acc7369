"""The users' counters and the fences in memory: ``CounterTable`` as ``DynamoCounterTable`` does it,
for unit tests only (held to it by ``tests/support/contracts/counters.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from graph_service.domain.fences import CheckpointMove, CounterUpdate, Fence, FenceRejected
from graph_service.domain.models import Counts
from graph_service.store.counter_table import check_one_transaction

__all__ = ["FakeCounterTable"]


class FakeCounterTable:
    def __init__(self) -> None:
        self.counts: dict[int, Counts] = {}
        self.checkpoints: dict[tuple[str, str], str] = {}
        """(consumer, shard) -> sequence."""
        self.markers: set[tuple[str, str]] = set()
        """(consumer, event ID) of every event applied under ``EventMarkers``."""
        self.conflicts = 0
        """Commits still to refuse as if another shard had moved a counter in between (a test's racer)."""
        self.commits = 0

    async def read_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return {u: self.counts.get(u, Counts()) for u in dict.fromkeys(user_ids)}

    def _refused_by_fence(self, fence: Fence) -> list[int]:
        if isinstance(fence, CheckpointMove):
            return [] if self.checkpoints.get((fence.consumer, fence.shard_id)) == fence.previous else [0]
        return [i for i, event in enumerate(fence.event_ids) if (fence.consumer, event) in self.markers]

    async def commit(self, updates: Sequence[CounterUpdate], fence: Fence) -> bool:
        check_one_transaction(updates, fence)
        self.commits += 1
        refused = self._refused_by_fence(fence)
        if refused:
            raise FenceRejected(refused)
        if self.conflicts:
            self.conflicts -= 1
            return False
        if any(self.counts.get(u.user_id, Counts()).version != u.old.version for u in updates):
            return False
        for update in updates:
            self.counts[update.user_id] = update.new
        if isinstance(fence, CheckpointMove):
            self.checkpoints[(fence.consumer, fence.shard_id)] = fence.sequence
        else:
            self.markers |= {(fence.consumer, event) for event in fence.event_ids}
        return True
