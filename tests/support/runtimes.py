"""The project's processes inside a test's event loop, each built by its entry point's builder,
plus the fixtures that give a test fresh tables, a server, a stub and the consumers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_devstack.processes import ManagedProcess

from fanout.worker import FanoutWorker, Offsets
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints.counters import build_counters
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.relay import build_relay
from graph_service.entrypoints.runtime import Runtime
from graph_service.entrypoints.server import ServerRuntime, build_server
from graph_service.events.kafka import ensure_topics
from graph_service.settings import Settings
from tests.support.tables import create_tables, drop_tables, require_streams, wants_streams

# Processes the tests start themselves (``socialgraph serve`` in the e2e tests, the counters consumer
# as a child) inherit this: each serves its metrics on a free port, so parallel tests never clash on
# the default ports (9464-9467). ``socialgraph up`` still puts its components on its base port.
os.environ.setdefault("SG_METRICS_ADDRESS", "127.0.0.1:0")

__all__ = [
    "counters",
    "drop_tables",
    "event_settings",
    "make_settings",
    "run_built",
    "running",
    "running_counters",
    "running_fanout",
    "running_relay",
    "running_server",
    "server",
    "settings",
    "shared_tables",
    "stub",
    "stub_for",
]


def make_settings(dynamodb_endpoint: str, redis_url: str, **overrides: object) -> Settings:
    base = Settings(
        grpc_address="127.0.0.1:0",
        dynamodb_endpoint=dynamodb_endpoint,
        table_prefix=f"t{uuid.uuid4().hex[:10]}_",
        redis_url=redis_url,
        # An idle stream consumer polling every 0.05 s kept a quarter of a core busy (DynamoDB Local
        # and the consumer together); at 0.2 s it is an eighth, and a count settles 0.1 s later.
        stream_poll_seconds=0.2,
        shard_refresh_seconds=0.5,
        # A consumer that took a killed one's place waits for the dead one's leases to run out.
        lease_seconds=2.0,
        shutdown_grace_seconds=2.0,
        page_token_secret="test-secret",
        # A loaded CI machine can stall a Redis reply past the production default (0.25 s), which
        # would turn correctness tests into outage tests; outages are tested by stopping Redis and
        # by tests that set a tiny timeout themselves.
        redis_timeout_seconds=2.0,
        # Every runtime's /metrics on a free port: tests run several runtimes (and two workers) at once.
        metrics_address="127.0.0.1:0",
        # The servers built in the test process skip the near cache: every one would track every
        # graph-cache key change of the shared Redis, which cost CI about 40 s. Its own tests turn it
        # on (tests/integration/cache/test_near_cache.py, tests/e2e/test_near_cache.py, whose
        # `serve` children have it by default), and the API suites passed with it on.
        near_cache_entries=0,
        # A job is taken within a fifth of a second of its call (the registry is polled this often).
        account_job_poll_seconds=0.2,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]  # the caller's Settings fields


@pytest.fixture
async def settings(request: pytest.FixtureRequest, dynamodb_local: str, redis_url: str) -> AsyncIterator[Settings]:
    """Fresh tables (a unique prefix) in the package's DynamoDB Local, with streams if the test runs
    a stream consumer (``tests/support/tables.py``), and a flushed Redis. Deleted afterwards."""
    value = make_settings(dynamodb_local, redis_url)
    await create_tables(value, streams=wants_streams(request))
    yield value
    await drop_tables(value)


@pytest.fixture(scope="module")
def shared_tables(dynamodb_local: str, redis_node: ManagedProcess) -> Iterator[Settings]:
    """Tables shared by the tests of one module, which must each use user IDs of their own (the
    contract tests do): creating five tables per test is what a DynamoDB Local test spends most on."""
    value = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0")
    asyncio.run(create_tables(value, streams=False))
    yield value
    asyncio.run(drop_tables(value))


@contextlib.asynccontextmanager
async def running_server(settings: Settings) -> AsyncIterator[ServerRuntime]:
    """The serving process, running (it watches its callers file) until the block ends."""
    server = await build_server(settings)
    async with _run(server):
        yield server


@contextlib.asynccontextmanager
async def stub_for(port: int) -> AsyncIterator[pb_grpc.SocialGraphServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield pb_grpc.SocialGraphServiceStub(channel)


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[ServerRuntime]:
    async with running_server(settings) as running:
        yield running


@pytest.fixture
async def stub(server: ServerRuntime) -> AsyncIterator[pb_grpc.SocialGraphServiceStub]:
    async with stub_for(server.port) as value:
        yield value


@contextlib.asynccontextmanager
async def running(
    build: Callable[[Settings], Awaitable[Runtime]], settings: Settings
) -> AsyncIterator[asyncio.Task[None]]:
    """A process built by its builder and run as a task of the test's event loop; on exit it is
    stopped as a signal would stop it, and closed."""
    async with _run(await build(settings)) as task:
        yield task


@contextlib.asynccontextmanager
async def run_built(runtime: Runtime) -> AsyncIterator[asyncio.Task[None]]:
    """A runtime the test built itself (to look at it before it runs), run until the block ends."""
    async with _run(runtime) as task:
        yield task


@contextlib.asynccontextmanager
async def _run(runtime: Runtime, *, it_may_fail: bool = False) -> AsyncIterator[asyncio.Task[None]]:
    """``runtime.run`` as a task until the block ends, then the stop a signal gives, and ``aclose``.
    A run that failed fails the test, unless ``it_may_fail`` (the test crashes it on purpose)."""
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        yield task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError, *((Exception,) if it_may_fail else ())):
            await asyncio.wait_for(task, timeout=15)
        await runtime.aclose()


@contextlib.asynccontextmanager
async def running_counters(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    """The counters consumer as a task of the test's event loop (the test needs streams)."""
    await require_streams(settings, FOLLOWERS)
    async with running(build_counters, settings) as task:
        yield task


@contextlib.asynccontextmanager
async def running_relay(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    """The relay as a task of the test's event loop (the test needs streams)."""
    await require_streams(settings, TWEETS)
    async with running(build_relay, settings) as task:
        yield task


@pytest.fixture
async def counters(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    async with running_counters(settings) as task:
        yield task


async def on_topics_of_its_own(settings: Settings, broker: str, name: str, *, partitions: int) -> Settings:
    """``settings`` on ``broker`` with topics and a consumer group named after ``name``, created."""
    value = replace(
        settings,
        kafka_bootstrap_servers=broker,
        tweets_topic=f"{name}tweets",
        graph_events_topic=f"{name}graph",
        fanout_group=f"{name}fanout",
        topic_partitions=partitions,
    )
    await ensure_topics(value)
    return value


@pytest.fixture
async def event_settings(settings: Settings, kafka_broker: str) -> Settings:
    """``settings`` plus the broker, with topics and a consumer group of this test's own."""
    return await on_topics_of_its_own(settings, kafka_broker, settings.table_prefix, partitions=3)


@contextlib.asynccontextmanager
async def running_fanout(
    settings: Settings, *, after_writes: Callable[[Offsets], Awaitable[None]] | None = None
) -> AsyncIterator[tuple[FanoutWorker, asyncio.Task[None]]]:
    """A fanout worker as a task of the test's event loop; its stats stay readable after it stops."""
    runtime = await build_fanout(settings, after_writes=after_writes)
    async with _run(runtime, it_may_fail=True) as task:
        yield runtime.worker, task
