"""Redis clients whose every call is timed and counted by operation (``telemetry/backend_calls.py``)
and, with tracing on, is a client span of the request that made it (OpenTelemetry's conventions
for Redis).

One wrap at the client, not at each call site: ``ObservedRedis`` and ``ObservedCluster`` override
``execute_command`` (every command, scripts' ``EVALSHA`` and ``SCRIPT LOAD`` included) and return
pipelines whose ``execute`` is observed as one call (``PIPELINE``, or ``MULTI`` for a transaction:
one round trip, ``db.operation.batch.size`` commands). The hand-packed script batches of
``packed.py``, which write to a pooled connection themselves, are observed the same way
(``observe``). The near cache's invalidation link is a plain client of its own, not observed.

Span: named after the operation (``GET``, ``EVALSHA``, ``PIPELINE``), kind CLIENT, with
``db.system`` ``redis``, ``db.operation.name``, ``server.address``/``server.port`` (a Cluster's
seed node), ``db.namespace`` (the database index); never a key or an argument. A failure sets the
status to error and ``error.type`` to the exception's class. A call made outside any span (a
lease renewal, a keeper's sweep) makes no span: it would be a trace of one span every few seconds;
it is counted all the same.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import NoScriptError

from graph_service.telemetry.backend_calls import RedisCallMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["ObservedCluster", "ObservedRedis", "RedisObserver", "observe"]

T = TypeVar("T")


class RedisObserver:
    """Times, counts and (with a ``tracer``) traces the calls of one client."""

    def __init__(self, url: str, metrics: RedisCallMetrics, tracer: Tracer | None = None) -> None:
        self._metrics = metrics
        self._tracer = tracer
        parts = urlsplit(url)
        self._attributes: dict[str, Any] = {
            "db.system": "redis",
            "server.address": parts.hostname or parts.path,  # a unix socket's path
            "server.port": parts.port or 6379,
        }
        database = parts.path.strip("/")
        if parts.scheme != "unix" and database.isdigit():
            self._attributes["db.namespace"] = database
        if tracer is not None:
            from opentelemetry import trace

            self._current_span = trace.get_current_span
            self._client = trace.SpanKind.CLIENT

    async def run(self, operation: str, pending: Awaitable[T], batch: int = 0) -> T:
        """Await ``pending``, the call ``operation`` (of ``batch`` commands for a pipeline)."""
        # Only inside a span that records: a call outside any span (a poll, a lease renewal) or in an
        # unsampled request makes no span, and pays for none.
        if self._tracer is not None and self._current_span().is_recording():
            return await self._traced(operation, pending, batch)
        started = time.perf_counter()
        try:
            return await pending
        except Exception as exc:
            self._metrics.failed(operation, type(exc).__name__)
            raise
        finally:
            self._metrics.observe(operation, time.perf_counter() - started)

    async def _traced(self, operation: str, pending: Awaitable[T], batch: int) -> T:
        assert self._tracer is not None
        attributes = {**self._attributes, "db.operation.name": operation}
        if batch:
            attributes["db.operation.batch.size"] = batch
        with self._tracer.start_as_current_span(
            operation, kind=self._client, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            started = time.perf_counter()
            try:
                return await pending
            except Exception as exc:
                from opentelemetry.trace import Status, StatusCode

                self._metrics.failed(operation, type(exc).__name__)
                span.set_attribute("error.type", type(exc).__name__)
                if not isinstance(exc, NoScriptError):  # answered: the script is loaded and run again at once
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise
            finally:
                self._metrics.observe(operation, time.perf_counter() - started)


def _name(command: object) -> str:
    if isinstance(command, str):
        return command
    return command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)


class ObservedRedis(Redis):
    """A single-node client whose commands and pipelines its ``observer`` sees."""

    observer: RedisObserver | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        # redis-py leaves the single-node execute_command unannotated
        if self.observer is None:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await self.observer.run(_name(args[0]), super().execute_command(*args, **options))  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> ObservedPipeline:
        pipe = ObservedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.observer = self.observer
        return pipe


class ObservedPipeline(Pipeline):
    observer: RedisObserver | None = None

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        if self.observer is None or not self.command_stack:
            return await super().execute(raise_on_error)
        operation = "MULTI" if self.is_transaction or self.explicit_transaction else "PIPELINE"
        return await self.observer.run(operation, super().execute(raise_on_error), len(self.command_stack))


class ObservedCluster(RedisCluster):
    """A Redis Cluster client whose commands and pipelines its ``observer`` sees."""

    observer: RedisObserver | None = None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self.observer is None:
            return await super().execute_command(*args, **kwargs)
        return await self.observer.run(_name(args[0]), super().execute_command(*args, **kwargs))

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ObservedClusterPipeline:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # type: ignore[return-value]  # raises: not on a cluster
        # ClusterPipeline's _event_dispatcher is declared on a base and set at run time, as redis-py's own does
        pipe = ObservedClusterPipeline(self, transaction)  # type: ignore[abstract]
        pipe.observer = self.observer
        return pipe


class ObservedClusterPipeline(ClusterPipeline):
    observer: RedisObserver | None = None

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        count = len(self)
        if self.observer is None or not count:
            return await super().execute(raise_on_error, allow_redirections)
        operation = "MULTI" if self._transaction else "PIPELINE"
        return await self.observer.run(operation, super().execute(raise_on_error, allow_redirections), count)


async def observe(client: object, operation: str, pending: Awaitable[T], batch: int = 0) -> T:
    """Await ``pending``, a call made on one of ``client``'s connections without its
    ``execute_command`` (``packed.py``), observed as that client's calls are."""
    observer = client.observer if isinstance(client, ObservedRedis | ObservedCluster) else None
    if observer is None:
        return await pending
    return await observer.run(operation, pending, batch)
