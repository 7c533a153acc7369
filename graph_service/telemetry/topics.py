"""Metrics of the topic checks of the relay and the fanout (``graph_service.events.topics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["TopicMetrics"]


class TopicMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.ready = Gauge(
            "socialgraph_topic_ready",
            "1 when the topic exists with SG_TOPIC_PARTITIONS partitions at the last check, else 0.",
            ["topic"],
            registry=registry,
        )
        self.check_failures = Counter(
            "socialgraph_topic_check_failures",
            "Topic checks that found a problem, by kind (missing, partitions, unreachable).",
            ["kind"],
            registry=registry,
        )
        self.rewinds = Counter(
            "socialgraph_relay_rewinds",
            "Times the relay found a topic's log behind what it had produced and re-produced the streams.",
            ["topic"],
            registry=registry,
        )
