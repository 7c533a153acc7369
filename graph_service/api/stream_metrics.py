"""The metrics of streaming RPCs (health's ``Watch``, reflection's ``ServerReflectionInfo``), as
go-grpc-prometheus counts them: started when the handler begins, handled with its status code when it
ends (``Canceled`` when the caller went away, which is how a health watch usually ends), timed, and
each message counted (``grpc_server_msg_received_total`` / ``_sent_total``).

A handler may take its requests from its argument (an async iterator) or from ``context.read()``,
and give its replies by yielding them (an async generator) or by ``context.write()``: every way is
counted. The streams are open services (no caller is identified): their caller is "".
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from graph_service.telemetry.rpc import MethodMetrics, RpcMetrics, grpc_type

__all__ = ["aborted_code", "metered_stream"]


def aborted_code(context: Any) -> grpc.StatusCode:
    """The status code a handler aborted its call with itself (``context.abort``)."""
    code = context.code() if hasattr(context, "code") else None
    return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _ended_with(error: BaseException, context: Any) -> grpc.StatusCode:
    """The status a stream that raised ``error`` ends with."""
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    if isinstance(error, grpc.aio.AbortError):
        return aborted_code(context)
    return grpc.StatusCode.UNKNOWN  # what gRPC answers for an exception a handler let through


class _CountingContext:
    """The call's context, counting the messages a handler reads and writes through it."""

    def __init__(self, context: Any, counted: MethodMetrics) -> None:
        self._context = context
        self._counted = counted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def read(self) -> Any:
        message = await self._context.read()
        if message is not grpc.aio.EOF:  # type: ignore[attr-defined]  # grpc-stubs omit it; grpc.aio has it
            self._counted.received()
        return message

    async def write(self, message: Any) -> None:
        await self._context.write(message)
        self._counted.sent()


async def _counting(requests: AsyncIterator[Any], counted: MethodMetrics) -> AsyncIterator[Any]:
    async for request in requests:
        counted.received()
        yield request


def _metered(behaviour: Callable[..., Any], counted: MethodMetrics, *, streams_requests: bool) -> Callable[..., Any]:
    """``behaviour`` counted; of the same kind (an async generator function, or a coroutine
    function), which is how gRPC tells how the handler answers."""

    def arguments(request: Any, context: Any) -> tuple[Any, _CountingContext]:
        counted.start()
        if streams_requests:
            request = _counting(request, counted)
        else:
            counted.received()
        return request, _CountingContext(context, counted)

    if inspect.isasyncgenfunction(behaviour):

        async def replies(request: Any, context: Any) -> AsyncIterator[Any]:
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                async for reply in behaviour(*arguments(request, context)):
                    yield reply
                    counted.sent()  # gRPC asks for the next reply once this one is written
            except BaseException as error:
                code = _ended_with(error, context)
                raise
            finally:
                counted.finish(code, time.perf_counter() - started)

        return replies

    async def answer(request: Any, context: Any) -> Any:
        started = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            reply = await behaviour(*arguments(request, context))
            if reply is not None:  # a single reply (client streaming); a server stream wrote its own
                counted.sent()
            return reply
        except BaseException as error:
            code = _ended_with(error, context)
            raise
        finally:
            counted.finish(code, time.perf_counter() - started)

    return answer


def metered_stream(
    method: str, handler: grpc.RpcMethodHandler[Any, Any], metrics: RpcMetrics
) -> grpc.RpcMethodHandler[Any, Any]:
    """The streaming ``handler`` of ``method`` (``/pkg.Service/Method``), counted in ``metrics``; a
    handler that is neither a coroutine nor an async generator function is returned as it is."""
    counted = metrics.of(method, "", grpc_type(handler.request_streaming, handler.response_streaming))
    options = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_stream is not None and _measurable(handler.unary_stream):
        return grpc.unary_stream_rpc_method_handler(
            _metered(handler.unary_stream, counted, streams_requests=False), **options
        )
    if handler.stream_unary is not None and _measurable(handler.stream_unary):
        return grpc.stream_unary_rpc_method_handler(
            _metered(handler.stream_unary, counted, streams_requests=True), **options
        )
    if handler.stream_stream is not None and _measurable(handler.stream_stream):
        return grpc.stream_stream_rpc_method_handler(
            _metered(handler.stream_stream, counted, streams_requests=True), **options
        )
    return handler


def _measurable(behaviour: Callable[..., Any]) -> bool:
    return inspect.isasyncgenfunction(behaviour) or inspect.iscoroutinefunction(behaviour)
