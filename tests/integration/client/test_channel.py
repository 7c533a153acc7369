"""Both clients' channel against in-process gRPC servers: lazy connect (the first call waits for a
server within its deadline), interceptors, the caller's trace context, a rotating token over
plaintext and TLS, a per-call retry policy, a per-attempt timeout past a replica that hangs, and
keepalive dropping a connection that stopped answering."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from socialgraph_client import (
    AsyncSocialGraphClient,
    Cancelled,
    ConnectError,
    DeadlineExceeded,
    RetryPolicy,
    SocialGraphClient,
    TlsConfig,
    Unavailable,
)
from socialgraph_devstack.processes import free_port

from tests.integration.client.scripted_server import scripted_server
from tests.support.certs import issue, make_ca
from tests.support.polling import eventually
from tests.support.tcp_freeze import tcp_freeze

TRACER = TracerProvider().get_tracer("socialgraph-client-tests")
"""Spans of an SDK tracer (the global provider is left alone): their context is what a caller's
instrumented service has current when it calls."""


def target(port: int) -> str:
    return f"127.0.0.1:{port}"


# Lazy connect


async def test_connect_returns_at_once_and_the_first_call_waits_for_a_server_that_starts_late() -> None:
    """No server yet: ``connect`` returns; a call made then waits for the server that starts within its
    deadline, and is answered."""
    port = free_port()
    async with await AsyncSocialGraphClient.connect(target(port)) as graph:
        call = asyncio.create_task(graph.is_following(1, 2, timeout=20))
        await asyncio.sleep(0)  # the call runs up to its wait for a ready server
        assert not call.done()
        async with scripted_server(port) as (script, _):
            assert await call
            assert len(script.calls) == 1


async def test_a_server_down_past_the_first_calls_deadline_is_a_connect_error_and_later_calls_reach_it() -> None:
    """Both clients: with nothing listening, the first call waits out its deadline and raises
    ``ConnectError`` (an ``Unavailable``; nothing was sent: ``attempts`` 0); once a server listens,
    the same client's next call is answered."""
    port = free_port()
    blocking = SocialGraphClient.connect(target(port))
    try:
        async with await AsyncSocialGraphClient.connect(target(port)) as graph:
            with pytest.raises(ConnectError) as waited:
                await graph.is_following(1, 2, timeout=0.3)
            with pytest.raises(ConnectError) as blocked:
                await asyncio.to_thread(blocking.is_following, 1, 2, timeout=0.3)
            for error in (waited.value, blocked.value):
                assert isinstance(error, Unavailable)
                assert (error.attempts, error.code()) == (0, grpc.StatusCode.UNAVAILABLE)
                assert f"no server ready at {target(port)}" in str(error)
            async with scripted_server(port) as (script, _):
                assert await graph.is_following(1, 2, timeout=20)
                assert await asyncio.to_thread(blocking.is_following, 1, 2, timeout=20)
                assert len(script.calls) == 2
    finally:
        blocking.close()


async def test_closing_the_client_ends_a_call_waiting_for_a_first_server_at_once() -> None:
    """A call still waiting for a first server when the client is closed raises ``Cancelled`` then,
    not at its deadline (20 s here)."""
    closed = target(free_port())
    graph = await AsyncSocialGraphClient.connect(closed)
    call = asyncio.create_task(graph.is_following(1, 2, timeout=20))
    await asyncio.sleep(0)  # the call runs up to its wait for a ready server
    await graph.close()
    with pytest.raises(Cancelled, match="the client is closed"):
        await call
    blocking = SocialGraphClient.connect(closed)
    waiting = asyncio.create_task(asyncio.to_thread(blocking.is_following, 1, 2, timeout=20))
    await asyncio.to_thread(blocking.close)
    with pytest.raises(Cancelled, match="the client is closed"):
        await asyncio.wait_for(waiting, 10)  # well before the call's deadline


async def current(read: Callable[[], int]) -> int:
    """``read()``, as the probe ``eventually`` awaits."""
    return read()


