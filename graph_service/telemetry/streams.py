"""Stream consumers' metrics (counters, relay): records read, lag and checkpoint age per shard.

``socialgraph_stream_lag_seconds{consumer, shard}``: 0 when the shard's last read found nothing
new; otherwise now minus the ``ApproximateCreationDateTime`` of the oldest record read and not yet
known to be caught up with (the first record of the batch being handled, then the last one handled
until the next read). It rises while a consumer is stuck on a batch and after a restart shows how
far behind the backlog was. DynamoDB rounds that time down to the second (DynamoDB Local: to the
minute), so the figure errs on the high side by up to that much.

``socialgraph_stream_checkpoint_age_seconds{consumer, shard}``: seconds since this process last
moved the shard's checkpoint (or started reading the shard); it also grows on an idle shard, so
alert on it together with a lag above 0.

Both gauges are computed when scraped. A finished (closed, fully read) shard's series are removed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_service.telemetry.readiness import Heartbeat

__all__ = ["ConsumerMetrics", "StreamMetrics", "record_created_at"]


def record_created_at(record: dict[str, Any]) -> float | None:
    """The stream record's ``ApproximateCreationDateTime`` in epoch seconds (None if absent)."""
    when = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(when, datetime):
        return when.timestamp()
    if isinstance(when, int | float):
        return float(when)
    return None


class ConsumerMetrics:
    """One stream reader's view of its shards (``consumer``: the checkpoint namespace, e.g. ``counters``)."""

    def __init__(self, name: str, records_read: Counter, *, stale_after: float) -> None:
        self.name = name
        self._records_read = records_read.labels(name)
        self.heartbeat = Heartbeat(f"stream consumer {name}", stale_after=stale_after)
        self._behind_since: dict[str, float | None] = {}
        self._checkpointed_at: dict[str, float] = {}

    def shard_started(self, shard_id: str) -> None:
        self._behind_since[shard_id] = None
        self._checkpointed_at[shard_id] = time.monotonic()

    def listed(self) -> None:
        """The stream's shards were listed: the stream answers."""
        self.heartbeat.beat()

    def read(self, shard_id: str, records: Sequence[dict[str, Any]]) -> None:
        """A read of the shard answered with ``records`` (none: the consumer is caught up)."""
        self.heartbeat.beat()
        if not records:
            self._behind_since[shard_id] = None
            return
        self._records_read.inc(len(records))
        self._behind_since[shard_id] = record_created_at(records[0]) or time.time()

    def handled(self, shard_id: str, records: Sequence[dict[str, Any]]) -> None:
        """The batch is handled and its checkpoint moved; caught up only once a read says so."""
        self._checkpointed_at[shard_id] = time.monotonic()
        self._behind_since[shard_id] = record_created_at(records[-1]) if records else None

    def shard_finished(self, shard_id: str) -> None:
        self._behind_since.pop(shard_id, None)
        self._checkpointed_at.pop(shard_id, None)

    def lags(self) -> dict[str, float]:
        """Seconds behind, per shard being read."""
        now = time.time()
        return {s: 0.0 if t is None else max(0.0, now - t) for s, t in self._behind_since.items()}

    def checkpoint_ages(self) -> dict[str, float]:
        now = time.monotonic()
        return {s: now - t for s, t in self._checkpointed_at.items()}


class _ShardGauges(Collector):
    def __init__(self, consumers: list[ConsumerMetrics]) -> None:
        self._consumers = consumers

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "socialgraph_stream_lag_seconds",
            "How far behind its stream a consumer is, per shard (0: its last read found nothing new).",
            labels=["consumer", "shard"],
        )
        age = GaugeMetricFamily(
            "socialgraph_stream_checkpoint_age_seconds",
            "Seconds since the consumer last moved the shard's checkpoint (or started reading the shard).",
            labels=["consumer", "shard"],
        )
        for consumer in self._consumers:
            for shard, seconds in consumer.lags().items():
                lag.add_metric([consumer.name, shard], seconds)
            for shard, seconds in consumer.checkpoint_ages().items():
                age.add_metric([consumer.name, shard], seconds)
        yield lag
        yield age


class StreamMetrics:
    """The stream readers of one process (the relay has two: ``relay:tweets``, ``relay:followers``)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, stale_after: float = 30.0) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._stale_after = stale_after
        self._records_read = Counter(
            "socialgraph_stream_records_read",
            "Stream records read, by consumer.",
            ["consumer"],
            registry=registry,
        )
        self.consumers: list[ConsumerMetrics] = []
        registry.register(_ShardGauges(self.consumers))

    def consumer(self, name: str) -> ConsumerMetrics:
        consumer = ConsumerMetrics(name, self._records_read, stale_after=self._stale_after)
        self.consumers.append(consumer)
        return consumer

    def problem(self) -> str | None:
        """None when every reader is ready (started, and read recently), else the first reason why not."""
        if not self.consumers:
            return "no stream reader started yet"
        for consumer in self.consumers:
            problem = consumer.heartbeat.problem()
            if problem is not None:
                return problem
        return None
