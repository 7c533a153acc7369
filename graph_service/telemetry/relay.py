"""The relay's own metrics (its stream reading is in ``streams.py``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["RelayMetrics"]


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.produced = Counter(
            "socialgraph_relay_events_produced",
            "Events produced to Kafka and acknowledged (acks=all), by topic.",
            ["topic"],
            registry=registry,
        )
        self.skipped = Counter(
            "socialgraph_relay_records_skipped",
            "Stream records that could not make an event (logged), by topic.",
            ["topic"],
            registry=registry,
        )
        self.log_suspicions = Counter(
            "socialgraph_relay_log_suspicions",
            "Times the relay suspected a topic's log of losing records it had produced (a high-water mark"
            " at or below an offset produced, an acknowledgement below an earlier one) and looked again,"
            " by topic; the confirmed ones are socialgraph_relay_rewinds.",
            ["topic"],
            registry=registry,
        )
