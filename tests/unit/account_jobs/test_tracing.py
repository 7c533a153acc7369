"""The account jobs' spans: a span per job run the worker takes, and under it one per batch the job
commits, with the account, the job's kind and the batch's side and size."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import cast

from account_jobs.job import AccountJob
from account_jobs.worker import JobWorker
from graph_service.domain.account_ports import AccountJobStore, JobRegistry
from graph_service.domain.accounts import AccountStatus, Lifecycle, Moved, Side
from graph_service.domain.models import Edge
from tests.support.fakes.changes import RecordingChanges
from tests.support.span_tree import from_sdk, memory_tracer, render
from tests.unit.account_jobs.test_worker import Registry, settle

USER = 7


class Deactivation:
    """What a deactivation's job asks of its store, over a few live edges of ``USER``."""

    def __init__(self, edges: dict[Side, list[Edge]]) -> None:
        self.edges = edges

    async def status(self, user_id: int) -> AccountStatus:
        return AccountStatus(user_id, Lifecycle.DEACTIVATING, 1)

    async def count(self, user_id: int, side: Side | None) -> int:
        return len(self.edges.get(side, [])) if side is not None else 0

    async def set_total(self, user_id: int, gen: int, state: Lifecycle, total: int) -> bool:
        return True

    def per_batch(self, side: Side, *, archive: bool) -> int:
        return 2

    async def live(self, user_id: int, side: Side, limit: int) -> list[Edge]:
        return self.edges.get(side, [])[:limit]

    async def mark(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *states: Lifecycle) -> bool:
        return True

    async def archive(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge]) -> Moved:
        self.edges[side] = [e for e in self.edges[side] if e not in edges]
        return Moved.DONE

    async def finish(self, user_id: int, gen: int, state: Lifecycle) -> bool:
        return True


async def test_a_job_run_is_a_span_with_a_span_per_batch_under_it() -> None:
    tracer, exporter = memory_tracer("serve")
    store = Deactivation({Side.FOLLOWER: [Edge(u, 1) for u in (1, 2, 3)], Side.FOLLOWING: [Edge(4, 1)]})
    job = AccountJob(cast(AccountJobStore, store), RecordingChanges(), tracer=tracer)
    registry = Registry()
    registry.register(USER, Lifecycle.DEACTIVATING)
    worker = JobWorker(
        cast(JobRegistry, registry), job, concurrency=1, poll_seconds=0.01, lease_seconds=30, tracer=tracer
    )
    await worker.poll_once()
    await settle(worker)
    spans = from_sdk(exporter.get_finished_spans())
    assert render(spans) == "\n".join(
        [
            "account_job deactivating  (internal, serve)",
            "├── account_job archive  (internal, serve)",
            "├── account_job archive  (internal, serve)",
            "└── account_job archive  (internal, serve)",
        ]
    )
    run = next(s for s in spans if s.parent_id is None)
    assert run.attributes == {
        "socialgraph.user_id": str(USER),
        "socialgraph.account_job.kind": "deactivating",
        "socialgraph.account_job.gen": 1,
        "socialgraph.account_job.outcome": "finished",
        "socialgraph.account_job.moved": 4,
    }
    batches = sorted((s for s in spans if s.parent_id), key=lambda s: s.start_ns)
    assert [
        (b.attributes["socialgraph.account_job.side"], b.attributes["socialgraph.account_job.batch_size"])
        for b in batches
    ] == [
        ("follower", 2),
        ("follower", 1),
        ("following", 1),
    ]
    assert {b.attributes["socialgraph.user_id"] for b in batches} == {str(USER)}


class Superseding(Deactivation):
    """A later call's generation fences the job's second batch (its edges cannot be marked)."""

    def __init__(self, edges: dict[Side, list[Edge]]) -> None:
        super().__init__(edges)
        self.marks = 0

    async def mark(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *states: Lifecycle) -> bool:
        self.marks += 1
        return self.marks == 1


async def test_a_batch_a_later_call_superseded_is_an_outcome_not_an_error() -> None:
    """Superseded ends the batch's span with ``error.type`` and no error status; the run's span says
    ``superseded``."""
    tracer, exporter = memory_tracer("serve")
    store = Superseding({Side.FOLLOWER: [Edge(u, 1) for u in (1, 2, 3)]})
    job = AccountJob(cast(AccountJobStore, store), RecordingChanges(), tracer=tracer)
    assert await job.run(USER, 1, Lifecycle.DEACTIVATING) is False
    batches = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert [b.name for b in batches] == ["account_job archive", "account_job archive"]
    assert all(b.status.is_unset for b in batches), [b.status for b in batches]
    assert [dict(b.attributes or {}).get("error.type") for b in batches] == [None, "Superseded"]
    assert [event.name for b in batches for event in b.events] == []


class Failing(Deactivation):
    async def archive(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge]) -> Moved:
        raise ConnectionError("DynamoDB unreachable")


async def test_a_batch_that_fails_is_an_error() -> None:
    tracer, exporter = memory_tracer("serve")
    job = AccountJob(cast(AccountJobStore, Failing({Side.FOLLOWER: [Edge(1, 1)]})), RecordingChanges(), tracer=tracer)
    with contextlib.suppress(ConnectionError):
        await job.run(USER, 1, Lifecycle.DEACTIVATING)
    (batch,) = exporter.get_finished_spans()
    assert not batch.status.is_ok
    assert not batch.status.is_unset
    assert dict(batch.attributes or {})["error.type"] == "ConnectionError"
    assert [event.name for event in batch.events] == ["exception"]
