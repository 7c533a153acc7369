"""The trace of an event across Kafka: a PRODUCER span per record sent, whose context travels in the
record's headers, and the CONSUMER span that continues it where the record is processed.

The context is written by the global propagator (``OTEL_PROPAGATORS``; by default W3C trace context,
``traceparent`` and ``tracestate``, and baggage) beside the ``event-type`` and ``schema-version``
headers, which ``records.opened`` reads without looking at the others. Names and attributes follow
OpenTelemetry's messaging conventions (``send <topic>``, ``process <topic>``,
``messaging.system=kafka``).

Whether a process traces is decided once, when the relay or the fanout worker is built: off, both
wrappers return what they were given (``producer.send``, the worker's record handler), so a record
costs nothing more: no header, no span, no lookup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol

from graph_service.telemetry.tracing import enabled, tracer

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["Headers", "Send", "record_tracer", "traced_process", "traced_send"]

P = ParamSpec("P")
Headers = list[tuple[str, bytes]]


class Send(Protocol):
    """``AIOKafkaProducer.send`` as the project calls it: the future it returns resolves to the
    record's ``RecordMetadata`` once the broker acknowledged it."""

    def __call__(self, topic: str, *, key: bytes, value: bytes, headers: Headers) -> Awaitable[Any]: ...


def record_tracer() -> Tracer | None:
    """The tracer of event records if this process traces (``configure_tracing`` ran with an
    exporter), else None: asked once, by the builder of a relay or a fanout worker."""
    return tracer("graph_service.events.record_spans") if enabled() else None


def traced_send(send: Send, tracer: Tracer | None) -> Send:
    """``send`` itself when ``tracer`` is None (tracing off). Else each record gets a PRODUCER span
    ``send <topic>``, a child of the current span, lasting until the broker acknowledges the record
    (acks=all) or the send fails, and its context in the record's headers (``record_spans.py``)."""
    if tracer is None:
        return send
    from graph_service.events.record_spans import send_spans

    return send_spans(send, tracer)


def traced_process(
    handle: Callable[Concatenate[Any, P], Awaitable[None]], tracer: Tracer | None, *, group: str
) -> Callable[Concatenate[Any, P], Awaitable[None]]:
    """``handle`` itself when ``tracer`` is None (tracing off). Else each consumed record (an
    aiokafka ``ConsumerRecord``, ``handle``'s first argument) is handled inside a CONSUMER span
    ``process <topic>``, the child of the send span its headers carry (a root span if they carry
    none), so what the handling calls (Redis, DynamoDB) is in the producer's trace
    (``record_spans.py``; ``group``: the consumer group, an attribute of the span)."""
    if tracer is None:
        return handle
    from graph_service.events.record_spans import process_spans

    return process_spans(handle, tracer, group=group)
