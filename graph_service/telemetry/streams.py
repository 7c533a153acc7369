"""Stream consumers' metrics (counters, relay): records read, lag and checkpoint age per shard, leases.

``socialgraph_stream_lag_seconds{consumer, shard}``: 0 when the shard's last read found nothing
new; otherwise now minus the ``ApproximateCreationDateTime`` of the oldest record read and not yet
known to be caught up with (the first record of the batch being handled, then the last one handled
until the next read). It rises while a consumer is stuck on a batch and after a restart shows how
far behind the backlog was. DynamoDB rounds that time down to the second (DynamoDB Local: to the
minute), so the figure errs on the high side by up to that much.

``socialgraph_stream_checkpoint_age_seconds{consumer, shard}``: seconds since this process last
moved the shard's checkpoint (or first started reading the shard); it also grows on an idle shard,
so alert on it together with a lag above 0.

A shard task that fails and is started again keeps both figures as they were (its lag is not
reset to 0 by the restart): only a read or a handled batch changes them.

Leases (``graph_service/streams/leases.py``): ``socialgraph_stream_leases_held{consumer}`` is how
many shards this process holds; ``socialgraph_stream_lease_takeovers_total{consumer}`` counts leases
it took from an owner whose lease had expired (a dead or stuck instance: alert if it keeps rising),
``socialgraph_stream_leases_lost_total{consumer}`` leases it found taken by another instance or
could not renew in time (it stopped reading those shards). A shard whose lease went elsewhere
loses its lag and checkpoint-age series here, as a finished one does: the new owner reports them.

All gauges are computed when scraped, in the scrape's worker thread (they only copy dicts the
loop writes). A finished (closed, fully read) shard's series are removed.
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
    """One stream reader's view of its shards (``consumer``: the checkpoint namespace, e.g. ``counters``).

    Readiness is progress, not reads: a read that returns records proves only that the stream
    answers, and a handler that then fails (Kafka down for the relay, a transaction failing for the
    counters) would otherwise keep a stuck consumer ready forever as its shard task dies and
    restarts. So the heartbeat beats when a batch is handled (its checkpoint moved), when a read
    finds the shard caught up, or when a listing finds no shard to read; and each shard being read
    must itself have progressed within ``stale_after`` (one stuck shard is enough to be not ready).
    """

    def __init__(self, name: str, counters: _ConsumerCounters, *, stale_after: float) -> None:
        self.name = name
        self._records_read = counters.records_read.labels(name)
        self._takeovers = counters.takeovers.labels(name)
        self._lost = counters.lost.labels(name)
        self._leases: set[str] = set()
        self._stale_after = stale_after
        self.heartbeat = Heartbeat(f"stream consumer {name}", stale_after=stale_after, evidence="progress")
        self._behind_since: dict[str, float | None] = {}
        self._checkpointed_at: dict[str, float] = {}
        self._progressed_at: dict[str, float] = {}

    def shard_started(self, shard_id: str) -> None:
        """A task starts reading the shard. A restart after a failure keeps what the earlier tasks
        saw (lag, checkpoint time, last progress): only a read or a handled batch changes them."""
        now = time.monotonic()
        self._behind_since.setdefault(shard_id, None)
        self._checkpointed_at.setdefault(shard_id, now)
        self._progressed_at.setdefault(shard_id, now)

    def listed(self, *, reading: bool) -> None:
        """The stream's shards were listed; ``reading``: some shard is being read (it then shows
        progress itself, so the listing is no evidence), else the listing is the only sign of life."""
        if not reading:
            self.heartbeat.beat()

    def _progressed(self, shard_id: str) -> None:
        self._progressed_at[shard_id] = time.monotonic()
        self.heartbeat.beat()

    def read(self, shard_id: str, records: Sequence[dict[str, Any]]) -> None:
        """A read of the shard answered with ``records`` (none: the consumer is caught up)."""
        if not records:
            self._behind_since[shard_id] = None
            self._progressed(shard_id)
            return
        self._records_read.inc(len(records))
        self._behind_since[shard_id] = record_created_at(records[0]) or time.time()

    def handled(self, shard_id: str, records: Sequence[dict[str, Any]]) -> None:
        """The batch is handled and its checkpoint moved; caught up only once a read says so."""
        self._checkpointed_at[shard_id] = time.monotonic()
        self._behind_since[shard_id] = record_created_at(records[-1]) if records else None
        self._progressed(shard_id)

    def shard_finished(self, shard_id: str) -> None:
        """The shard is closed and read to its end, or another instance reads it now: its series go."""
        self._behind_since.pop(shard_id, None)
        self._checkpointed_at.pop(shard_id, None)
        self._progressed_at.pop(shard_id, None)

    def lease_taken(self, shard_id: str, *, takeover: bool) -> None:
        """This process took the shard's lease; ``takeover``: from an owner whose lease had expired."""
        self._leases.add(shard_id)
        if takeover:
            self._takeovers.inc()

    def lease_given_up(self, shard_id: str, *, lost: bool) -> None:
        """This process no longer holds the shard: released (a clean stop, a finished shard), or
        ``lost`` (taken by another, or not renewed in time); its shard series go with it."""
        self._leases.discard(shard_id)
        if lost:
            self._lost.inc()
            self.shard_finished(shard_id)

    def leases_held(self) -> int:
        return len(self._leases)

    def problem(self) -> str | None:
        """None when ready: running, progress within ``stale_after``, and no shard stuck longer."""
        problem = self.heartbeat.problem()
        if problem is not None:
            return problem
        now = time.monotonic()
        for shard_id, at in sorted(self._progressed_at.items(), key=lambda item: item[1]):
            if now - at > self._stale_after:
                return f"{self.heartbeat.what}: shard {shard_id} made no progress for {now - at:.0f}s"
        return None

    def lags(self) -> dict[str, float]:
        """Seconds behind, per shard being read."""
        now = time.time()
        # list(): a scrape runs in a worker thread while the loop may add a shard (copied in one C call)
        return {s: 0.0 if t is None else max(0.0, now - t) for s, t in list(self._behind_since.items())}

    def checkpoint_ages(self) -> dict[str, float]:
        now = time.monotonic()
        return {s: now - t for s, t in list(self._checkpointed_at.items())}


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
        for consumer in list(self._consumers):
            for shard, seconds in consumer.lags().items():
                lag.add_metric([consumer.name, shard], seconds)
            for shard, seconds in consumer.checkpoint_ages().items():
                age.add_metric([consumer.name, shard], seconds)
        held = GaugeMetricFamily(
            "socialgraph_stream_leases_held",
            "Shards whose lease this process holds, by consumer (it reads those and no other).",
            labels=["consumer"],
        )
        for consumer in list(self._consumers):
            held.add_metric([consumer.name], consumer.leases_held())
        yield lag
        yield age
        yield held


