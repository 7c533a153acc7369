"""Shared by the benchmarks: a private local stack on free ports, and a closed-loop load generator."""

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

from socialgraph_devstack.processes import free_port, port_is_open, start_dynamodb_local, start_redis
from socialgraph_devstack.stack import local_environment

from graph_service.dynamodb.provisioning import ensure_tables
from graph_service.settings import Settings

__all__ = ["Stack", "closed_loop", "echo_server", "http_get", "private_stack", "start_process", "stop_process"]


@dataclass(frozen=True)
class Stack:
    env: dict[str, str]
    settings: Settings
    grpc_target: str


def start_process(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, *args], env=env, stdout=out, stderr=subprocess.STDOUT)


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` of a local HTTP server (a process's metrics port): status and body."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not port_is_open(port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listening on {port}")
        time.sleep(0.05)


@contextlib.contextmanager
def private_stack(*, with_service: bool = True) -> Iterator[Stack]:
    """DynamoDB Local (in memory), Redis and (optionally) the service, all on free ports."""
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmp, contextlib.ExitStack() as cleanup:
        base = Path(tmp)
        dynamo = start_dynamodb_local(free_port(), base / "logs")
        cleanup.callback(dynamo.stop)
        redis = start_redis(free_port(), base / "logs", base / "redis")
        cleanup.callback(redis.stop)
        grpc_port = free_port()
        env = local_environment(dynamo.port, redis.port)
        env.update(SG_GRPC_ADDRESS=f"127.0.0.1:{grpc_port}", SG_LOG_LEVEL="warning", SG_TABLE_PREFIX="bench_")
        settings = Settings.from_env(env)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        asyncio.run(ensure_tables(settings))
        if with_service:
            service = start_process(["-m", "graph_service", "serve"], env, base / "logs" / "serve.log")
            cleanup.callback(stop_process, service)
            wait_port(grpc_port)
        yield Stack(env=env, settings=settings, grpc_target=f"127.0.0.1:{grpc_port}")


@contextlib.contextmanager
def echo_server(env: dict[str, str], log_dir: Path, *, fence_on: str | None = None) -> Iterator[int]:
    """``bench.echo_server`` (the bare grpc.aio baseline) on a free port, listening; its port.
    ``fence_on``: a Redis URL, and its ``IsFollowing`` waits for a near-cache read fence there."""
    port = free_port()
    extra = [] if fence_on is None else [fence_on]
    echo = start_process(["-m", "bench.echo_server", str(port), *extra], env, log_dir / "echo.log")
    try:
        wait_port(port)
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
