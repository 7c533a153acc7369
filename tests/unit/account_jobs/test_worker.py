"""The account jobs' worker over an in-memory registry: which registered jobs it takes, drops or
leaves, how many at once, and how a failing job waits before it is taken again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any, cast

from account_jobs.job import AccountJob, JobReport
from account_jobs.worker import JobWorker
from graph_service.domain.account_ports import JobRegistry
from graph_service.domain.accounts import AccountStatus, JobEntry, Lifecycle


@dataclass
class Registry:
    """``JobRegistry`` in memory."""

    entries: dict[int, JobEntry] = field(default_factory=dict)
    statuses: dict[int, AccountStatus] = field(default_factory=dict)
    dropped: list[int] = field(default_factory=list)
    deferred: list[tuple[int, int]] = field(default_factory=list)
    released: list[int] = field(default_factory=list)

    def register(self, user_id: int, state: Lifecycle, gen: int = 1, **entry: Any) -> None:
        self.statuses[user_id] = AccountStatus(user_id, state, gen)
        self.entries[user_id] = JobEntry(user_id, gen, entry.get("owner", ""), entry.get("until_ms", 0))

    async def jobs(self) -> list[JobEntry]:
        return [self.entries[u] for u in sorted(self.entries)]

    async def status(self, user_id: int) -> AccountStatus:
        return self.statuses[user_id]

    async def drop_job(self, user_id: int, gen: int) -> None:
        self.dropped.append(user_id)
        del self.entries[user_id]

    async def lease(self, user_id: int, gen: int, owner: str, now_ms: int, until_ms: int) -> bool:
        entry = self.entries.get(user_id)
        if entry is None or entry.gen != gen or (entry.owner not in ("", owner) and entry.until_ms >= now_ms):
            return False
        self.entries[user_id] = replace(entry, owner=owner, until_ms=until_ms)
        return True

    async def release(self, user_id: int, gen: int, owner: str) -> None:
        self.released.append(user_id)

    async def defer(self, user_id: int, gen: int, owner: str, delay_ms: int) -> None:
        self.deferred.append((user_id, delay_ms))
        entry = self.entries[user_id]
        self.entries[user_id] = replace(entry, owner="", until_ms=10**15, tries=entry.tries + 1)


class ScriptedJob:
    """Runs a job as told: ``outcome[user]`` is True (finished), False (superseded) or an exception;
    ``gate`` holds every job until set."""

    def __init__(self, registry: Registry, outcome: dict[int, bool | Exception]) -> None:
        self.registry = registry
        self.outcome = outcome
        self.ran: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def run(self, user_id: int, gen: int, state: Lifecycle, report: JobReport | None = None) -> bool:
        self.ran.append(user_id)
        await self.gate.wait()
        result = self.outcome.get(user_id, True)
        if isinstance(result, Exception):
            raise result
        if result:
            del self.registry.entries[user_id]  # finish() takes it out of the registry
        return result


def worker(registry: Registry, job: ScriptedJob, concurrency: int = 2) -> JobWorker:
    return JobWorker(
        cast(JobRegistry, registry),
        cast(AccountJob, job),
        concurrency=concurrency,
        poll_seconds=0.01,
        lease_seconds=30,
    )


async def settle(w: JobWorker) -> None:
    """Until every job the worker started has ended."""
    running = list(w._running.values())
    await asyncio.gather(*running, return_exceptions=True)


async def test_it_takes_the_jobs_it_has_room_for_and_drops_those_of_accounts_that_moved_on() -> None:
    registry = Registry()
    registry.register(1, Lifecycle.DEACTIVATING)
    registry.register(2, Lifecycle.DEACTIVATED)  # its job ended (a later poll raced its finish)
    registry.register(3, Lifecycle.REACTIVATING, gen=4)
    registry.statuses[3] = AccountStatus(3, Lifecycle.DEACTIVATING, 5)  # a later call moved it on
    registry.register(4, Lifecycle.DELETING)
    registry.register(5, Lifecycle.DEACTIVATING)
    job = ScriptedJob(registry, {})
    job.gate.clear()
    w = worker(registry, job, concurrency=2)
    await w.poll_once()
    taken = sorted(w._running)
    assert (taken, sorted(registry.dropped)) == ([1, 4], [2, 3])  # two at once; 5 waits its turn
    job.gate.set()
    await settle(w)
    await w.poll_once()
    await settle(w)
    assert sorted(job.ran) == [1, 4, 5]
    assert registry.entries == {}


async def test_a_job_another_process_holds_is_left_until_its_lease_runs_out() -> None:
    registry = Registry()
    registry.register(1, Lifecycle.DEACTIVATING, owner="other", until_ms=10**15)
    registry.register(2, Lifecycle.DEACTIVATING, owner="dead", until_ms=1)  # its holder stopped renewing
    job = ScriptedJob(registry, {})
    w = worker(registry, job)
    await w.poll_once()
    await settle(w)
    assert job.ran == [2]


async def test_a_failing_job_waits_longer_after_each_failure_and_a_superseded_one_is_given_back() -> None:
    registry = Registry()
    registry.register(1, Lifecycle.DELETING)
    registry.register(2, Lifecycle.DEACTIVATING)
    job = ScriptedJob(registry, {1: RuntimeError("DynamoDB unreachable"), 2: False})
    w = worker(registry, job)
    await w.poll_once()
    await settle(w)
    assert registry.deferred == [(1, 1000)]
    assert registry.released == [2]
    registry.entries[1] = replace(registry.entries[1], until_ms=0)  # its wait is over
    await w.poll_once()
    await settle(w)
    assert registry.deferred == [(1, 1000), (1, 2000)]  # doubled
    registry.entries[1] = replace(registry.entries[1], until_ms=0, tries=20)
    await w.poll_once()
    await settle(w)
    assert registry.deferred[-1] == (1, 300_000)  # at most five minutes
