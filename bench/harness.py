"""Shared by the benchmarks: a private local stack on free ports (single Redis or a 3-master
Redis Cluster), and a closed-loop load generator."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.cluster import RedisCluster
from socialgraph_devstack.processes import (
    ManagedProcess,
    free_port,
    port_is_open,
    start_dynamodb_local,
    start_redis,
    start_redis_cluster,
)

from bench.stack_env import StackPorts, process_environment, stack_environment, stack_ports
from graph_service.cache.keys import TRUST_GENERATION
from graph_service.dynamodb.provisioning import ensure_tables
from graph_service.settings import Settings

__all__ = [
    "Stack",
    "closed_loop",
    "echo_server",
    "http_get",
    "private_stack",
    "start_process",
    "stop_process",
    "wait_port",
]


@dataclass(frozen=True)
class Stack:
    env: dict[str, str]
    """The environment of the stack's processes, without a metrics address (``start_process``
    gives each its own)."""
    settings: Settings
    grpc_target: str
    ports: StackPorts

    @property
    def cluster(self) -> bool:
        return self.ports.cluster


def start_process(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python args`` with its output appended to ``log``. Its metrics get a free port of their own
    unless ``env`` names one: left to its default, a ``graph_service`` process would take 9464-9467,
    which a running ``socialgraph up`` holds (and two of ours would take the same one)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, *args], env=process_environment(env), stdout=out, stderr=subprocess.STDOUT
        )


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` of a local HTTP server (a process's metrics port): status and body."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_port(port: int, timeout: float = 30.0, process: subprocess.Popen[bytes] | None = None) -> None:
    """Polled until something listens on ``port``; fails at once if ``process`` (the one meant to
    listen there) exited."""
    deadline = time.monotonic() + timeout
    while not port_is_open(port):
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process meant to listen on {port} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listening on {port}")
        time.sleep(0.05)


def _start_redis(ports: StackPorts, base: Path) -> ManagedProcess:
    if ports.cluster:
        return start_redis_cluster(list(ports.redis), base / "logs", base / "cluster")
    return start_redis(ports.redis[0], base / "logs", base / "redis")


def wait_trusted(ports: StackPorts, timeout: float = 30.0) -> None:
    """Polled until the cache's trust record has a generation: ``serve`` writes it on a fresh Redis
    or Cluster itself (its first lease round, ``cache/trust_keeper.py``), and until then every read
    would go to DynamoDB and the figures would measure that."""
    client: redis.Redis | RedisCluster = (
        RedisCluster(host="127.0.0.1", port=ports.redis[0]) if ports.cluster else redis.Redis(port=ports.redis[0])
    )
    deadline = time.monotonic() + timeout
    try:
        while not client.exists(TRUST_GENERATION):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cache on {ports.redis_url} was not trusted within {timeout} s")
            time.sleep(0.05)
    finally:
        client.close()


@contextlib.contextmanager
def private_stack(*, with_service: bool = True, cluster: bool = False) -> Iterator[Stack]:
    """DynamoDB Local (in memory), Redis (or a 3-master Redis Cluster) and (optionally) the service,
    all on free ports (``bench/stack_env.py``); the service's cache trusted before it yields."""
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmp, contextlib.ExitStack() as cleanup:
        base = Path(tmp)
        ports = stack_ports(cluster=cluster)
        dynamo = start_dynamodb_local(ports.dynamodb, base / "logs")
        cleanup.callback(dynamo.stop)
        redis_server = _start_redis(ports, base)
        cleanup.callback(redis_server.stop)
        env = stack_environment(ports)
        settings = Settings.from_env(env)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        asyncio.run(ensure_tables(settings))
        if with_service:
            serve_env = process_environment(env, ports.metrics)
            service = start_process(["-m", "graph_service", "serve"], serve_env, base / "logs" / "serve.log")
            cleanup.callback(stop_process, service)
            wait_port(ports.grpc, 60.0, service)
            wait_trusted(ports)
        yield Stack(env=env, settings=settings, grpc_target=f"127.0.0.1:{ports.grpc}", ports=ports)


@contextlib.contextmanager
def echo_server(stack: Stack, log_dir: Path, *, fenced: bool = False) -> Iterator[int]:
    """``bench.echo_server`` (the bare grpc.aio baseline) on a free port, listening; its port.
    ``fenced``: its ``IsFollowing`` first waits for a near-cache read fence on the stack's Redis
    (given ``cluster`` after the URL on a Redis Cluster): the floor of a strongly consistent read."""
    port = free_port()
    fence = [stack.settings.redis_url, *(["cluster"] if stack.cluster else [])] if fenced else []
    log = log_dir / ("echo-fenced.log" if fenced else "echo.log")
    echo = start_process(["-m", "bench.echo_server", str(port), *fence], stack.env, log)
    try:
        wait_port(port, process=echo)
        yield port
    finally:
        stop_process(echo)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def closed_loop(call: Callable[[], Awaitable[object]], *, concurrency: int, seconds: float) -> float:
    """Calls per second with ``concurrency`` callers issuing back-to-back calls for ``seconds``."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)
