"""The counters consumer as an AWS Lambda handler for a DynamoDB Streams trigger.

Lambda keeps the shard position itself and may re-deliver a batch (whole or bisected), so
the fence here is one marker item per stream event (``eventID``) in ``stream_checkpoints``,
written in the same transaction as the counters: a re-delivered event is skipped, never
counted twice. Markers expire after ``MARKER_TTL_SECONDS`` (longer than stream retention),
given DynamoDB TTL on ``expires_at``.

Configure with the same ``SG_*`` environment variables as the other processes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from counters.applier import CounterApplier, Fence, FenceRejected, chunk_changes
from counters.checkpoints import CheckpointStore
from counters.consumer import CacheRepairer
from counters.edge_changes import EdgeChange, edge_changes, touched_pairs
from graph_service.bootstrap import build_cache
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo
from graph_service.store.tables import CHECKPOINTS

__all__ = ["MARKER_TTL_SECONDS", "apply_event", "handler"]

log = structlog.get_logger(__name__)
MARKER_TTL_SECONDS = 3 * 86_400
MAX_EVENTS_PER_CHUNK = 30  # 30 markers + up to 60 users stays within 100 transaction items


def lambda_consumer(settings: Settings) -> str:
    """Checkpoint namespace of the Lambda variant; run it or ``socialgraph counters``, never both."""
    return f"{settings.counters_consumer_name}-lambda"


def _marker(table: str, consumer: str, change: EdgeChange, now: int) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": {
                "consumer": {"S": consumer},
                "shard_id": {"S": f"event#{change.event_id}"},
                "expires_at": {"N": str(now + MARKER_TTL_SECONDS)},
            },
            "ConditionExpression": "attribute_not_exists(consumer)",
        }
    }


async def apply_event(event: dict[str, Any], settings: Settings) -> dict[str, int]:
    """Apply one Lambda event; returns how many changes were applied and skipped as replays."""
    dynamo = AsyncDynamo.build(settings)
    applier = CounterApplier(dynamo, settings)
    repairer = CacheRepairer(
        build_cache(settings), applier, CheckpointStore(dynamo, settings, lambda_consumer(settings))
    )
    table = settings.table(CHECKPOINTS)
    applied = skipped = 0
    try:
        await repairer.settle()  # repairs an earlier invocation owed to an unreachable Redis
        changes = edge_changes(event.get("Records", []))
        chunks = [
            chunk[i : i + MAX_EVENTS_PER_CHUNK]
            for chunk in chunk_changes(changes)
            for i in range(0, len(chunk), MAX_EVENTS_PER_CHUNK)
        ]
        for chunk in chunks:
            todo = list(chunk)
            while todo:
                now = int(time.time())
                markers = [_marker(table, lambda_consumer(settings), c, now) for c in todo]
                try:
                    counts = await applier.apply(todo, Fence(markers))
                except FenceRejected as rejected:
                    skipped += len(rejected.positions)
                    todo = [c for i, c in enumerate(todo) if i not in set(rejected.positions)]
                    continue
                applied += len(todo)
                await repairer.repair(todo, counts)
                break
        await repairer.touch(touched_pairs(event.get("Records", [])))
    finally:
        await repairer.close()
        dynamo.close()
    log.info("lambda_batch_applied", applied=applied, skipped=skipped)
    return {"applied": applied, "skipped": skipped}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point. Raising makes Lambda retry the batch, which the markers make safe."""
    settings = Settings.from_env()
    asyncio.run(apply_event(event, settings))
    return {"batchItemFailures": []}
