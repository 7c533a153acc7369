"""A server span per RPC (SPEC §7.4), continuing the caller's W3C ``traceparent``.

Installed by ``server.py`` only when this process's tracing is on, and outermost: the per-call
interceptor (``interceptors.py``) runs inside the span, so the request's log lines, its DynamoDB and
Redis calls (``dynamodb/observed.py``, ``redis_client/observed.py``) and its refusal are all in it.
A process with tracing off never imports this module.

The span follows OpenTelemetry's RPC conventions: named ``socialgraph.v1.SocialGraphService/Follow``,
kind SERVER, with ``rpc.system`` ``grpc``, ``rpc.service``, ``rpc.method``,
``rpc.grpc.status_code``, ``server.address``/``server.port`` (where the server listens),
``network.peer.address``/``network.peer.port`` (the caller's connection) and the call's request ID
(``socialgraph.request_id``, the ``x-request-id`` every log line of the call carries). Its status
is an error only for the codes the conventions call a server's fault (``UNKNOWN``,
``DEADLINE_EXCEEDED``, ``UNIMPLEMENTED``, ``INTERNAL``, ``UNAVAILABLE``, ``DATA_LOSS``): a caller's
bad argument or a refused follow is an answer, not a failure of the server.

gRPC's own services (health checks, reflection) get no span: a probe every few seconds would be
most of the traces. We do not use ``opentelemetry-instrumentation-grpc``: its ``grpc.aio`` server
interceptor has had open issues (streams, aborts), and this is one small wrapper of the unary
handlers, built once per method as the per-call interceptor's are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import propagate
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from graph_service.api.interceptors import REQUEST_ID_HEADER

__all__ = ["SERVER_ERRORS", "TracingInterceptor"]

Metadata = Sequence[tuple[str, str | bytes]]

SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
"""The status codes that make a server span's status an error (OpenTelemetry's gRPC conventions)."""

UNTRACED_PREFIX = "/grpc."
"""gRPC's own services: ``grpc.health.v1.Health``, ``grpc.reflection.v1alpha.ServerReflection``."""

if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor  # not subscriptable at run time


class _MetadataGetter(Getter[Metadata]):
    """The propagator's view of a call's invocation metadata (pairs; gRPC lower-cases the keys)."""

    def get(self, carrier: Metadata, key: str) -> list[str] | None:
        values = [value for name, value in carrier if name == key and isinstance(value, str)]
        return values or None

    def keys(self, carrier: Metadata) -> list[str]:
        return [name for name, _ in carrier]


_GETTER = _MetadataGetter()


def _status_code(context: Any, default: grpc.StatusCode) -> grpc.StatusCode:
    """The code the call ended with: the one an abort or the handler set, else ``default``."""
    code = context.code()
    return code if isinstance(code, grpc.StatusCode) else default


def _request_id(context: Any) -> str | None:
    """The call's request ID, from the trailers the per-call interceptor set (it makes one up when
    the caller sent none)."""
    for key, value in context.trailing_metadata() or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str):
            return value
    return None


def peer_attributes(peer: str) -> dict[str, str | int]:
    """``network.peer.*`` of gRPC's peer string (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return {}
    host, _, port = rest.rpartition(":")
    return {"network.peer.address": host.strip("[]"), "network.peer.port": int(port)} if port.isdigit() else {}


class TracingInterceptor(_Interceptor):
    """Wraps each unary handler of ours in a server span made with ``tracer``."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._server: dict[str, str | int] = {}
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    def serving_on(self, host: str, port: int) -> None:
        """Where the server listens (``server.address``/``server.port``), once it is bound; a
        wildcard host (``[::]``, ``0.0.0.0``) names no address."""
        host = host.strip("[]")
        wildcard = host in ("", "::", "0.0.0.0")  # noqa: S104 - compared with, not bound to
        self._server = {"server.port": port} if wildcard else {"server.address": host, "server.port": port}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None or details.method.startswith(UNTRACED_PREFIX):
            return handler
        cached = self._wrapped.get(details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(details.method, handler)
        self._wrapped[details.method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        inner = handler.unary_unary
        assert inner is not None
        tracer = self._tracer
        name = method.lstrip("/")
        service, _, rpc = name.rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc}

        async def call(request: Any, context: Any) -> Any:
            parent = propagate.extract(context.invocation_metadata() or (), getter=_GETTER)
            with tracer.start_as_current_span(
                name,
                context=parent,
                kind=SpanKind.SERVER,
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                recording = span.is_recording()  # not when the sampler said no: then it costs little more
                if recording:
                    span.set_attributes({**self._server, **peer_attributes(context.peer() or "")})
                code = grpc.StatusCode.OK
                try:
                    response = await inner(request, context)
                    code = _status_code(context, grpc.StatusCode.OK)
                    return response
                except asyncio.CancelledError:
                    code = grpc.StatusCode.CANCELLED  # the caller went away, or its deadline passed
                    raise
                except grpc.aio.AbortError:
                    code = _status_code(context, grpc.StatusCode.UNKNOWN)  # a refusal, mapped inside
                    raise
                except Exception as exc:
                    code = grpc.StatusCode.UNKNOWN
                    span.record_exception(exc)
                    raise
                finally:
                    if recording:
                        _finish(span, context, code)

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _finish(span: Span, context: Any, code: grpc.StatusCode) -> None:
    """The outcome on the span: the status code, the request ID, an error for a server's fault."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    request_id = _request_id(context)
    if request_id is not None:
        span.set_attribute("socialgraph.request_id", request_id)
    if code in SERVER_ERRORS:
        span.set_attribute("error.type", code.name)
        span.set_status(Status(StatusCode.ERROR, _details(context)))


def _details(context: Any) -> str | None:
    details = context.details()
    if isinstance(details, bytes):
        return details.decode("utf-8", "replace")
    return details if isinstance(details, str) else None
