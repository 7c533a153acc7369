"""The blocking transport: a ``grpc`` channel (with the caller's interceptors), the wait for a first
ready server, the retry loop (which ``close`` ends with ``Cancelled``), the page walker
(thread-safe), and the pause between polls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias, TypeVar

import grpc
from google.protobuf.message import Message

from socialgraph_client.calls import CallPlan, Lifecycle, Planner, Retry
from socialgraph_client.channel import ChannelPlan, bind, not_ready
from socialgraph_client.errors import ConnectError, SocialGraphError, error_from_rpc
from socialgraph_client.options import USE_CLIENT_DEFAULT, Metadata
from socialgraph_client.rpcs import Rpc
from socialgraph_client.values import Page

__all__ = ["Interceptor", "SyncTransport", "sleep", "walk_pages"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)
T = TypeVar("T")

Interceptor: TypeAlias = (
    "grpc.UnaryUnaryClientInterceptor[Any, Any] | grpc.UnaryStreamClientInterceptor[Any, Any]"
    " | grpc.StreamUnaryClientInterceptor[Any, Any] | grpc.StreamStreamClientInterceptor[Any, Any]"
)
"""A ``grpc`` client interceptor (the client's calls are unary: ``UnaryUnaryClientInterceptor``)."""


class SyncTransport:
    def __init__(
        self, channel: grpc.Channel, calls: grpc.Channel, planner: Planner, plan: ChannelPlan, *, ready: bool
    ) -> None:
        self._channel = channel
        """The channel as opened: closed, and watched for readiness."""
        self._calls = calls
        """What the calls go through: ``channel``, or ``grpc.intercept_channel`` over it."""
        self._planner = planner
        self._plan = plan
        self._ready = ready
        """A server has been ready once; until then each call first waits for one (lazy connect)."""
        self._methods: dict[str, Any] = {}
        self._lifecycle = Lifecycle()
        self._lock = threading.Lock()
        """Guards ``_methods``, ``_waits`` and the closing of ``_lifecycle``."""
        self._waits: set[grpc.Future[Any]] = set()
        """The first calls' waits for a ready server, cancelled by ``close``."""
        self._closing = threading.Event()
        """Set by ``close``: ends the calls' pauses between attempts at once."""

    @classmethod
    def open(
        cls, plan: ChannelPlan, planner: Planner, connect_timeout: float | None, interceptors: Sequence[Interceptor]
    ) -> SyncTransport:
        """A channel to ``plan.target`` through ``interceptors`` (the first given is the outermost).
        ``connect_timeout`` None: at once, the first call connects; else ready (connected, TLS done)
        within that many seconds, or ``ConnectError``."""
        if plan.credentials is None:
            channel = grpc.insecure_channel(plan.target, options=plan.options)
        else:
            channel = grpc.secure_channel(plan.target, plan.credentials, options=plan.options)
        try:
            calls = grpc.intercept_channel(channel, *interceptors) if interceptors else channel
            if connect_timeout is not None:
                _wait_ready(grpc.channel_ready_future(channel), plan, connect_timeout)
        except BaseException:
            channel.close()
            raise
        _connect_now(channel)
        return cls(channel, calls, planner, plan, ready=connect_timeout is not None)

    def call(
        self,
        rpc: Rpc[Req, Rep],
        request: Req,
        timeout: float | None,
        metadata: Metadata | None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Rep:
        self._lifecycle.check()
        plan = self._planner.plan(rpc, timeout, metadata, retry)
        method = self._method(rpc)
        if not self._ready:
            self._first_ready(plan)
        while True:
            self._lifecycle.check(plan)  # closed during the pause before this attempt: Cancelled
            try:
                reply: Rep = method(
                    request, timeout=plan.timeout(), metadata=plan.metadata, credentials=plan.credentials
                )
                return reply
            except grpc.RpcError as failure:
                self._lifecycle.check(plan)  # ended by close(): Cancelled, whatever the channel said
                error: SocialGraphError = error_from_rpc(failure, plan.request_id, plan.attempts)
                cause: BaseException = failure
            except ValueError:  # gRPC's "Cannot invoke RPC on closed channel!"
                self._lifecycle.check(plan)  # the channel closed between the check and the attempt
                raise
            wait = plan.wait_before_retry(error)
            if wait is None:
                raise plan.final(error) from cause
            self._closing.wait(wait)  # the pause, which close() ends at once

    def _first_ready(self, plan: CallPlan) -> None:
        """Wait, within the call's deadline, for the channel to reach a server for the first time; past
        it, ``ConnectError`` (nothing was sent). Later calls go at once, and a server lost later is
        the retry loop's (``UNAVAILABLE``)."""
        with self._lock:  # close() either sees this wait and cancels it, or has closed before it starts
            self._lifecycle.check(plan)
            ready = grpc.channel_ready_future(self._channel)
            self._waits.add(ready)
        try:
            _wait_ready(ready, self._plan, plan.left(), plan.request_id)
        except (ConnectError, grpc.FutureCancelledError):
            self._lifecycle.check(plan)  # closed meanwhile: that is the news
            raise
        finally:
            with self._lock:
                self._waits.discard(ready)
        self._ready = True

    def _method(self, rpc: Rpc[Any, Any]) -> Any:
        with self._lock:
            method = self._methods.get(rpc.path)
            if method is None:
                method = self._methods[rpc.path] = bind(self._calls, rpc)
            return method

    def close(self) -> None:
        with self._lock:
            self._lifecycle.closed = True
            waits, self._waits = self._waits, set()
        self._closing.set()
        for ready in waits:
            ready.cancel()  # a first call waiting for a server ends now, with Cancelled
        self._channel.close()


def _wait_ready(ready: grpc.Future[Any], plan: ChannelPlan, seconds: float | None, request_id: str = "") -> None:
    """Until the channel of ``ready`` (its ``channel_ready_future``) is ready (connected, TLS done),
    at most ``seconds`` (None: no limit), else ``ConnectError``."""
    try:
        ready.result(timeout=seconds)
    except grpc.FutureTimeoutError:
        ready.cancel()  # stops watching the channel
        waited = not_ready(plan, round(seconds or 0.0, 3))
        raise ConnectError(grpc.StatusCode.UNAVAILABLE, waited, request_id=request_id, attempts=0) from None


def _connect_now(channel: grpc.Channel) -> None:
    """Start connecting ``channel`` (a new one stays IDLE until asked), as ``grpc.aio``'s
    ``get_state(try_to_connect=True)`` does: through the core channel, as gRPC's own connectivity
    watcher asks, without the watcher's thread (which fails loudly when the channel is closed before
    it runs); through a subscription when a gRPC release has no such channel."""
    check = getattr(getattr(channel, "_channel", None), "check_connectivity_state", None)
    if check is not None:
        check(True)
        return
    channel.subscribe(_ignore, try_to_connect=True)
    channel.unsubscribe(_ignore)


def _ignore(state: grpc.ChannelConnectivity) -> None:
    """The callback of ``_connect_now``'s subscription, which wants no news."""


def walk_pages(fetch: Callable[[str], Page[T]], page_token: str) -> Iterator[T]:
    """Every item from ``page_token`` on, fetching the next page when the loop reaches it."""
    while True:
        page = fetch(page_token)
        yield from page.items
        if not page.next_page_token:
            return
        page_token = page.next_page_token


def sleep(seconds: float) -> None:
    """The pause between two polls (``wait_for_account``): the asyncio transport's ``sleep``, blocking."""
    time.sleep(seconds)
