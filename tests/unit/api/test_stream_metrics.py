"""Streaming handlers counted as go-grpc-prometheus counts them, whichever way a handler reads its
requests (its iterator, ``context.read``) and gives its replies (yielded, ``context.write``, returned)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from graph_service.api.stream_metrics import metered_stream
from graph_service.telemetry.rpc import RpcMetrics

METHOD = "/pkg.Service/Stream"


class Context:
    """A stream's servicer context: ``read`` hands out ``incoming``, then EOF; ``write`` keeps replies."""

    def __init__(self, incoming: list[str] | None = None) -> None:
        self.incoming = list(incoming or [])
        self.written: list[str] = []
        self.status = grpc.StatusCode.OK

    async def read(self) -> Any:
        return self.incoming.pop(0) if self.incoming else grpc.aio.EOF  # type: ignore[attr-defined]  # as grpc.aio

    async def write(self, message: str) -> None:
        self.written.append(message)

    def code(self) -> grpc.StatusCode:
        return self.status

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.status = code
        raise grpc.aio.AbortError(details)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


async def requests(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


def figures(registry: CollectorRegistry, kind: str) -> dict[str, float | None]:
    labels = {"grpc_type": kind, "grpc_service": "pkg.Service", "grpc_method": "Stream", "caller": ""}
    value = registry.get_sample_value
    found = {name: value(f"grpc_server_{name}_total", labels) for name in ("started", "msg_received", "msg_sent")}
    codes = ("OK", "Canceled", "FailedPrecondition", "Unknown")
    found |= {code: value("grpc_server_handled_total", {**labels, "grpc_code": code}) for code in codes}
    found["seconds"] = value("grpc_server_handling_seconds_count", labels)
    return {name: n for name, n in found.items() if n is not None}


async def test_a_server_stream_writing_through_its_context() -> None:
    async def watch(request: str, context: Any) -> None:
        assert context.peer() == "ipv4:127.0.0.1:1"  # the rest of the context is the call's own
        for reply in ("a", "b", "c"):
            await context.write(reply)

    registry = CollectorRegistry()
    handler = metered_stream(METHOD, grpc.unary_stream_rpc_method_handler(watch), RpcMetrics(registry))
    context = Context()
    assert await handler.unary_stream("request", context) is None
    assert context.written == ["a", "b", "c"]
    assert figures(registry, "server_stream") == {
        "started": 1,
        "msg_received": 1,
        "msg_sent": 3,
        "OK": 1,
        "seconds": 1,
    }


async def test_a_client_stream_reading_through_its_context_and_answering_once() -> None:
    async def total(request_iterator: Any, context: Any) -> str:
        parts = []
        while (part := await context.read()) is not grpc.aio.EOF:  # type: ignore[attr-defined]  # as grpc.aio
            parts.append(part)
        return "".join(parts)

    registry = CollectorRegistry()
    handler = metered_stream(METHOD, grpc.stream_unary_rpc_method_handler(total), RpcMetrics(registry))
    assert await handler.stream_unary(requests(), Context(["x", "y"])) == "xy"
    assert figures(registry, "client_stream") == {"started": 1, "msg_received": 2, "msg_sent": 1, "OK": 1, "seconds": 1}


async def test_a_bidi_stream_yielding_replies_that_aborts() -> None:
    async def echo(request_iterator: AsyncIterator[str], context: Any) -> AsyncIterator[str]:
        async for request in request_iterator:
            yield request.upper()
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no more")

    registry = CollectorRegistry()
    handler = metered_stream(METHOD, grpc.stream_stream_rpc_method_handler(echo), RpcMetrics(registry))
    replies: list[str] = []

    async def take_all() -> None:
        async for reply in handler.stream_stream(requests("a", "b"), Context()):
            replies.append(reply)

    with pytest.raises(grpc.aio.AbortError):
        await take_all()
    assert replies == ["A", "B"]
    assert figures(registry, "bidi_stream") == {
        "started": 1,
        "msg_received": 2,
        "msg_sent": 2,
        "FailedPrecondition": 1,
        "seconds": 1,
    }


async def test_a_stream_its_caller_leaves_is_canceled_and_a_crash_unknown() -> None:
    async def endless(request: str, context: Any) -> AsyncIterator[str]:
        while True:
            yield "tick"

    async def crashing(request: str, context: Any) -> None:
        raise RuntimeError("bug")

    registry = CollectorRegistry()
    metrics = RpcMetrics(registry)
    replies = metered_stream(METHOD, grpc.unary_stream_rpc_method_handler(endless), metrics).unary_stream(
        "request", Context()
    )
    assert await anext(replies) == "tick"
    await replies.aclose()  # what gRPC does when the caller goes away
    with pytest.raises(RuntimeError):
        await metered_stream(METHOD, grpc.unary_stream_rpc_method_handler(crashing), metrics).unary_stream(
            "request", Context()
        )
    assert figures(registry, "server_stream") == {
        "started": 2,
        "msg_received": 2,
        "msg_sent": 0,  # the reply yielded was never taken further
        "Canceled": 1,
        "Unknown": 1,
        "seconds": 2,
    }


def test_a_handler_of_another_kind_is_served_as_it_is() -> None:
    def blocking(request: str, context: Any) -> list[str]:
        return ["sync"]

    handler = grpc.unary_stream_rpc_method_handler(blocking)
    assert metered_stream(METHOD, handler, RpcMetrics(CollectorRegistry())) is handler
