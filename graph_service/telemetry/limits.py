"""The abuse limits' metrics (SPEC §7.2): follows refused, and the rate limit failing open.

``socialgraph_follows_refused_total{reason, caller}``: ``RATE_LIMITED`` (over the follow rate
limit) or ``FOLLOW_LIMIT`` (at the following cap), counted where the call's error is mapped.
``socialgraph_follow_rate_limit_failed_open_total``: follows let through uncounted because Redis
failed; ``socialgraph_follow_rate_limit_breaker_open`` is 1 while Redis is not asked after a failure.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["REFUSALS", "LimitMetrics"]

REFUSALS = ("RATE_LIMITED", "FOLLOW_LIMIT")
"""The ErrorInfo reasons that are a limit refusing a follow."""


class LimitMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.refused = Counter(
            "socialgraph_follows_refused",
            "Follows refused by an abuse limit, by reason (RATE_LIMITED, FOLLOW_LIMIT) and caller.",
            ["reason", "caller"],
            registry=registry,
        )
        self.failed_open = Counter(
            "socialgraph_follow_rate_limit_failed_open",
            "Follows let through uncounted because the rate limit's Redis failed.",
            registry=registry,
        )
        self._breaker = Gauge(
            "socialgraph_follow_rate_limit_breaker_open",
            "1 while the follow rate limit does not ask Redis (for a second after a Redis failure).",
            registry=registry,
        )

    def refusal(self, reason: str, caller: str) -> None:
        """Count a refused follow if ``reason`` is a limit's (other reasons are ignored)."""
        if reason in REFUSALS:
            self.refused.labels(reason, caller).inc()

    def watch_breaker(self, breaker_open: Callable[[], bool]) -> None:
        self._breaker.set_function(lambda: float(breaker_open()))
