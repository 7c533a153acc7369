"""Real servers for the tests, started on free ports and torn down after: DynamoDB Local, Redis
(single node, a 3-master cluster, and one of a test's own), and the Kafka-protocol broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from socialgraph_devstack.processes import (
    ManagedProcess,
    free_port,
    port_is_open,
    start_dynamodb_local,
    start_kafka_broker,
    start_redis,
    start_redis_cluster,
)

from graph_service.cache.keys import TRUST_GENERATION, TRUST_RUN

__all__ = [
    "STREAMED_ENDPOINTS",
    "DynamoDBLocals",
    "OwnRedis",
    "dynamodb_local",
    "dynamodb_locals",
    "flushed_cluster",
    "kafka_broker",
    "own_redis",
    "redis_cluster",
    "redis_node",
    "redis_url",
    "servers_dir",
]


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


STREAMED_ENDPOINTS: set[str] = set()
"""DynamoDB Local endpoints that have held tables with streams (``tests/support/tables.py`` adds them)."""


class DynamoDBLocals:
    """A DynamoDB Local (in memory), started again, empty, when a test module begins after stream
    tables were made on it and it has run ``RENEW_AFTER_SECONDS``; stopped at the end of the session.

    Not one per session: DynamoDB Local holds every stream record written to it until it stops, and
    its writes slow down as they pile up (``tests/support/tables.py``). Not one per folder either, as
    it was: a worker taking the slowest files first moves between folders at almost every file, and
    each start costs about 6 s of CPU (2.5 s on a quiet machine), about 3 % of a CI run in all.
    Renewing by age keeps the records one instance gathers to what two minutes of tests write.
    Only between modules, since ``dynamodb_local`` is module-scoped: nothing still holds the old one.
    """

    RENEW_AFTER_SECONDS = 120.0

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._module: Path | None = None
        self._process: ManagedProcess | None = None
        self._started = 0.0

    def endpoint_for(self, module: Path) -> str:
        if (
            self._process is not None
            and module != self._module
            and self._endpoint() in STREAMED_ENDPOINTS
            and time.monotonic() - self._started > self.RENEW_AFTER_SECONDS
        ):
            self.stop()
        if self._process is None:
            self._process = start_dynamodb_local(free_port(), self._log_dir)
            self._started = time.monotonic()
        self._module = module
        return self._endpoint()

    def _endpoint(self) -> str:
        assert self._process is not None
        return f"http://127.0.0.1:{self._process.port}"

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None


@pytest.fixture(scope="session")
def dynamodb_locals(servers_dir: Path) -> Iterator[DynamoDBLocals]:
    locals_ = DynamoDBLocals(servers_dir / "logs")
    yield locals_
    locals_.stop()


@pytest.fixture(scope="module")
def dynamodb_local(request: pytest.FixtureRequest, dynamodb_locals: DynamoDBLocals) -> str:
    """The endpoint URL of the DynamoDB Local of this test module (``DynamoDBLocals``)."""
    return dynamodb_locals.endpoint_for(Path(str(request.path)))


@pytest.fixture(scope="session")
def redis_node(servers_dir: Path) -> Iterator[ManagedProcess]:
    proc = start_redis(free_port(), servers_dir / "logs", servers_dir / "redis")
    yield proc
    proc.stop()


def trust_as_reset(client: redis.Redis) -> None:
    """Write the trust record a serving process's keeper leaves after emptying the cache
    (``cache/trust_keeper.py``), so that the cache is trusted without a ``serve`` running."""
    client.set(TRUST_RUN, str(client.info("server")["run_id"]))
    client.set(TRUST_GENERATION, "tests")


@pytest.fixture
def redis_url(redis_node: ManagedProcess) -> str:
    """A clean single-node Redis for this test, its cache trusted (as a serving process's cache
    reset leaves it: ``cache/lease.py``)."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    trust_as_reset(client)
    client.close()
    return f"redis://127.0.0.1:{redis_node.port}/0"


@pytest.fixture(scope="session")
def redis_cluster(servers_dir: Path) -> Iterator[list[int]]:
    ports = [free_port() for _ in range(3)]
    proc = start_redis_cluster(ports, servers_dir / "logs", servers_dir / "cluster")
    yield ports
    proc.stop()


@pytest.fixture
def flushed_cluster(redis_cluster: list[int]) -> Iterator[RedisCluster]:
    """A client of the session's cluster, flushed for this test."""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0], decode_responses=True)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    runs = client.info("server", target_nodes=RedisCluster.PRIMARIES)
    client.set(TRUST_RUN, ",".join(sorted(str(info["run_id"]) for info in runs.values())))
    client.set(TRUST_GENERATION, "tests")
    yield client
    client.close()


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
