"""The counters Lambda's span: one for the Lambda event's batch of stream records, with the
counters' transaction under it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from opentelemetry.trace import Tracer

from counters.applier import CounterApplier
from counters.lambda_batches import LambdaBatches
from counters.repairs import CacheRepairer
from graph_service.domain.fences import CounterUpdate, Fence
from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.store.changes import EdgeChange
from graph_service.streams.checkpoints import CheckpointStore
from tests.support.fakes.counters import FakeCounterTable
from tests.support.span_tree import from_sdk, memory_tracer, render

EVENT_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "followers_stream_event.json"


class SpannedTable(FakeCounterTable):
    """Its commit in a span, as the DynamoDB client's span of a ``TransactWriteItems`` would be."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self._tracer = tracer

    async def commit(self, updates: Sequence[CounterUpdate], fence: Fence) -> bool:
        with self._tracer.start_as_current_span("commit"):
            return await super().commit(updates, fence)


class Repairs:
    """``CacheRepairer`` without a cache."""

    async def settle(self) -> bool:
        return True

    async def repair(self, changes: list[EdgeChange], counts: dict[int, Counts]) -> None:
        return None

    async def touch(self, pairs: list[tuple[int, int]]) -> None:
        return None


async def test_a_lambda_batch_is_a_span_with_the_counters_commits_under_it() -> None:
    tracer, exporter = memory_tracer("counters")
    markers = CheckpointStore(cast(AsyncDynamo, None), TableNames("sg_"), "counters-lambda")
    applier = CounterApplier(SpannedTable(tracer))
    batches = LambdaBatches(applier, cast(CacheRepairer, Repairs()), markers, tracer=tracer)
    records: list[dict[str, Any]] = json.loads(EVENT_PATH.read_text())["Records"]
    assert (await batches.apply({"Records": records}))["applied"] > 0
    spans = from_sdk(exporter.get_finished_spans())
    lines = render(spans).splitlines()
    assert lines[0] == "process sg_followers stream  (consumer, counters)"
    assert lines[1:], render(spans)
    assert all(line.endswith("commit  (internal, counters)") for line in lines[1:]), render(spans)
    (batch,) = [s for s in spans if s.kind == "consumer"]
    assert batch.attributes["messaging.consumer.group.name"] == "counters-lambda"
    assert batch.attributes["messaging.batch.message_count"] == len(records)
