"""Per-call plumbing shared by every RPC: request IDs, caller authentication, access logs, metrics
(``graph_service/telemetry/rpc.py``), error mapping, and requests whose body does not decode."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from prometheus_client import CollectorRegistry

from graph_service.api.auth import Authenticator, required_scope
from graph_service.api.error_mapping import internal_status, to_grpc_status
from graph_service.api.stream_metrics import aborted_code, metered_stream
from graph_service.domain import arrival
from graph_service.domain.errors import Code, DomainError, MalformedRequest, OpaqueError
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.rpc import MethodMetrics, RpcMetrics

__all__ = ["REQUEST_ID_HEADER", "RequestInterceptor"]

REQUEST_ID_HEADER = "x-request-id"
log = structlog.get_logger("graph_service.rpc")
_STATUS_OF = {code: grpc.StatusCode[code.name] for code in Code}


def _request_id(context: Any) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return os.urandom(16).hex()  # uuid4().hex's 32 hex digits, without building a UUID (2 % of a cached read)


@dataclass(frozen=True)
class _Refusal(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


async def _refuse(context: Any, status: grpc.Status, request_id: str) -> None:
    """End the call with ``status``, the request ID in its trailers and also in its headers (an
    answered call carries it in its trailers only; refusals are rare, so they pay for both, and a
    caller reading either finds it)."""
    await context.send_initial_metadata(((REQUEST_ID_HEADER, request_id),))
    trailers = (*(status.trailing_metadata or ()), (REQUEST_ID_HEADER, request_id))
    await context.abort_with_status(_Refusal(status.code, status.details, trailers))


def _metadata(context: Any) -> Any:
    return context.invocation_metadata() or ()


if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor  # not subscriptable at run time


def _tolerant(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """``deserializer`` that never raises: gRPC calls it before any handler, and a failure there
    becomes ``UNKNOWN`` with the exception's class in the message and grpc's traceback in the log,
    for every call. Bytes the protobuf runtime refuses (``DecodeError``; the pure-Python runtime
    lets ``UnicodeDecodeError`` through too) become a ``MalformedRequest`` in place of the request,
    which the call raises once the caller has been checked."""

    def deserialize(body: bytes) -> Any:
        try:
            return deserializer(body)
        except Exception as exc:
            return MalformedRequest(f"{len(body)} bytes: {exc}")

    return deserialize


def _quiet(outcome: str) -> bool:
    """Outcomes whose access line is ``debug``: a success, and a malformed body, which any caller
    can send in a loop (its rate-limited line below says how many there were)."""
    return outcome in ("OK", MalformedRequest.reason)


class RequestInterceptor(_Interceptor):
    """Binds a request ID to the logs, echoes it to the caller (in the trailers; a refusal's headers
    too), checks the caller's token and scope (when ``authenticator`` is given), binds the caller's
    name to the logs, counts and times the call (by method, status code name and caller) and a
    limit's refusal, and maps errors to statuses. A unary call counts one message received, and one
    sent if it succeeded (as go-grpc-prometheus does).

    An ``OpaqueError`` (a malformed body, the store or Redis unavailable) answers the caller with a
    fixed sentence; its detail goes to the log through ``failures``: one line per reason per
    interval, with a count, so a flood of bad bodies or an outage is a few lines, not one a call.

    Streaming RPCs (health's Watch, reflection; ours are all unary) are open services: counted
    (``api/stream_metrics.py``), not checked."""

    def __init__(
        self,
        authenticator: Authenticator | None = None,
        *,
        metrics: RpcMetrics | None = None,
        limits: LimitMetrics | None = None,
        failures: FailureLog | None = None,
    ) -> None:
        self._authenticator = authenticator
        self._failures = failures if failures is not None else FailureLog(log)
        self._metrics = metrics if metrics is not None else RpcMetrics(CollectorRegistry(auto_describe=True))
        self._limits = limits if limits is not None else LimitMetrics()
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler
        # Health's Watch and reflection are streams and stay open. A streaming RPC of ours would
        # skip the caller check below, so with auth on it is not served at all.
        is_stream = handler.unary_unary is None
        if is_stream and self._authenticator is not None and required_scope(details.method) is not None:
            return None  # type: ignore[return-value]  # None is gRPC's "not served"; grpc-stubs omit it
        cached = self._wrapped.get(details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        if is_stream:
            wrapped = metered_stream(details.method, handler, self._metrics)
        else:
            wrapped = self._wrap(details.method, handler)
        self._wrapped[details.method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """``handler`` inside the checks, logs and metrics; built once per method (gRPC asks the
        interceptor for every call, and building a handler each time cost about 4% of a cached read)."""
        inner = handler.unary_unary
        assert inner is not None
        authenticator = self._authenticator
        rpc_metrics = self._metrics
        limits = self._limits
        failures = self._failures

        async def call(request: Any, context: Any) -> Any:  # grpc-stubs lack the aio context's methods
            arrival.mark()  # the reads of this call may share a near-cache fence written after now
            request_id = _request_id(context)
            started = time.perf_counter()
            outcome = "OK"
            code = grpc.StatusCode.OK
            caller: str | None = None
            counted: MethodMetrics | None = None
            with structlog.contextvars.bound_contextvars(request_id=request_id, method=method):
                # In the trailers, which ride the reply's own batch: headers of their own were a
                # second batch through gRPC core per call, about a sixth of a bare server's rate.
                context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
                try:
                    known = None if authenticator is None else authenticator.identify(method, _metadata(context))
                    if known is not None:
                        # Bound until the access line is written, so every line of the call has it.
                        caller = known.name
                        structlog.contextvars.bind_contextvars(caller=caller)
                    counted = rpc_metrics.of(method, caller or "")
                    counted.start()
                    counted.received()
                    if known is not None:
                        Authenticator.authorize(known, method)
                    if isinstance(request, MalformedRequest):  # after the caller check: strangers learn nothing
                        raise request
                    return await inner(request, context)
                except DomainError as error:
                    outcome = error.reason
                    code = _STATUS_OF[error.code]
                    limits.refusal(outcome, caller or "")
                    if isinstance(error, OpaqueError):
                        failures.failure(outcome.lower(), outcome, error=str(error))
                    await _refuse(context, to_grpc_status(error), request_id)
                except asyncio.CancelledError:
                    code = grpc.StatusCode.CANCELLED  # the caller went away (or its deadline passed)
                    outcome = code.name
                    raise
                except Exception as error:
                    if isinstance(error, grpc.aio.AbortError):
                        code = aborted_code(context)
                        outcome = code.name
                        raise
                    code = grpc.StatusCode.INTERNAL
                    outcome = code.name
                    log.exception("rpc_failed")
                    await _refuse(context, internal_status(request_id), request_id)
                finally:
                    seconds = time.perf_counter() - started
                    if counted is None:  # refused before the call was counted as started (no or bad token)
                        counted = rpc_metrics.of(method, caller or "")
                        counted.start()
                        counted.received()
                    counted.finish(code, seconds)
                    if code is grpc.StatusCode.OK:
                        counted.sent()
                    # Successful calls log at debug (a line per call is costly at 10k calls/s); failures at info.
                    report = log.debug if _quiet(outcome) else log.info
                    report("rpc", outcome=outcome, ms=round(seconds * 1000, 3))
                    if caller is not None:
                        structlog.contextvars.unbind_contextvars("caller")

        deserializer = handler.request_deserializer
        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=None if deserializer is None else _tolerant(deserializer),
            response_serializer=handler.response_serializer,
        )
