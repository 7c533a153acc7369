"""What the per-call interceptor does with a handler before any call runs."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
import structlog

from graph_service.api.auth import Authenticator
from graph_service.api.callers import CallerTable, caller_entry, mint_token
from graph_service.api.interceptors import RequestInterceptor
from tests.support.logs import capture_every_level
from tests.support.servicer_context import CallDetails, ServicerContext


async def _stream(request: Any, context: Any) -> Any:
    yield request


def _streaming_handler() -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_stream_rpc_method_handler(_stream)


async def intercepted(interceptor: RequestInterceptor, method: str) -> grpc.RpcMethodHandler[Any, Any] | None:
    async def continuation(details: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return _streaming_handler()

    return await interceptor.intercept_service(continuation, CallDetails(method))


async def test_a_streaming_rpc_of_ours_is_not_served_with_auth_on() -> None:
    """The caller check wraps unary calls; a streaming RPC of ours would bypass it, so it is refused
    (UNIMPLEMENTED), while the open streaming services (health Watch, reflection) pass untouched."""
    auth = RequestInterceptor(Authenticator(CallerTable.parse(caller_entry("feed", ["read"], mint_token()))))
    assert await intercepted(auth, "/socialgraph.v1.SocialGraphService/WatchFollows") is None
    assert await intercepted(auth, "/grpc.health.v1.Health/Watch") is not None
    assert await intercepted(RequestInterceptor(), "/socialgraph.v1.SocialGraphService/WatchFollows") is not None


async def test_every_line_of_a_failing_call_names_the_caller() -> None:
    """A handler's own line, the traceback line of an unexpected failure and the access line all
    carry the caller's name; after the call nothing of it stays bound."""
    token = mint_token()
    interceptor = RequestInterceptor(Authenticator(CallerTable.parse(caller_entry("feed", ["read"], token))))

    async def handler(request: Any, context: Any) -> Any:
        structlog.get_logger("test").warning("inside")
        raise RuntimeError("a bug")

    async def continuation(details: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(handler)

    wrapped = await interceptor.intercept_service(
        continuation, CallDetails("/socialgraph.v1.SocialGraphService/GetCounts")
    )
    context = ServicerContext((("authorization", f"Bearer {token}"),))
    with capture_every_level() as logs, pytest.raises(grpc.aio.AbortError):
        await wrapped.unary_unary(object(), context)
    assert [e["event"] for e in logs] == ["inside", "rpc_failed", "rpc"]
    assert {e.get("caller") for e in logs} == {"feed"}
    assert context.status is not None
    assert context.status.code == grpc.StatusCode.INTERNAL
    assert "caller" not in structlog.contextvars.get_contextvars()
