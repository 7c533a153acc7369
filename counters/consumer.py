"""The counters consumer: stream records -> exactly-once counter updates -> cache repair."""

from __future__ import annotations

from typing import Any

import structlog

from counters.applier import CounterApplier, chunk_changes
from counters.repairs import CacheRepairer, decode_note, encode_note
from graph_service.domain.errors import Unavailable
from graph_service.domain.fences import FenceRejected
from graph_service.store.changes import EdgeChange, edge_changes, touched_pairs
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.counters import CountersMetrics

__all__ = ["CountersConsumer"]

log = structlog.get_logger(__name__)
MAX_ROUNDS = 20


class CountersConsumer:
    """The handler of a ``StreamReader``: chunk, apply with the checkpoint as fence, repair."""

    def __init__(
        self,
        applier: CounterApplier,
        checkpoints: CheckpointStore,
        repairer: CacheRepairer,
        *,
        metrics: CountersMetrics | None = None,
    ) -> None:
        self._applier = applier
        self._checkpoints = checkpoints
        self._repairer = repairer
        self._metrics = metrics if metrics is not None else CountersMetrics()
        self.applied_changes = 0

    async def redo_last_repairs(self) -> None:
        """After a (re)start: the last chunk of every shard may have missed its repair; debts too."""
        for checkpoint in (await self._checkpoints.load_all()).values():
            changes = decode_note(checkpoint.note)
            if not await self._repairer.redo(changes):
                await self._repairer.owe(changes)
        self._repairer.start()

    async def handle(self, shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        last = str(records[-1]["dynamodb"]["SequenceNumber"])
        chunks = chunk_changes(edge_changes(records))
        ends = [c[-1].sequence for c in chunks[:-1]] + [last]
        for chunk, end in zip(chunks or [[]], ends, strict=True):
            committed = await self._commit_chunk(shard_id, chunk, end, committed)
        await self._repairer.touch(touched_pairs(records))
        return committed

    async def _commit_chunk(
        self, shard_id: str, chunk: list[EdgeChange], end: str, committed: str | None
    ) -> str | None:
        """Commit the chunk's changes not yet applied, with the checkpoint move from ``committed`` to
        ``end`` as their fence; another consumer of the shard that moved the checkpoint first makes
        this one read where it is and go on from there (it only ever moves forward)."""
        for _ in range(MAX_ROUNDS):
            if committed is not None and int(committed) >= int(end):
                return committed  # applied before (a replay after a crash or by another process)
            todo = [c for c in chunk if committed is None or int(c.sequence) > int(committed)]
            previous = committed
            try:
                if todo:
                    fence = self._checkpoints.move(shard_id, previous, end, encode_note(todo))
                    counts = await self._applier.apply(todo, fence)
                else:
                    await self._checkpoints.advance(shard_id, previous, end)
                    counts = {}
            except FenceRejected:
                committed = (await self._checkpoints.load(shard_id)).sequence
                log.warning("checkpoint_moved_elsewhere", shard_id=shard_id, now=committed)
                continue
            self.applied_changes += len(todo)
            self._metrics.applied.inc(len(todo))
            await self._repairer.repair(todo, counts)
            return end
        raise Unavailable(f"the checkpoint of shard {shard_id} kept moving under this consumer")
