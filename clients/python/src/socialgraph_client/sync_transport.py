"""The blocking transport: a ``grpc`` channel, the retry loop, the page walker (thread-safe), and the
pause between polls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from socialgraph_client.calls import Lifecycle, Planner
from socialgraph_client.channel import ChannelPlan, bind, not_ready
from socialgraph_client.errors import ConnectError, SocialGraphError, error_from_rpc
from socialgraph_client.options import Metadata
from socialgraph_client.rpcs import Rpc
from socialgraph_client.values import Page

__all__ = ["SyncTransport", "sleep", "walk_pages"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)
T = TypeVar("T")


class SyncTransport:
    def __init__(self, channel: grpc.Channel, planner: Planner) -> None:
        self._channel = channel
        self._planner = planner
        self._methods: dict[str, Any] = {}
        self._lifecycle = Lifecycle()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, plan: ChannelPlan, planner: Planner, connect_timeout: float) -> SyncTransport:
        """A channel to ``plan.target``, ready (connected, TLS done) within ``connect_timeout`` seconds."""
        if plan.credentials is None:
            channel = grpc.insecure_channel(plan.target, options=plan.options)
        else:
            channel = grpc.secure_channel(plan.target, plan.credentials, options=plan.options)
        try:
            grpc.channel_ready_future(channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            channel.close()
            raise ConnectError(grpc.StatusCode.UNAVAILABLE, not_ready(plan, connect_timeout)) from None
        except BaseException:
            channel.close()
            raise
        return cls(channel, planner)

    def call(self, rpc: Rpc[Req, Rep], request: Req, timeout: float | None, metadata: Metadata | None) -> Rep:
        self._lifecycle.check()
        plan = self._planner.plan(rpc, timeout, metadata)
        method = self._method(rpc)
        while True:
            try:
                reply: Rep = method(request, timeout=plan.timeout(), metadata=plan.metadata)
                return reply
            except grpc.RpcError as failure:
                error: SocialGraphError = error_from_rpc(failure, plan.request_id, plan.attempts)
                cause: BaseException = failure
            wait = plan.wait_before_retry(error)
            if wait is None:
                raise plan.final(error) from cause
            time.sleep(wait)

    def _method(self, rpc: Rpc[Any, Any]) -> Any:
        with self._lock:
            method = self._methods.get(rpc.path)
            if method is None:
                method = self._methods[rpc.path] = bind(self._channel, rpc)
            return method

    def close(self) -> None:
        self._lifecycle.closed = True
        self._channel.close()


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
