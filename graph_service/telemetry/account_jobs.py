"""The account jobs' metrics (SPEC §3b): jobs by kind and outcome, items moved, jobs running.

Every (kind, outcome) series exists from the start at 0, so a rate over one that never happened is
0, not empty.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["JOB_KINDS", "OUTCOMES", "AccountJobMetrics"]

JOB_KINDS = ("deactivating", "reactivating", "deleting")
OUTCOMES = ("finished", "superseded", "failed", "stopped")
"""``superseded``: a later call changed the account's state; ``stopped``: the process stopped (the
job is taken over where it left off)."""


class AccountJobMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.jobs = Counter(
            "socialgraph_account_jobs",
            "Account jobs that ended in this process, by kind and outcome.",
            ["kind", "outcome"],
            registry=registry,
        )
        self.items = Counter(
            "socialgraph_account_job_items",
            "Edges and requests (and archived or own items of a deleted account) the account jobs moved.",
            ["kind"],
            registry=registry,
        )
        self.running = Gauge(
            "socialgraph_account_jobs_running", "Account jobs this process is running now.", registry=registry
        )
        for kind in JOB_KINDS:
            self.items.labels(kind)
            for outcome in OUTCOMES:
                self.jobs.labels(kind, outcome)
