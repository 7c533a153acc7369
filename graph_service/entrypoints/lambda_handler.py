"""The counters consumer as an AWS Lambda handler for a DynamoDB Streams trigger.

Configure the function with the same ``SG_*`` environment variables as the other processes and the
handler ``graph_service.entrypoints.lambda_handler.handler``. The clients (DynamoDB, Redis) and the
event loop they live on are built once per container and reused by every invocation; they are
built again only if the configuration read from the environment changes. (A container runs one
invocation at a time on one thread; the clients are kept per thread, so a process that calls the
handler from several threads at once, as the tests do to stand for several containers, works too.)

Each invocation writes its figures as one CloudWatch Embedded Metric Format line on stdout
(``LambdaInvocation``): the common ones, and ``ChangesApplied``, ``ReplaysSkipped`` (changes already
counted by an earlier delivery) and ``RepairDebts`` (cache repairs owed to Redis), the figures of
``socialgraph counters``' ``/metrics``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from counters.applier import CounterApplier
from counters.lambda_batches import LambdaBatches, lambda_consumer
from counters.repairs import CacheRepairer
from graph_service.cache.graph_cache import GraphCache
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache
from graph_service.entrypoints.lambda_container import LambdaContainer, lambda_invocation
from graph_service.entrypoints.logging import configure_logging
from graph_service.entrypoints.span_export import flush_spans
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.counters import CountersMetrics
from graph_service.telemetry.tracing import configure_tracing

__all__ = ["FIGURES", "LambdaRuntime", "build_lambda", "handler"]

FIGURES = {"applied": "ChangesApplied", "skipped": "ReplaysSkipped", "repair_debts": "RepairDebts"}
"""What ``LambdaRuntime.invoke`` answers -> its metric in the invocation's EMF line."""


@dataclass
class LambdaRuntime:
    settings: Settings
    loop: asyncio.AbstractEventLoop
    dynamo: AsyncDynamo
    cache: GraphCache | None
    repairer: CacheRepairer
    batches: LambdaBatches
    metrics: CountersMetrics

    def invoke(self, event: dict[str, Any]) -> dict[str, int]:
        """One event, on the container's loop; how many changes were applied and skipped as replays,
        and the repairs owed after it. Nothing is left running between invocations: owed
        counter repairs stay stored as debts (settled first by the next invocation), and owed
        relationship and privacy drops are tried once more at the end, as a stop would."""

        async def apply() -> dict[str, int]:
            try:
                return await self.batches.apply(event)
            finally:
                await self.repairer.aclose()
                if self.cache is not None:
                    await self.cache.deliver_owed()

        done = self.loop.run_until_complete(apply())
        return {**done, "repair_debts": int(self.metrics.owed())}

    async def aclose(self) -> None:
        await self.repairer.aclose()
        if self.cache is not None:
            await self.cache.aclose()
        self.dynamo.close()

    def close(self) -> None:
        """``aclose`` on the container's loop, then the loop itself."""
        try:
            self.loop.run_until_complete(self.aclose())
        finally:
            self.loop.close()


def build_lambda(settings: Settings) -> LambdaRuntime:
    configure_tracing("counters")  # first: the batches decide when built whether they trace
    loop = asyncio.new_event_loop()
    dynamo = AsyncDynamo.build(settings)
    tables = TableNames(settings.table_prefix)
    applier = CounterApplier(DynamoCounterTable(dynamo, tables))
    markers = CheckpointStore(dynamo, tables, lambda_consumer(settings.counters_consumer_name))
    cache = build_graph_cache(settings)
    metrics = CountersMetrics()
    repairer = CacheRepairer(cache, applier, markers, metrics=metrics)
    batches = LambdaBatches(applier, repairer, markers)
    return LambdaRuntime(settings, loop, dynamo, cache, repairer, batches, metrics)


_container: LambdaContainer[LambdaRuntime] = LambdaContainer()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point. Raising makes Lambda retry the batch, which the markers make safe."""
    with lambda_invocation(event, context, "counters") as invocation:
        runtime = _container.current(build_lambda, configure_logging)
        try:
            done = runtime.invoke(event)
        finally:
            flush_spans()  # before the container is frozen
        invocation.count_each(done, FIGURES)
        response: dict[str, Any] = {"batchItemFailures": []}
        invocation.answered(response)
        return response
