"""The fanout worker's metrics: Kafka consumer lag per partition, timeline entries written, skips.

``socialgraph_fanout_kafka_lag{topic, partition}`` is Kafka's own definition of a group's lag:
the partition's high-water mark minus the offset this worker committed (or started from), read
when scraped, for the partitions assigned to this worker whose high-water mark it has seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graph_service.telemetry.readiness import Heartbeat

__all__ = ["FanoutMetrics", "LagSource"]

LagSource = Callable[[], dict[tuple[str, int], int]]
"""(topic, partition) -> records not yet committed."""


SKIP_REASONS = ("malformed", "unknown_type", "unknown_version")
"""Why a record is skipped (``graph_service.events.records.UnreadableEvent``), each series present from the start."""


class _KafkaLag(Collector):
    def __init__(self) -> None:
        self.source: LagSource = dict

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "socialgraph_fanout_kafka_lag",
            "Records of the partition not yet committed by this worker (high-water mark - committed offset).",
            labels=["topic", "partition"],
        )
        for (topic, partition), lag in sorted(self.source().items()):
            family.add_metric([topic, str(partition)], lag)
        yield family


class FanoutMetrics:
    def __init__(
        self, registry: CollectorRegistry | None = None, *, kinds: Iterable[str] = (), stale_after: float = 30.0
    ) -> None:
        """``kinds``: the names of the kinds of event (``graph_service.events.kinds.KINDS``, which this
        layer does not import), each series of ``socialgraph_fanout_events`` present from the start."""
        names = tuple(kinds)
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.heartbeat = Heartbeat("fanout Kafka consumer", stale_after=stale_after, evidence="answer from the broker")
        self.entries_written = Counter(
            "socialgraph_fanout_timeline_entries_written",
            "Tweets pushed into home timelines (one per follower's timeline written).",
            registry=registry,
        )
        self.celebrity_skips = Counter(
            "socialgraph_fanout_celebrity_skips",
            "Tweets not pushed because their author has at least SG_CELEBRITY_THRESHOLD followers (pulled at read).",
            registry=registry,
        )
        self.away_skips = Counter(
            "socialgraph_fanout_away_skips",
            "Tweets not recorded or pushed because their author is deactivated or deleted (SPEC §3b).",
            registry=registry,
        )
        listed = f" ({', '.join(names)})" if names else ""
        self.events = Counter(
            "socialgraph_fanout_events", f"Events applied, by kind{listed}.", ["kind"], registry=registry
        )
        self.skipped = Counter(
            "socialgraph_fanout_records_skipped",
            "Records skipped as unreadable, by reason (malformed, unknown_type, unknown_version).",
            ["reason"],
            registry=registry,
        )
        for reason in SKIP_REASONS:  # 0 from the start: an alert on a rate has a series to read
            self.skipped.labels(reason)
        for name in names:
            self.events.labels(name)
        self.retries = Counter(
            "socialgraph_fanout_retries",
            "Retries of a record because Redis or DynamoDB was unreachable.",
            registry=registry,
        )
        self._lag = _KafkaLag()
        registry.register(self._lag)

    def watch_lag(self, source: LagSource) -> None:
        """Read the per-partition lag from ``source`` when scraped."""
        self._lag.source = source
