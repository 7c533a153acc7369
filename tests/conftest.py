"""Fixtures that start real DynamoDB Local and Redis servers (single node and a 3-master cluster)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import boto3
import grpc
import pytest
import redis
from redis.cluster import RedisCluster
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from counters.consumer import run_counters
from fanout.worker import FanoutWorker, Offsets, fanout_worker
from graph_service.kafka import ensure_topics
from graph_service.localstack.processes import (
    ManagedProcess,
    free_port,
    port_is_open,
    start_dynamodb_local,
    start_kafka_broker,
    start_redis,
    start_redis_cluster,
)
from graph_service.logging import configure_logging
from graph_service.server import RunningServer, start_server
from graph_service.settings import Settings
from graph_service.store.tables import ensure_tables, table_specs
from relay.relay import run_relay

os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
configure_logging("warning")


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def dynamodb_local(servers_dir: Path) -> Iterator[str]:
    """The endpoint URL of a DynamoDB Local (in memory) shared by the session."""
    proc = start_dynamodb_local(free_port(), servers_dir / "logs")
    yield f"http://127.0.0.1:{proc.port}"
    proc.stop()


@pytest.fixture(scope="session")
def redis_node(servers_dir: Path) -> Iterator[ManagedProcess]:
    proc = start_redis(free_port(), servers_dir / "logs", servers_dir / "redis")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def redis_cluster(servers_dir: Path) -> Iterator[list[int]]:
    ports = [free_port() for _ in range(3)]
    proc = start_redis_cluster(ports, servers_dir / "logs", servers_dir / "cluster")
    yield ports
    proc.stop()


@dataclass
class OwnRedis:
    """A redis-server of this test alone, which the test may stop and start again from its dump."""

    port: int
    log_dir: Path
    data_dir: Path
    process: ManagedProcess

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True)

    def shutdown_saving(self) -> None:
        """SHUTDOWN SAVE: the dump keeps every entry as it was at this moment."""
        with self.client() as client:
            client.shutdown(save=True)
        self.process.process.wait(timeout=10)
        assert not port_is_open(self.port)
        assert (self.data_dir / "dump.rdb").exists()

    def stop(self) -> None:
        self.process.stop()
        assert not port_is_open(self.port)

    def restart(self) -> None:
        """Start again on the same port and data dir: the server reloads a dump, if there is one."""
        self.process = start_redis(self.port, self.log_dir, self.data_dir)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    port = free_port()
    value = OwnRedis(
        port, tmp_path / "logs", tmp_path / "redis", start_redis(port, tmp_path / "logs", tmp_path / "redis")
    )
    yield value
    value.process.stop()


@pytest.fixture(scope="session")
def kafka_broker(servers_dir: Path) -> Iterator[str]:
    """Bootstrap servers of a Kafka-protocol broker (tansu, in memory) shared by the session."""
    proc = start_kafka_broker(free_port(), servers_dir / "logs")
    yield f"127.0.0.1:{proc.port}"
    proc.stop()


@pytest.fixture
def flushed_cluster(redis_cluster: list[int]) -> Iterator[RedisCluster]:
    """A client of the session's cluster, flushed for this test."""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0], decode_responses=True)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield client
    client.close()


def make_settings(dynamodb_endpoint: str, redis_url: str, **overrides: object) -> Settings:
    base = Settings(
        grpc_address="127.0.0.1:0",
        dynamodb_endpoint=dynamodb_endpoint,
        table_prefix=f"t{uuid.uuid4().hex[:10]}_",
        redis_url=redis_url,
        stream_poll_seconds=0.05,
        shard_refresh_seconds=0.5,
        shutdown_grace_seconds=2.0,
        page_token_secret="test-secret",
        # A loaded CI machine can stall a Redis reply past the production default (0.25 s), which
        # would turn correctness tests into outage tests; outages are tested by stopping Redis and
        # by tests that set a tiny timeout themselves.
        redis_timeout_seconds=2.0,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def redis_url(redis_node: ManagedProcess) -> str:
    """A clean single-node Redis for this test."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    client.close()
    return f"redis://127.0.0.1:{redis_node.port}/0"


@pytest.fixture
async def settings(dynamodb_local: str, redis_url: str) -> AsyncIterator[Settings]:
    """Fresh tables (a unique prefix) in the shared DynamoDB Local, and a flushed Redis.

    The tables are deleted afterwards: a DynamoDB Local holding thousands of tables slows down.
    """
    value = make_settings(dynamodb_local, redis_url)
    await ensure_tables(value)
    yield value
    await drop_tables(value)


async def drop_tables(settings: Settings) -> None:
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)
    for spec in table_specs(settings):
        with contextlib.suppress(client.exceptions.ResourceNotFoundException):
            await asyncio.to_thread(client.delete_table, TableName=spec["TableName"])


@contextlib.asynccontextmanager
async def running_server(settings: Settings) -> AsyncIterator[RunningServer]:
    server = await start_server(settings)
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def stub_for(port: int) -> AsyncIterator[pb_grpc.SocialGraphServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield pb_grpc.SocialGraphServiceStub(channel)


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[RunningServer]:
    async with running_server(settings) as running:
        yield running


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.SocialGraphServiceStub]:
    async with stub_for(server.port) as value:
        yield value


@contextlib.asynccontextmanager
async def running_task(
    run: Callable[[Settings, asyncio.Event], Awaitable[None]], settings: Settings
) -> AsyncIterator[asyncio.Task[None]]:
    """A component's ``run(settings, stop)`` as a task of the test's event loop, stopped on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(run(settings, stop))
    try:
        yield task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=15)


def running_counters(settings: Settings) -> contextlib.AbstractAsyncContextManager[asyncio.Task[None]]:
    """The counters consumer as a task of the test's event loop."""
    return running_task(run_counters, settings)


@pytest.fixture
async def counters(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    async with running_counters(settings) as task:
        yield task


@pytest.fixture
async def event_settings(settings: Settings, kafka_broker: str) -> Settings:
    """``settings`` plus the broker, with topics and a consumer group of this test's own."""
    prefix = settings.table_prefix
    value = replace(
        settings,
        kafka_bootstrap_servers=kafka_broker,
        tweets_topic=f"{prefix}tweets",
        graph_events_topic=f"{prefix}graph",
        fanout_group=f"{prefix}fanout",
        topic_partitions=3,
    )
    await ensure_topics(value)
    return value


def running_relay(settings: Settings) -> contextlib.AbstractAsyncContextManager[asyncio.Task[None]]:
    """The relay as a task of the test's event loop."""
    return running_task(run_relay, settings)


@contextlib.asynccontextmanager
async def running_fanout(
    settings: Settings, *, after_writes: Callable[[Offsets], Awaitable[None]] | None = None
) -> AsyncIterator[tuple[FanoutWorker, asyncio.Task[None]]]:
    """A fanout worker as a task of the test's event loop; its stats stay readable after it stops."""
    stop = asyncio.Event()
    async with fanout_worker(settings, after_writes=after_writes) as worker:
        task = asyncio.create_task(worker.run(stop))
        try:
            yield worker, task
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=15)
