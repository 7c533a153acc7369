"""What the per-call interceptor counts: every outcome by status code name and caller, and a limit's
refusal by its reason (the service itself counts nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from graph_service.api.auth import Authenticator
from graph_service.api.callers import CallerTable, caller_entry, mint_token
from graph_service.api.interceptors import RequestInterceptor
from graph_service.domain.errors import FollowLimit, RateLimited
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.rpc import RpcMetrics
from tests.support.servicer_context import CallDetails, ServicerContext

FOLLOW = "/socialgraph.v1.SocialGraphService/Follow"
TOKEN = mint_token()


Handler = Callable[[Any, Any], Awaitable[Any]]


async def call(interceptor: RequestInterceptor, handler: Handler, context: ServicerContext) -> None:
    async def continuation(details: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(handler)

    wrapped = await interceptor.intercept_service(continuation, CallDetails(FOLLOW))
    await wrapped.unary_unary(object(), context)


def raising(error: BaseException) -> Handler:
    async def handler(request: Any, context: Any) -> Any:
        raise error

    return handler


async def ok(request: Any, context: Any) -> Any:
    return None


def handled(registry: CollectorRegistry, code: str, caller: str = "") -> float | None:
    labels = {
        "grpc_type": "unary",
        "grpc_service": "socialgraph.v1.SocialGraphService",
        "grpc_method": "Follow",
        "caller": caller,
        "grpc_code": code,
    }
    return registry.get_sample_value("grpc_server_handled_total", labels)


async def test_each_outcome_is_counted_under_its_code_name_and_limits_by_reason() -> None:
    registry = CollectorRegistry()
    interceptor = RequestInterceptor(metrics=RpcMetrics(registry), limits=LimitMetrics(registry))
    await call(interceptor, ok, ServicerContext())
    for error in (RateLimited(1, 400, 86400, 2.5), FollowLimit(1, 7500), FollowLimit(1, 7500), RuntimeError("bug")):
        with pytest.raises(grpc.aio.AbortError):
            await call(interceptor, raising(error), ServicerContext())
    with pytest.raises(asyncio.CancelledError):
        await call(interceptor, raising(asyncio.CancelledError()), ServicerContext())
    counts = {code: handled(registry, code) for code in ("OK", "ResourceExhausted", "FailedPrecondition")}
    assert counts == {"OK": 1, "ResourceExhausted": 1, "FailedPrecondition": 2}
    assert handled(registry, "Internal") == 1
    assert handled(registry, "Canceled") == 1
    refused = registry.get_sample_value
    assert refused("socialgraph_follows_refused_total", {"reason": "RATE_LIMITED", "caller": ""}) == 1
    assert refused("socialgraph_follows_refused_total", {"reason": "FOLLOW_LIMIT", "caller": ""}) == 2


async def test_a_caller_refused_before_it_is_known_is_counted_as_started_under_no_name() -> None:
    registry = CollectorRegistry()
    table = CallerTable.parse(caller_entry("feed", ["read"], TOKEN))
    interceptor = RequestInterceptor(Authenticator(table), metrics=RpcMetrics(registry))
    for metadata in [(), (("authorization", f"Bearer {TOKEN}"),)]:
        with pytest.raises(grpc.aio.AbortError):
            await call(interceptor, ok, ServicerContext(metadata))
    assert handled(registry, "Unauthenticated") == 1
    assert handled(registry, "PermissionDenied", caller="feed") == 1  # a reader calling a write RPC
    started = registry.get_sample_value
    base = {"grpc_type": "unary", "grpc_service": "socialgraph.v1.SocialGraphService", "grpc_method": "Follow"}
    assert started("grpc_server_started_total", {**base, "caller": ""}) == 1
    assert started("grpc_server_started_total", {**base, "caller": "feed"}) == 1
