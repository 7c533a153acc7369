"""The counters consumer's work on one AWS Lambda event of a DynamoDB Streams trigger.

Lambda keeps the shard position itself and may re-deliver a batch (whole or bisected), so
the fence here is one marker per stream event (``eventID``) in ``stream_checkpoints``, written
in the same transaction as the counters: a re-delivered event is skipped, never counted twice.
Markers expire after ``MARKER_TTL_SECONDS`` (longer than stream retention), given DynamoDB TTL on
``expires_at``. The handler itself (building the clients once per container) is
``graph_service.entrypoints.lambda_handler.handler``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from counters.applier import CounterApplier, chunk_changes
from counters.repairs import CacheRepairer
from graph_service.domain.fences import FenceRejected
from graph_service.domain.times import now_us
from graph_service.store.changes import edge_changes, touched_pairs
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.tracing import batch_span, stream_tracer, table_of_arn

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["MARKER_TTL_SECONDS", "LambdaBatches", "lambda_consumer"]

log = structlog.get_logger(__name__)
MARKER_TTL_SECONDS = 3 * 86_400
MAX_EVENTS_PER_CHUNK = 30  # 30 markers + up to 60 users stays within 100 transaction items


def lambda_consumer(counters_consumer: str) -> str:
    """Checkpoint namespace of the Lambda variant (``counters_consumer``: ``SG_COUNTERS_CONSUMER_NAME``);
    run it or ``socialgraph counters``, never both."""
    return f"{counters_consumer}-lambda"


class LambdaBatches:
    def __init__(
        self,
        applier: CounterApplier,
        repairer: CacheRepairer,
        markers: CheckpointStore,
        *,
        tracer: Tracer | None = None,
    ) -> None:
        """``tracer``: each Lambda event in a span of its stream batch (``streams/tracing.py``);
        None: the process's, if it traces."""
        self._applier = applier
        self._repairer = repairer
        self._markers = markers
        self._tracer = tracer if tracer is not None else stream_tracer()

    async def apply(self, event: dict[str, Any]) -> dict[str, int]:
        """Apply one Lambda event; returns how many changes were applied and skipped as replays."""
        records = event.get("Records", [])
        if self._tracer is None or not records:
            return await self._apply(event)
        table = table_of_arn(str(records[0].get("eventSourceARN", "")))
        with batch_span(self._tracer, table, self._markers.consumer, len(records)):
            return await self._apply(event)

    async def _apply(self, event: dict[str, Any]) -> dict[str, int]:
        applied = skipped = 0
        await self._repairer.settle()  # repairs an earlier invocation owed to an unreachable Redis
        changes = edge_changes(event.get("Records", []))
        chunks = [
            chunk[i : i + MAX_EVENTS_PER_CHUNK]
            for chunk in chunk_changes(changes)
            for i in range(0, len(chunk), MAX_EVENTS_PER_CHUNK)
        ]
        for chunk in chunks:
            todo = list(chunk)
            while todo:
                fence = self._markers.markers([c.event_id for c in todo], now_us() // 1_000_000 + MARKER_TTL_SECONDS)
                try:
                    counts = await self._applier.apply(todo, fence)
                except FenceRejected as rejected:
                    skipped += len(rejected.positions)
                    todo = [c for i, c in enumerate(todo) if i not in set(rejected.positions)]
                    continue
                applied += len(todo)
                await self._repairer.repair(todo, counts)
                break
        await self._repairer.touch(touched_pairs(event.get("Records", [])))
        log.info("lambda_batch_applied", applied=applied, skipped=skipped)
        return {"applied": applied, "skipped": skipped}
