"""The spans of event records and the trace context in their headers (``tracing.py`` decides
whether they are made; this module, and OpenTelemetry with it, is imported only when they are).

The context is written and read by the global propagator (``OTEL_PROPAGATORS``) as headers of the
record, after the envelope's; a header's value is bytes, the propagator's text encoded as UTF-8
(read back as Latin-1, which never fails: W3C values are ASCII).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, ParamSpec

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from graph_service.events.tracing import Headers, Send

__all__ = ["carried_context", "process_spans", "send_spans", "with_context"]

P = ParamSpec("P")


class _HeaderSetter(Setter[Headers]):
    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier.append((key, value.encode()))


class _HeaderGetter(Getter[Sequence[tuple[str, bytes | None]]]):
    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        found = [value.decode("latin-1") for name, value in carrier if name == key and value is not None]
        return found or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [name for name, _ in carrier]


_SETTER = _HeaderSetter()
_GETTER = _HeaderGetter()


def with_context(headers: Headers, context: Context) -> Headers:
    """``headers`` and, after them, the propagation headers of ``context``: a new list (a record
    sent again gets the context of its new attempt, never two)."""
    carried = list(headers)
    propagate.inject(carried, context=context, setter=_SETTER)
    return carried


def carried_context(headers: Sequence[tuple[str, bytes | None]] | None) -> Context:
    """The context a consumed record's headers carry (an empty one if they carry none)."""
    return propagate.extract(headers or (), getter=_GETTER)


def _failed(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__qualname__))


def _acknowledged(span: Span, future: asyncio.Future[Any]) -> None:
    """The end of a send span: the broker's acknowledgement (partition and offset) or the failure."""
    try:
        if future.cancelled():
            span.set_status(Status(StatusCode.ERROR, "cancelled"))
        elif (error := future.exception()) is not None:
            _failed(span, error)
        else:
            metadata = future.result()
            span.set_attribute("messaging.destination.partition.id", str(metadata.partition))
            span.set_attribute("messaging.kafka.offset", metadata.offset)
    finally:
        span.end()


def send_spans(send: Send, traces: Tracer) -> Send:
    """``send`` with a PRODUCER span ``send <topic>`` per record, a child of the current span,
    lasting until the broker acknowledges the record (acks=all) or the send fails, and its context
    in the record's headers."""

    async def send_traced(topic: str, *, key: bytes, value: bytes, headers: Headers) -> Any:
        attributes: dict[str, str | int] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
            "messaging.message.body.size": len(value),
        }
        if key is not None:
            attributes["messaging.kafka.message.key"] = key.decode("utf-8", "replace")
        span = traces.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes)
        try:
            future = await send(topic, key=key, value=value, headers=with_context(headers, set_span_in_context(span)))
        except BaseException as exc:
            _failed(span, exc)
            span.end()
            raise
        future.add_done_callback(functools.partial(_acknowledged, span))
        return future

    return send_traced


def process_spans(
    handle: Callable[Concatenate[Any, P], Awaitable[None]], traces: Tracer, *, group: str
) -> Callable[Concatenate[Any, P], Awaitable[None]]:
    """``handle`` with each consumed record (an aiokafka ``ConsumerRecord``, ``handle``'s first
    argument) handled inside a CONSUMER span ``process <topic>``, the child of the send span its
    headers carry (a root span if they carry none)."""

    async def process(record: Any, /, *args: P.args, **kwargs: P.kwargs) -> None:
        attributes: dict[str, str | int] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": record.topic,
            "messaging.destination.partition.id": str(record.partition),
            "messaging.kafka.offset": record.offset,
            "messaging.consumer.group.name": group,
        }
        if record.key is not None:
            attributes["messaging.kafka.message.key"] = record.key.decode("utf-8", "replace")
        with traces.start_as_current_span(
            f"process {record.topic}",
            context=carried_context(record.headers),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        ):
            await handle(record, *args, **kwargs)

    return process
