"""The span of one batch of DynamoDB stream records, as a consumer (the relay, the counters consumer,
their Lambda variants) processes it: a CONSUMER span ``process <table> stream`` with OpenTelemetry's
messaging attributes, under which everything the handler calls (DynamoDB, Redis, the relay's Kafka
sends) nests, so that a relayed event's trace starts at the stream read that found it.

Whether a consumer traces is decided once, when its reader is built: off, ``traced_handler`` returns
the handler itself and a batch costs nothing more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from graph_service.streams.arns import table_of_stream
from graph_service.telemetry.tracing import current_span, enabled, tracer

if TYPE_CHECKING:  # OpenTelemetry is imported only when a span is made
    from opentelemetry.trace import Span, Tracer

__all__ = ["STREAMS_SYSTEM", "batch_span", "stream_tracer", "table_of_arn", "traced_handler"]

STREAMS_SYSTEM = "aws_dynamodb_streams"
"""``messaging.system`` of a stream batch's span (the conventions name no value for DynamoDB Streams)."""
Handler = Callable[[str, list[dict[str, Any]], str | None], Awaitable[str | None]]


def stream_tracer() -> Tracer | None:
    """The tracer of stream batches if this process traces, else None (asked once, when built)."""
    return tracer(__name__) if enabled() else None


def table_of_arn(arn: str) -> str:
    """The table name of a stream ARN, or the ARN itself if it is not one (a span names its source)."""
    return table_of_stream(arn) or arn


@contextlib.contextmanager
def batch_span(
    tracer: Tracer,
    table: str,
    consumer: str,
    records: int,
    *,
    shard_id: str | None = None,
    expected: tuple[type[Exception], ...] = (),
) -> Iterator[Span]:
    """The current span while a batch of ``records`` stream records of ``table`` is processed by
    ``consumer`` (its checkpoints' name); an exception leaving it marks it failed, unless it is one
    of ``expected`` (the shard taken over by another consumer: ``error.type`` only)."""
    attributes: dict[str, str | int] = {
        "messaging.system": STREAMS_SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": table,
        "messaging.consumer.group.name": consumer,
        "messaging.batch.message_count": records,
    }
    if shard_id is not None:
        attributes["messaging.destination.partition.id"] = shard_id
    from opentelemetry.trace import SpanKind

    with current_span(
        tracer, f"process {table} stream", expected=expected, kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield span


def traced_handler(
    handler: Handler,
    tracer: Tracer | None,
    *,
    table: str,
    consumer: str,
    expected: tuple[type[Exception], ...] = (),
) -> Handler:
    """``handler`` itself when ``tracer`` is None (tracing off); else each batch it handles is in
    a ``batch_span`` (``expected``: as there)."""
    if tracer is None:
        return handler
    traces = tracer

    async def handle(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        with batch_span(traces, table, consumer, len(records), shard_id=shard_id, expected=expected):
            return await handler(shard_id, records, committed)

    return handle
