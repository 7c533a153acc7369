"""The counters consumer's own metrics (its stream reading is in ``streams.py``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["CountersMetrics"]


class CountersMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.applied = Counter(
            "socialgraph_counters_changes_applied",
            "Edge changes (follows made or removed) applied to the counters, each exactly once.",
            registry=registry,
        )
        self.debts = Gauge(
            "socialgraph_counters_repair_debts",
            "Cache repairs owed because Redis failed (stored next to the checkpoints, settled when Redis answers).",
            registry=registry,
        )

    def owed(self) -> float:
        """The repairs owed now (what ``socialgraph_counters_repair_debts`` reads)."""
        (family,) = self.debts.collect()
        return float(family.samples[0].value)
