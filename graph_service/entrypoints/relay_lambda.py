"""The relay as an AWS Lambda handler for DynamoDB Streams triggers (``tweets`` and ``followers``).

Configure the function with the same ``SG_*`` environment variables as ``socialgraph relay`` (the
table prefix, the Kafka settings and topics) and the handler
``graph_service.entrypoints.relay_lambda.handler``; give it the triggers of both tables (or one
function per table: each record says which table it comes from). The producer (acks=all) and the
event loop it lives on are built once per container and reused by every invocation; they are built
again only if the configuration read from the environment changes. Its work is
``relay/lambda_batches.py``.

Each invocation writes its figures as one CloudWatch Embedded Metric Format line on stdout
(``LambdaInvocation``): the common ones, and ``EventsProduced`` (acknowledged by Kafka) and
``RecordsSkipped`` (records that could not make an event), the figures of ``socialgraph relay``'s
``/metrics``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from graph_service.entrypoints.lambda_container import LambdaContainer, lambda_invocation
from graph_service.entrypoints.logging import configure_logging
from graph_service.entrypoints.span_export import flush_spans
from graph_service.events.kafka import client_options, topic_names
from graph_service.settings import Settings
from graph_service.telemetry.tracing import configure_tracing
from relay.lambda_batches import RelayBatches
from relay.sources import SOURCES, Converter

__all__ = [
    "FIGURES",
    "RelayLambdaRuntime",
    "build_relay_lambda",
    "handler",
    "relay_batches",
    "relay_sources",
]

FIGURES = {"produced": "EventsProduced", "skipped": "RecordsSkipped"}
"""What ``RelayLambdaRuntime.invoke`` answers -> its metric in the invocation's EMF line."""


@dataclass
class RelayLambdaRuntime:
    settings: Settings
    loop: asyncio.AbstractEventLoop
    producer: AIOKafkaProducer
    batches: RelayBatches

    def invoke(self, event: dict[str, Any]) -> dict[str, int]:
        """One event, on the container's loop; returns once every event is acknowledged, with how
        many records it had, how many events were produced and how many records were skipped."""
        return self.loop.run_until_complete(self.batches.produce(event))

    def close(self) -> None:
        """The producer stopped (what it still holds is sent first), then the loop closed."""
        try:
            self.loop.run_until_complete(self.producer.stop())
        finally:
            self.loop.close()


def relay_sources(settings: Settings) -> dict[str, tuple[str, Converter]]:
    """The table of every source (with SG_TABLE_PREFIX) -> its topic (as configured) and converter,
    the same as the ``socialgraph relay`` process."""
    topics = topic_names(settings)
    return {settings.table(s.table): (topics[s.topic], s.convert) for s in SOURCES}


def relay_batches(producer: AIOKafkaProducer, settings: Settings) -> RelayBatches:
    """The work of the function: ``relay_sources`` sent through ``producer``."""
    return RelayBatches(producer, relay_sources(settings))


def build_relay_lambda(settings: Settings) -> RelayLambdaRuntime:
    """The container's loop and a started producer; ``RuntimeError`` if Kafka cannot be reached
    (the invocation fails and the next one builds again)."""
    configure_tracing("relay")  # first: the batches decide when built whether they trace
    loop = asyncio.new_event_loop()

    async def start() -> AIOKafkaProducer:
        producer = AIOKafkaProducer(**client_options(settings), acks="all", linger_ms=5)  # needs the running loop
        try:
            await producer.start()
        except KafkaError as exc:
            await producer.stop()
            raise RuntimeError(f"Kafka at {settings.kafka_bootstrap_servers}: {exc}") from exc
        return producer

    try:
        producer = loop.run_until_complete(start())
    except BaseException:
        loop.close()
        raise
    return RelayLambdaRuntime(settings, loop, producer, relay_batches(producer, settings))


_container: LambdaContainer[RelayLambdaRuntime] = LambdaContainer()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point. Raising makes Lambda retry the batch: at least once, which the fanout's
    idempotent merge makes safe."""
    with lambda_invocation(event, context, "relay") as invocation:
        runtime = _container.current(build_relay_lambda, configure_logging)
        try:
            done = runtime.invoke(event)
        finally:
            flush_spans()  # before the container is frozen
        invocation.count_each(done, FIGURES)
        response: dict[str, Any] = {"batchItemFailures": []}
        invocation.answered(response)
        return response
