"""The asyncio transport: a ``grpc.aio`` channel, the retry loop, the page walker, and the pause
between polls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from socialgraph_client.calls import Lifecycle, Planner
from socialgraph_client.channel import ChannelPlan, bind, not_ready
from socialgraph_client.errors import ConnectError, SocialGraphError, error_from_rpc
from socialgraph_client.options import Metadata
from socialgraph_client.rpcs import Rpc
from socialgraph_client.values import Page

__all__ = ["AsyncTransport", "sleep", "walk_pages"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)
T = TypeVar("T")


class AsyncTransport:
    def __init__(self, channel: grpc.aio.Channel, planner: Planner) -> None:
        self._channel = channel
        self._planner = planner
        self._methods: dict[str, Any] = {}
        self._lifecycle = Lifecycle()

    @classmethod
    async def open(cls, plan: ChannelPlan, planner: Planner, connect_timeout: float) -> AsyncTransport:
        """A channel to ``plan.target``, ready (connected, TLS done) within ``connect_timeout`` seconds."""
        if plan.credentials is None:
            channel = grpc.aio.insecure_channel(plan.target, options=plan.options)
        else:
            channel = grpc.aio.secure_channel(plan.target, plan.credentials, options=plan.options)
        try:
            await asyncio.wait_for(channel.channel_ready(), connect_timeout)
        except TimeoutError:
            state = channel.get_state().name
            await channel.close(None)
            raise ConnectError(grpc.StatusCode.UNAVAILABLE, not_ready(plan, connect_timeout, state)) from None
        except BaseException:
            await channel.close(None)
            raise
        return cls(channel, planner)

    async def call(self, rpc: Rpc[Req, Rep], request: Req, timeout: float | None, metadata: Metadata | None) -> Rep:
        self._lifecycle.check()
        plan = self._planner.plan(rpc, timeout, metadata)
        method = self._method(rpc)
        while True:
            try:
                reply: Rep = await method(request, timeout=plan.timeout(), metadata=plan.metadata)
                return reply
            except grpc.aio.AioRpcError as failure:
                error: SocialGraphError = error_from_rpc(failure, plan.request_id, plan.attempts)
                cause: BaseException = failure
            wait = plan.wait_before_retry(error)
            if wait is None:
                raise plan.final(error) from cause
            await asyncio.sleep(wait)

    def _method(self, rpc: Rpc[Any, Any]) -> Any:
        method = self._methods.get(rpc.path)
        if method is None:
            method = self._methods[rpc.path] = bind(self._channel, rpc)
        return method

    async def close(self) -> None:
        self._lifecycle.closed = True
        await self._channel.close(None)


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