@contextlib.asynccontextmanager
async def listener() -> AsyncIterator[tuple[int, list[int]]]:
    """A TCP port that accepts connections and says nothing (no gRPC): yields the port and the list
    of connections accepted so far (one entry each)."""
    accepted: list[int] = []
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], accepted
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_a_lazy_client_starts_connecting_at_connect_without_a_call() -> None:
    """``connect`` returns at once and the channel connects in the background: the server sees a
    connection from each client before any call is made."""
    async with listener() as (port, accepted):
        graph = await AsyncSocialGraphClient.connect(target(port))
        try:
            await eventually(lambda: current(lambda: len(accepted)), lambda count: count >= 1, timeout=10)
        finally:
            await graph.close()
    async with listener() as (port, accepted):
        blocking = await asyncio.to_thread(SocialGraphClient.connect, target(port))
        try:
            await eventually(lambda: current(lambda: len(accepted)), lambda count: count >= 1, timeout=10)
        finally:
            await asyncio.to_thread(blocking.close)


async def test_a_call_let_in_just_as_the_client_closes_does_not_wait_for_a_server() -> None:
    """A call that passed the closed check when ``close`` ran (here: closed by its own token function,
    after the check and before the call's wait for a first server) raises ``Cancelled`` at once, not
    after its deadline (20 s here)."""
    clients: list[SocialGraphClient] = []

    def closing_token() -> str:
        clients[0].close()
        return "token"

    clients.append(SocialGraphClient.connect(target(free_port()), token=closing_token))
    waiting = asyncio.create_task(asyncio.to_thread(clients[0].is_following, 1, 2, timeout=20))
    with pytest.raises(Cancelled, match="the client is closed"):
        await asyncio.wait_for(waiting, 10)  # well before the call's deadline


