"""Runs the registered account jobs: each serving process runs up to ``SG_ACCOUNT_JOBS`` at once.

Why in ``serve``: a job needs exactly what a serving process already has (the tables, and the
Redis of the caches, the rate limit and the timelines to forget a deleted account), ``serve`` runs
wherever the service runs (ECS and Kubernetes alike, while counters and relay may be Lambda
functions that live for seconds), and its replicas share the jobs through leases. A job's work
is DynamoDB round trips, not CPU; ``SG_ACCOUNT_JOBS=0`` keeps it off a replica.

A job that fails waits (doubling, up to 5 minutes) before it is taken again. The registry
(``followers`` pk=0) is read every ``poll_seconds``. A job is taken under a lease
(``lease_seconds``) renewed at a third of it; a process that dies (kill -9) stops renewing, and
another takes the job over once the lease ran out, where the last committed batch left it. A
registered job whose account moved on (a later call) is dropped: the later call registered its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import TYPE_CHECKING

import structlog

from account_jobs.job import AccountJob, JobReport
from account_jobs.tracing import JobSpans
from graph_service.domain.account_ports import JobRegistry
from graph_service.domain.accounts import JobEntry, Lifecycle
from graph_service.domain.times import now_us
from graph_service.telemetry.account_jobs import AccountJobMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["JobWorker"]

log = structlog.get_logger(__name__)
RETRY_BASE_SECONDS = 1.0
RETRY_CAP_SECONDS = 300.0
"""A failed job waits 1 s, 2 s, 4 s... at most 5 minutes before it is taken again (by any process),
so jobs that keep failing neither spin nor keep the others from their turn."""


def _now_ms() -> int:
    return now_us() // 1000


class JobWorker:
    def __init__(
        self,
        store: JobRegistry,
        job: AccountJob,
        *,
        concurrency: int,
        poll_seconds: float,
        lease_seconds: float,
        metrics: AccountJobMetrics | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``tracer``: a span per job run (``tracing.py``; None: the process's, if it traces)."""
        self._spans = JobSpans(tracer)
        self._store = store
        self._job = job
        self._concurrency = concurrency
        self._poll = poll_seconds
        self._lease_ms = int(lease_seconds * 1000)
        self._metrics = metrics if metrics is not None else AccountJobMetrics()
        self.owner = f"{uuid.uuid4().hex[:12]}"
        self._running: dict[int, asyncio.Task[None]] = {}
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._loop is None and self._concurrency > 0:
            self._loop = asyncio.create_task(self._poll_forever(), name="account-jobs")

    async def aclose(self) -> None:
        """Stop taking jobs, cancel the running ones (each gives its lease back: another process may
        take it over at once; what a job committed stays)."""
        tasks = [t for t in (self._loop, *self._running.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _poll_forever(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception as exc:
                log.warning("account_jobs_poll_failed", error=str(exc))
            await asyncio.sleep(self._poll)

    async def poll_once(self) -> None:
        """Take the registered jobs this process has room for."""
        for entry in await self._store.jobs():
            if len(self._running) >= self._concurrency:
                return
            if entry.user_id in self._running or (entry.owner != self.owner and entry.until_ms > _now_ms()):
                continue
            status = await self._store.status(entry.user_id)
            if status.gen != entry.gen or not status.state.job_running:
                await self._store.drop_job(entry.user_id, entry.gen)
                continue
            now = _now_ms()
            if await self._store.lease(entry.user_id, entry.gen, self.owner, now, now + self._lease_ms):
                task = asyncio.create_task(self._run(entry, status.state), name=f"account-job-{entry.user_id}")
                self._running[entry.user_id] = task

    async def _run(self, entry: JobEntry, state: Lifecycle) -> None:
        kind = state.name.lower()
        items = self._metrics.items.labels(kind)
        report = JobReport(entry.user_id, kind, items.inc)
        renewing = asyncio.create_task(self._renew(entry))
        started = time.monotonic()
        log.info("account_job_started", user_id=entry.user_id, job=kind, gen=entry.gen)
        self._metrics.running.inc()
        outcome = "failed"
        try:
            with self._spans.run(entry.user_id, kind, entry.gen) as span:
                finished = await self._job.run(entry.user_id, entry.gen, state, report)
                outcome = "finished" if finished else "superseded"
                JobSpans.ended(span, outcome, report.moved)
        except asyncio.CancelledError:
            outcome = "stopped"
            raise
        except Exception as exc:
            log.warning("account_job_failed", user_id=entry.user_id, job=kind, error=str(exc), moved=report.moved)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            self._metrics.running.dec()
            self._metrics.jobs.labels(kind, outcome).inc()
            if outcome == "failed":  # waits before anyone takes it again, longer after each failure
                delay_ms = int(min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2**entry.tries) * 1000)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._store.defer(entry.user_id, entry.gen, self.owner, delay_ms))
            elif outcome != "finished":
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._store.release(entry.user_id, entry.gen, self.owner))
            self._running.pop(entry.user_id, None)  # only now: a poll meanwhile must not take it again
            log.info(
                "account_job_ended",
                user_id=entry.user_id,
                job=kind,
                outcome=outcome,
                moved=report.moved,
                seconds=round(time.monotonic() - started, 3),
            )

    async def _renew(self, entry: JobEntry) -> None:
        while True:
            await asyncio.sleep(self._lease_ms / 3000)
            now = _now_ms()
            try:
                held = await self._store.lease(entry.user_id, entry.gen, self.owner, now, now + self._lease_ms)
            except Exception as exc:
                log.warning("account_job_lease_renewal_failed", user_id=entry.user_id, error=str(exc))
                continue
            if not held:
                # Finished meanwhile, superseded, or taken over after a stall longer than the lease:
                # the job's own writes are fenced by the account's state, so it may go on.
                log.info("account_job_lease_lost", user_id=entry.user_id, gen=entry.gen)
                return