class _ConsumerCounters:
    """The process's counters, labelled by consumer (one registration per registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.records_read = Counter(
            "socialgraph_stream_records_read",
            "Stream records read, by consumer.",
            ["consumer"],
            registry=registry,
        )
        self.takeovers = Counter(
            "socialgraph_stream_lease_takeovers",
            "Shard leases taken over from an owner whose lease had expired (a dead or stuck instance).",
            ["consumer"],
            registry=registry,
        )
        self.lost = Counter(
            "socialgraph_stream_leases_lost",
            "Shard leases this process found taken by another instance or could not renew in time.",
            ["consumer"],
            registry=registry,
        )


class StreamMetrics:
    """The stream readers of one process (the relay has two: ``relay:tweets``, ``relay:followers``)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, stale_after: float = 30.0) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._stale_after = stale_after
        self._counters = _ConsumerCounters(registry)
        self.consumers: list[ConsumerMetrics] = []
        registry.register(_ShardGauges(self.consumers))

    def consumer(self, name: str) -> ConsumerMetrics:
        consumer = ConsumerMetrics(name, self._counters, stale_after=self._stale_after)
        self.consumers.append(consumer)
        return consumer

    def problem(self) -> str | None:
        """None when every reader is ready (started, and progressing), else the first reason why not."""
        if not self.consumers:
            return "no stream reader started yet"
        for consumer in self.consumers:
            problem = consumer.problem()
            if problem is not None:
                return problem
        return None