async def test_closing_the_client_ends_a_call_in_flight_or_between_attempts_with_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both clients: a call paused before its next attempt (30 s of backoff here) raises ``Cancelled``
    when the client is closed, at once, and so does a call whose attempt is in flight (not gRPC's
    "closed channel" errors, nor asyncio's ``CancelledError``)."""
    caplog.set_level(logging.INFO, logger="socialgraph_client")
    slow = RetryPolicy(initial_backoff=30, max_backoff=30)

    def pauses() -> int:
        return len([record for record in caplog.records if record.getMessage().startswith("retrying IsFollowing")])

    async with scripted_server() as (script, port):
        graph = await AsyncSocialGraphClient.connect(target(port), retry=slow)
        blocking = SocialGraphClient.connect(target(port), retry=slow)
        script.refusals = [grpc.StatusCode.UNAVAILABLE] * 2
        paused = asyncio.create_task(graph.is_following(1, 2, timeout=60))
        await eventually(lambda: current(pauses), lambda count: count == 1)
        waiting = asyncio.create_task(asyncio.to_thread(blocking.is_following, 1, 2, timeout=60))
        await eventually(lambda: current(pauses), lambda count: count == 2)
        await graph.close()
        await asyncio.to_thread(blocking.close)
        for call in (paused, waiting):
            with pytest.raises(Cancelled, match="the client is closed") as closed:
                await asyncio.wait_for(call, 10)  # well before the pause ends
            assert closed.value.attempts == 1

        script.hang = True
        graph = await AsyncSocialGraphClient.connect(target(port))
        blocking = SocialGraphClient.connect(target(port))
        in_flight = [
            asyncio.create_task(graph.is_following(1, 2, timeout=60)),
            asyncio.create_task(asyncio.to_thread(blocking.is_following, 1, 2, timeout=60)),
        ]
        await eventually(lambda: current(lambda: len(script.calls)), lambda count: count == 4)
        await graph.close()
        await asyncio.to_thread(blocking.close)
        for call in in_flight:
            with pytest.raises(Cancelled, match="the client is closed"):
                await asyncio.wait_for(call, 10)


async def test_connect_timeout_still_waits_at_connect_for_a_ready_server() -> None:
    closed = target(free_port())
    with pytest.raises(ConnectError) as waited:
        await AsyncSocialGraphClient.connect(closed, connect_timeout=0.2)
    assert waited.value.attempts == 0
    with pytest.raises(ConnectError):
        await asyncio.to_thread(SocialGraphClient.connect, closed, connect_timeout=0.2)
    async with (
        scripted_server() as (_, port),
        await AsyncSocialGraphClient.connect(target(port), connect_timeout=5) as graph,
    ):
        assert await graph.is_following(1, 2)
    with pytest.raises(ValueError, match="connect_timeout"):
        await AsyncSocialGraphClient.connect(closed, connect_timeout=0)
    with pytest.raises(ValueError, match="retry must be"):
        await AsyncSocialGraphClient.connect(closed, retry=3)  # type: ignore[arg-type]  # refused on purpose
    with pytest.raises(ValueError, match="tracing must be"):
        await AsyncSocialGraphClient.connect(closed, tracing="otel")  # type: ignore[arg-type]  # refused on purpose


# Interceptors


class Seen(NamedTuple):
    name: str
    method: str
    request_id: str


def stamped(metadata: Any, name: str) -> list[tuple[str, str]]:
    return [*(metadata or ()), ("x-intercepted", name)]


class AsyncStamp(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]  # any request and response
    """Records each call it sees and adds ``x-intercepted: <name>`` to it."""

    def __init__(self, name: str, seen: list[Seen]) -> None:
        self.name, self.seen = name, seen

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        request_id = dict(details.metadata or ()).get("x-request-id", "")
        self.seen.append(Seen(self.name, details.method.decode(), request_id))  # grpc.aio gives bytes
        return await continuation(details._replace(metadata=stamped(details.metadata, self.name)), request)


class Details(NamedTuple):
    """``grpc.ClientCallDetails`` for the blocking interceptor (gRPC gives no concrete class)."""

    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class SyncStamp(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]  # any request and response
    def __init__(self, name: str, seen: list[Seen]) -> None:
        self.name, self.seen = name, seen

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        request_id = dict(details.metadata or ()).get("x-request-id", "")
        self.seen.append(Seen(self.name, details.method, request_id))
        metadata = stamped(details.metadata, self.name)
        given = Details(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready, None)
        return continuation(given, request)


async def test_interceptors_see_every_call_in_the_order_given_and_may_change_it() -> None:
    """The first interceptor given is the outermost; each sees the method and the client's metadata
    (``x-request-id`` among it), and what it adds reaches the server."""
    async with scripted_server() as (script, port):
        seen: list[Seen] = []
        interceptors = [AsyncStamp("outer", seen), AsyncStamp("inner", seen)]
        async with await AsyncSocialGraphClient.connect(target(port), interceptors=interceptors) as graph:
            await graph.is_following(1, 2, metadata={"x-request-id": "aio-1"})
        method = "/socialgraph.v1.SocialGraphService/IsFollowing"
        assert seen == [Seen("outer", method, "aio-1"), Seen("inner", method, "aio-1")]

        seen.clear()

        def blocking() -> None:
            sync = [SyncStamp("outer", seen), SyncStamp("inner", seen)]
            with SocialGraphClient.connect(target(port), interceptors=sync) as client:
                client.is_following(1, 2, metadata={"x-request-id": "sync-1"})

        await asyncio.to_thread(blocking)
        assert seen == [Seen("outer", method, "sync-1"), Seen("inner", method, "sync-1")]
        assert [call["x-intercepted"] for call in script.calls] == ["inner", "inner"]  # the last added wins


# Tracing


def trace_id_of(traceparent: str | None) -> str:
    assert traceparent is not None, "no traceparent sent"
    version, trace_id, _span_id, _flags = traceparent.split("-")
    assert version == "00"
    return trace_id


async def test_the_callers_current_trace_context_is_sent_with_each_call() -> None:
    """With a span current, both clients send its W3C ``traceparent``; without one, nothing; a call's
    own ``traceparent`` is sent instead."""
    async with scripted_server() as (script, port):
        blocking = SocialGraphClient.connect(target(port))
        try:
            async with await AsyncSocialGraphClient.connect(target(port)) as graph:
                with TRACER.start_as_current_span("feed-request") as span:
                    await graph.is_following(1, 2)
                    await asyncio.to_thread(blocking.is_following, 1, 2)  # the thread gets the context
                    await graph.is_following(1, 2, metadata={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
                await graph.is_following(1, 2)
        finally:
            blocking.close()
    trace_id = format(span.get_span_context().trace_id, "032x")
    sent = script.header("traceparent")
    assert [trace_id_of(value) for value in sent[:2]] == [trace_id, trace_id]
    assert trace_id_of(sent[2]) == "1" * 32
    assert sent[3] is None


async def test_tracing_none_sends_no_context_and_a_propagator_of_ones_own_replaces_it() -> None:
    def mine(carrier: dict[str, str]) -> None:
        carrier["x-trace"] = "mine"

    async with scripted_server() as (script, port):
        async with await AsyncSocialGraphClient.connect(target(port), tracing=None) as off:
            with TRACER.start_as_current_span("feed-request"):
                await off.is_following(1, 2)
        async with await AsyncSocialGraphClient.connect(target(port), tracing=mine) as own:
            with TRACER.start_as_current_span("feed-request"):
                await own.is_following(1, 2)
    assert script.header("traceparent") == [None, None]
    assert script.header("x-trace") == [None, "mine"]


# Tokens


def rotating(*tokens: str) -> tuple[Callable[[], str], list[str]]:
    """A token function returning ``tokens`` in turn (the last one for ever), and the list of what it returned."""
    given: list[str] = []

    def current() -> str:
        given.append(tokens[min(len(given), len(tokens) - 1)])
        return given[-1]

    return current, given


async def test_a_token_function_is_read_for_every_call_over_plaintext_and_tls(tmp_path: Path) -> None:
    """Rotation without reconnecting: each call carries the token the function returns then, as
    ``authorization`` metadata over plaintext and as call credentials over TLS; a call's own
    ``authorization`` is sent instead, and the function is then not called."""
    ca = make_ca(tmp_path, "ca")
    async with (
        scripted_server() as (plain, plain_port),
        scripted_server(tls=issue(ca, tmp_path, "server", server=True)) as (secure, secure_port),
    ):
        for script, port, tls in ((plain, plain_port, None), (secure, secure_port, TlsConfig(ca_file=str(ca.cert)))):
            token, given = rotating("first", "second")
            async with await AsyncSocialGraphClient.connect(target(port), token=token, tls=tls) as graph:
                await graph.is_following(1, 2)
                await graph.is_following(1, 2)
                await graph.is_following(1, 2, metadata={"authorization": "Bearer own"})

            def blocking(port: int = port, tls: TlsConfig | None = tls) -> None:
                with SocialGraphClient.connect(target(port), token=lambda: "third", tls=tls) as client:
                    client.is_following(1, 2)

            await asyncio.to_thread(blocking)
            assert given == ["first", "second"]
            sent = ["Bearer first", "Bearer second", "Bearer own", "Bearer third"]
            assert script.header("authorization") == sent, "TLS" if tls else "plaintext"


async def test_a_token_function_that_fails_or_returns_no_token_fails_the_call_before_sending() -> None:
    def broken() -> str:
        raise RuntimeError("vault unreachable")

    async with scripted_server() as (script, port):
        async with await AsyncSocialGraphClient.connect(target(port), token=broken) as graph:
            with pytest.raises(RuntimeError, match="vault unreachable"):
                await graph.is_following(1, 2)
        async with await AsyncSocialGraphClient.connect(target(port), token=lambda: "") as graph:
            with pytest.raises(ValueError, match="token function's result is empty"):
                await graph.is_following(1, 2)
    assert script.calls == []
    with pytest.raises(ValueError, match="token"):
        await AsyncSocialGraphClient.connect(target(port), token=42)  # type: ignore[arg-type]  # refused on purpose


# Per-call retry policy and per-attempt timeout


async def test_retry_given_to_one_call_replaces_the_clients_policy() -> None:
    async with scripted_server() as (script, port):
        async with await AsyncSocialGraphClient.connect(target(port)) as graph:
            script.refusals = [grpc.StatusCode.UNAVAILABLE]
            with pytest.raises(Unavailable) as bare:
                await graph.is_following(1, 2, retry=None)
            assert bare.value.attempts == 1
            script.refusals = [grpc.StatusCode.UNAVAILABLE]
            assert await graph.is_following(1, 2)  # the client's policy retries
        async with await AsyncSocialGraphClient.connect(target(port), retry=None) as graph:
            script.refusals = [grpc.StatusCode.UNAVAILABLE]
            with pytest.raises(Unavailable):
                await graph.is_following(1, 2)  # the client's policy: none
            script.refusals = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
            assert await graph.is_following(1, 2, retry=RetryPolicy())
            with pytest.raises(ValueError, match="retry must be"):
                await graph.is_following(1, 2, retry=3)  # type: ignore[arg-type]  # refused on purpose
    assert len(script.calls) == 1 + 2 + 1 + 3


async def test_an_attempt_timeout_retries_a_hung_replica_on_another_within_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two replicas behind one target (``round_robin``), one hung (stopped, not dead). Without an
    attempt timeout the call that lands on it waits out its whole deadline: ``DeadlineExceeded``
    after one attempt. With one, that attempt ends early and the next goes to the other replica."""
    caplog.set_level(logging.INFO, logger="socialgraph_client")
    async with scripted_server() as (hung, hung_port), scripted_server() as (_, good_port):
        hung.hang = True
        both = f"ipv4:127.0.0.1:{hung_port},127.0.0.1:{good_port}"
        spread = [("grpc.lb_policy_name", "round_robin")]
        async with await AsyncSocialGraphClient.connect(both, options=spread, connect_timeout=5) as graph:
            late = None
            for _ in range(10):  # the good replica answers until round_robin picks the hung one
                try:
                    assert await graph.is_following(1, 2, timeout=0.5)
                except DeadlineExceeded as error:
                    late = error
                    break
            assert late is not None, "round_robin never picked the hung replica"
            assert (late.attempts, len(hung.calls)) == (1, 1)

            patient = RetryPolicy(attempt_timeout=0.2)
            for _ in range(2):  # both replicas are in the rotation now: one of two calls lands on the hung one
                assert await graph.is_following(1, 2, timeout=10, retry=patient)
        assert len(hung.calls) >= 2  # the first round's hung call, and at least one of the second's
        assert re.search(r"retrying IsFollowing in [\d.]+ s after DEADLINE_EXCEEDED \(attempt 2,", caplog.text)


# Keepalive


async def test_keepalive_drops_a_connection_that_stopped_answering_before_the_deadline() -> None:
    """A link that hangs under a call in flight (a replica stopped, a dead host): the keepalive ping
    goes unanswered and the connection is closed, so the call fails ``UNAVAILABLE`` (and would be
    retried) long before its 30 s deadline, instead of waiting it out."""
    accepts_pings = (("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.min_ping_interval_without_data_ms", 100))
    fast = [("grpc.keepalive_time_ms", 300), ("grpc.keepalive_timeout_ms", 300), ("grpc.http2.ping_timeout_ms", 300)]
    async with (
        scripted_server(options=accepts_pings) as (_, port),
        tcp_freeze(port) as link,
        await AsyncSocialGraphClient.connect(target(link.port), options=fast, retry=None) as graph,
    ):
        assert await graph.is_following(1, 2)
        link.freeze()
        with pytest.raises(Unavailable) as dropped:
            await graph.is_following(1, 2, timeout=30)
    assert dropped.value.attempts == 1
