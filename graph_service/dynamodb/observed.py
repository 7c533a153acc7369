"""Each boto3 call timed and counted by operation (``telemetry/backend_calls.py``), and with
tracing on, a client span of it (OpenTelemetry's conventions for the AWS SDK and DynamoDB).

The call runs on a pool thread (``client.py``), so that is where it is timed: the figure is
DynamoDB's answer, retries included, not the wait for a free thread. A pool thread does not
inherit the caller's context, so with tracing on the call runs in a copy of it
(``contextvars.copy_context``): its span is a child of the caller's, and botocore's log lines on
that thread carry the request's IDs. With tracing off nothing is copied and no span is made; nor
for a call made outside any span (a poll, a lease renewal), as with Redis.

Span: ``DynamoDB.<Operation>`` (``DynamoDB.TransactWriteItems``), kind CLIENT, with ``rpc.system``
``aws-api``, ``rpc.service``, ``rpc.method``, ``db.system`` ``dynamodb``,
``aws.dynamodb.table_names``, ``server.address``/``server.port``, ``cloud.region`` and, once
answered, ``aws.request_id``; a failure sets the status to error and ``error.type`` to the error
code (or the exception's class). No key or item value is recorded.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from graph_service.telemetry.backend_calls import DynamoCallMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["CallObserver", "error_name", "table_names"]

Call = Callable[[], dict[str, Any]]


def error_name(exc: BaseException) -> str:
    """The error code DynamoDB answered, or the exception's class when it gave none."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return type(exc).__name__


def table_names(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """The tables a call names: ``TableName``, ``RequestItems``' keys (batches), each
    ``TransactItems`` entry's ``TableName`` (transactions); sorted, each once."""
    names: set[str] = set()
    if isinstance(kwargs.get("TableName"), str):
        names.add(kwargs["TableName"])
    requests = kwargs.get("RequestItems")
    if isinstance(requests, Mapping):
        names.update(str(name) for name in requests)
    for item in kwargs.get("TransactItems") or ():
        for action in item.values() if isinstance(item, Mapping) else ():
            if isinstance(action, Mapping) and isinstance(action.get("TableName"), str):
                names.add(action["TableName"])
    return tuple(sorted(names))


class CallObserver:
    """What wraps each call of one boto3 client (``bind``)."""

    def __init__(self, client: Any, metrics: DynamoCallMetrics, tracer: Tracer | None = None) -> None:
        """``tracer``: make a span of each call (None: tracing is off)."""
        self._metrics = metrics
        self._tracer = tracer
        self._api_names: dict[str, str] = dict(client.meta.method_to_api_mapping)
        self._service = str(client.meta.service_model.service_id)  # "DynamoDB", "DynamoDB Streams"
        endpoint = urlsplit(str(client.meta.endpoint_url))
        self._attributes: dict[str, Any] = {
            "rpc.system": "aws-api",
            "rpc.service": self._service,
            "server.address": endpoint.hostname or "",
            "server.port": endpoint.port or (443 if endpoint.scheme == "https" else 80),
            "cloud.region": str(client.meta.region_name or ""),
        }
        if self._service == "DynamoDB":
            self._attributes["db.system"] = "dynamodb"

    def bind(self, operation: str, call: Call, kwargs: Mapping[str, Any]) -> Call:
        """``call`` (the boto3 method ``operation`` with ``kwargs``), observed: what the pool thread runs."""
        api = self._api_names.get(operation, operation)
        if self._tracer is None or not _recording():
            return functools.partial(self._timed, api, call)
        return functools.partial(contextvars.copy_context().run, self._traced, api, call, kwargs)

    def _timed(self, api: str, call: Call) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            return call()
        except Exception as exc:
            self._metrics.failed(api, error_name(exc))
            raise
        finally:
            self._metrics.observe(api, time.perf_counter() - started)

    def _traced(self, api: str, call: Call, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        from opentelemetry.trace import SpanKind

        assert self._tracer is not None
        attributes = {**self._attributes, "rpc.method": api}
        tables = table_names(kwargs)
        if tables:
            attributes["aws.dynamodb.table_names"] = tables
        with self._tracer.start_as_current_span(
            f"{self._service}.{api}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = self._timed(api, call)
            except Exception as exc:
                span.set_attribute("error.type", error_name(exc))
                if isinstance(exc, ClientError):
                    _request_id(span, exc.response)
                if error_name(exc) not in ANSWERS:
                    span.record_exception(exc)
                    span.set_status(_error_status(exc))
                raise
            _request_id(span, result)
            return result


ANSWERS = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})
"""Refusals that are the service's answers, not failures (a repeated follow's condition, a
transaction fenced by a newer state): their spans carry ``error.type`` but not the error status,
as the server span does for a refused call."""


def _recording() -> bool:
    """Whether the caller is inside a span that records. A call outside one (a lease renewal, a
    stream poll, a job registry poll) is timed and counted but makes no span: as a root span of its
    own it would be most of what a consumer exports (one per poll) and belong to no request. Nor
    does a call of an unsampled request, which pays for no span then."""
    from opentelemetry import trace

    return trace.get_current_span().is_recording()


def _request_id(span: Any, response: Mapping[str, Any]) -> None:
    request_id = response.get("ResponseMetadata", {}).get("RequestId")
    if request_id:
        span.set_attribute("aws.request_id", str(request_id))


def _error_status(exc: BaseException) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, str(exc))
