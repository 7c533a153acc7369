"""The asyncio transport: a ``grpc.aio`` channel (with the caller's interceptors), the wait for a
first ready server, the retry loop (which ``close`` ends with ``Cancelled``), the page walker, and
the pause between polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias, TypeVar

import grpc
from google.protobuf.message import Message

from socialgraph_client.calls import CallPlan, Lifecycle, Planner, Retry
from socialgraph_client.channel import ChannelPlan, bind, not_ready
from socialgraph_client.errors import ConnectError, SocialGraphError, error_from_rpc
from socialgraph_client.options import USE_CLIENT_DEFAULT, Metadata
from socialgraph_client.rpcs import Rpc
from socialgraph_client.values import Page

__all__ = ["AsyncTransport", "Interceptor", "sleep", "walk_pages"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)
T = TypeVar("T")

Interceptor: TypeAlias = (
    "grpc.aio.UnaryUnaryClientInterceptor[Any, Any] | grpc.aio.UnaryStreamClientInterceptor[Any, Any]"
    " | grpc.aio.StreamUnaryClientInterceptor[Any, Any] | grpc.aio.StreamStreamClientInterceptor[Any, Any]"
)
"""A ``grpc.aio`` client interceptor (the client's calls are unary: ``UnaryUnaryClientInterceptor``)."""


class AsyncTransport:
    def __init__(self, channel: grpc.aio.Channel, planner: Planner, plan: ChannelPlan, *, ready: bool) -> None:
        self._channel = channel
        self._planner = planner
        self._plan = plan
        self._ready = ready
        """A server has been ready once; until then each call first waits for one (lazy connect)."""
        self._methods: dict[str, Any] = {}
        self._lifecycle = Lifecycle()
        self._closing = asyncio.Event()
        """Set by ``close``: ends the calls' pauses between attempts at once."""

    @classmethod
    async def open(
        cls, plan: ChannelPlan, planner: Planner, connect_timeout: float | None, interceptors: Sequence[Interceptor]
    ) -> AsyncTransport:
        """A channel to ``plan.target`` through ``interceptors`` (the first given is the outermost).
        ``connect_timeout`` None: at once, the first call connects; else ready (connected, TLS done)
        within that many seconds, or ``ConnectError``."""
        given: Any = list(interceptors) or None
        if plan.credentials is None:
            channel = grpc.aio.insecure_channel(plan.target, options=plan.options, interceptors=given)
        else:
            channel = grpc.aio.secure_channel(plan.target, plan.credentials, options=plan.options, interceptors=given)
        try:
            if connect_timeout is not None:
                await _wait_ready(channel, plan, connect_timeout)
        except BaseException:
            await channel.close(None)
            raise
        channel.get_state(try_to_connect=True)  # a new channel stays IDLE until asked: connect in the background now
        return cls(channel, planner, plan, ready=connect_timeout is not None)

    async def call(
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
            await self._first_ready(plan)
        while True:
            self._lifecycle.check(plan)  # closed during the pause before this attempt: Cancelled
            try:
                reply: Rep = await method(
                    request, timeout=plan.timeout(), metadata=plan.metadata, credentials=plan.credentials
                )
                return reply
            except grpc.aio.AioRpcError as failure:
                self._lifecycle.check(plan)  # ended by close(): Cancelled, whatever the channel said
                error: SocialGraphError = error_from_rpc(failure, plan.request_id, plan.attempts)
                cause: BaseException = failure
            except grpc.aio.UsageError:
                self._lifecycle.check(plan)  # the channel closed between the check and the attempt
                raise
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self._lifecycle.closed and task is not None and not task.cancelling():
                    self._lifecycle.check(plan)  # close() cancelled the attempt (the caller did not cancel the task)
                raise
            wait = plan.wait_before_retry(error)
            if wait is None:
                raise plan.final(error) from cause
            await self._pause(wait)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next attempt, or until ``close``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _first_ready(self, plan: CallPlan) -> None:
        """Wait, within the call's deadline, for the channel to reach a server for the first time; past
        it, ``ConnectError`` (nothing was sent). Later calls go at once, and a server lost later is
        the retry loop's (``UNAVAILABLE``)."""
        try:
            await _wait_ready(self._channel, self._plan, plan.left(), plan.request_id)
        except Exception:
            self._lifecycle.check(plan)  # closed meanwhile (gRPC's UsageError): that is the news
            raise
        self._ready = True

    def _method(self, rpc: Rpc[Any, Any]) -> Any:
        method = self._methods.get(rpc.path)
        if method is None:
            method = self._methods[rpc.path] = bind(self._channel, rpc)
        return method

    async def close(self) -> None:
        self._lifecycle.closed = True
        self._closing.set()
        await self._channel.close(None)


async def _wait_ready(
    channel: grpc.aio.Channel, plan: ChannelPlan, seconds: float | None, request_id: str = ""
) -> None:
    """Until ``channel`` is ready (connected, TLS done), at most ``seconds`` (None: no limit), else
    ``ConnectError``."""
    try:
        await asyncio.wait_for(channel.channel_ready(), seconds)
    except TimeoutError:
        waited = not_ready(plan, round(seconds or 0.0, 3), channel.get_state().name)
        raise ConnectError(grpc.StatusCode.UNAVAILABLE, waited, request_id=request_id, attempts=0) from None


async def walk_pages(fetch: Callable[[str], Awaitable[Page[T]]], page_token: str) -> AsyncIterator[T]:
    """Every item from ``page_token`` on, fetching the next page when the loop reaches it."""
    while True:
        page = await fetch(page_token)
        for item in page.items:
            yield item
        if not page.next_page_token:
            return
        page_token = page.next_page_token


async def sleep(seconds: float) -> None:
    """The pause between two polls (``wait_for_account``), without blocking the event loop."""
    await asyncio.sleep(seconds)
