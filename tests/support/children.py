"""``socialgraph serve`` and the consumers as child processes of a test, so it can signal them by PID
(``kill -9``, ``SIGTERM``) as a crash or an operator would; an in-process runtime cannot be killed.

Each child gets ``command_environment`` (the test's tables and Redis), a gRPC port and a metrics
port of its own, the test's fast stream polling and its page-token key; its output goes to a log file the failure
messages quote. Leaving the ``async with`` stops a child that still runs (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from socialgraph_devstack.processes import free_port

from graph_service.settings import Settings
from tests.support.commands import REPO, command_environment
from tests.support.polling import eventually
from tests.support.scrape import Scrape, get, scrape

__all__ = ["SERVING", "Child", "child_process", "health_status", "kafka_environment", "serve_process"]

SERVING = health_pb2.HealthCheckResponse.SERVING


@dataclass
class Child:
    """One ``python -m graph_service <command>`` process."""

    command: str
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int
    address: str = ""
    """``host:port`` of the gRPC server (``serve`` only)."""

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def log(self) -> str:
        """The child's output so far (its last 4,000 characters), for failure messages."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def running(self) -> bool:
        return self.process.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def exit_code(self, timeout: float) -> int | None:  # noqa: ASYNC109 - a deadline for a process, not a cancellation
        """Its exit code once it has exited, or None if it still runs after ``timeout`` seconds."""
        try:
            return await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            return None

    async def kill(self) -> int:
        """``kill -9`` and reap it."""
        self.process.kill()
        return await asyncio.to_thread(self.process.wait)

    async def stop(self, timeout: float = 20.0) -> int:  # noqa: ASYNC109 - see exit_code
        """SIGTERM; SIGKILL if it has not exited within ``timeout``. Its exit code."""
        if self.running():
            self.send(signal.SIGTERM)
        code = await self.exit_code(timeout)
        return await self.kill() if code is None else code

    async def metrics(self) -> Scrape:
        return await scrape(self.metrics_port)


def kafka_environment(settings: Settings) -> dict[str, str]:
    """The ``SG_*`` variables of the broker, topics and group of ``settings``, for a child process."""
    return {
        "SG_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "SG_TWEETS_TOPIC": settings.tweets_topic,
        "SG_GRAPH_EVENTS_TOPIC": settings.graph_events_topic,
        "SG_FANOUT_GROUP": settings.fanout_group,
        "SG_TOPIC_PARTITIONS": str(settings.topic_partitions),
    }


def _start(settings: Settings, command: str, log_dir: Path, extra: dict[str, str]) -> Child:
    log_dir.mkdir(parents=True, exist_ok=True)
    metrics_port = free_port()
    address = f"127.0.0.1:{free_port()}" if command == "serve" else ""
    defaults = {
        "SG_METRICS_ADDRESS": f"127.0.0.1:{metrics_port}",
        "SG_STREAM_POLL_SECONDS": str(settings.stream_poll_seconds),
        "SG_SHARD_REFRESH_SECONDS": str(settings.shard_refresh_seconds),
        **({"SG_GRPC_ADDRESS": address} if address else {}),
        # The tests' servers in process sign page tokens with this key: a child's tokens must match.
        **({"SG_PAGE_TOKEN_SECRET": settings.page_token_secret} if settings.page_token_secret else {}),
    }
    env = command_environment(settings, **{**defaults, **extra})  # ``extra`` may replace a default
    log_path = log_dir / f"{command}.log"
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "graph_service", command],
            env=env,
            cwd=REPO,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    return Child(command, process, log_path, metrics_port, address)


async def health_status(address: str) -> int | None:
    """What the health service says for the whole server, None if it does not answer."""
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.aio.AioRpcError:
            return None
        return int(reply.status)


@contextlib.asynccontextmanager
async def child_process(settings: Settings, command: str, log_dir: Path, **extra: str) -> AsyncIterator[Child]:
    """``python -m graph_service <command>`` (``counters``, ``relay``, ``fanout``) against ``settings``'
    tables and Redis, with ``extra`` ``SG_*`` variables; yielded once ``/readyz`` says it is reading
    (a consumer that cannot reach DynamoDB while it starts exits 3, by design: not yet a fault run)."""
    child = _start(settings, command, log_dir, extra)
    try:

        async def ready() -> bool:
            assert child.running(), f"{command} exited with {child.process.returncode}: {child.log()}"
            try:
                return (await get(child.metrics_port, "/readyz")).status == 200
            except OSError:
                return False

        await eventually(ready, bool, timeout=60)
        yield child
    finally:
        await child.stop()


@contextlib.asynccontextmanager
async def serve_process(settings: Settings, log_dir: Path, **extra: str) -> AsyncIterator[Child]:
    """``python -m graph_service serve`` against ``settings``' tables and Redis, with ``extra``
    ``SG_*`` variables; yielded once its health service says SERVING."""
    child = _start(settings, "serve", log_dir, extra)
    try:

        async def status() -> int | None:
            assert child.running(), f"serve exited with {child.process.returncode}: {child.log()}"
            return await health_status(child.address)

        await eventually(status, lambda s: s == SERVING, timeout=60)
        yield child
    finally:
        await child.stop()
