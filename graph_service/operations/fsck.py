"""``socialgraph fsck``: which users to check, in which order, and the report at the end.

``--all`` walks every partition of ``following`` (first: it reads each user's following cap count
``n`` before the requests that ``n`` counts, as ``reconcile``'s census does), then of ``followers``
(where the pending requests are, so the cap's count can then be checked), then the ``users`` table
(counters of users who have no edges left anywhere), each with parallel scan segments and a
progress meter, and then every cache entry. Each scanned partition is held whole while it is
checked (``scanning``): a partition of tens of millions of items would not fit in memory. Chosen
users (``USER_ID ...`` or ``--sample N``) get both their partitions read whole, the pairs these
name checked from the other side, their counters rechecked when they differ, and their cache
entries compared. Counters are checked only while the counters consumer is caught up
(``consumer_lag``): when it is behind, the report says so instead, and the rest is checked.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import structlog

from graph_service.cache.inspection import CacheInspector
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.operations.consumer_lag import CountersStream, counters_behind
from graph_service.operations.fsck_cache import CacheChecker
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_report import CACHE_KINDS, Report
from graph_service.operations.fsck_store import StoreChecker
from graph_service.operations.progress import meter
from graph_service.operations.scanning import for_each_partition, sample_partition_keys, total_items
from graph_service.redis_client.connect import AnyRedis
from graph_service.store.account_items import JOBS_PK
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore

__all__ = ["REDIS_TIMEOUT_SECONDS", "FsckPlan", "check", "clean"]

log = structlog.get_logger(__name__)
USER_CONCURRENCY = 8
REDIS_TIMEOUT_SECONDS = 5.0
"""The least Redis timeout of the check's client: the serving timeout (a quarter second by default)
is for callers' latency; a check reading whole lists and SCANning the keyspace waits longer before
it calls Redis unreachable."""


@dataclass(frozen=True)
class FsckPlan:
    users: tuple[int, ...] = ()
    """Check these users (and the other side of every pair their partitions name)."""
    sample: int = 0
    """Check this many users picked at random (when ``users`` is empty and not ``everything``)."""
    everything: bool = False
    """Walk every partition of the edge tables, the users table, and every cache entry."""
    repair_cache: bool = False
    """Delete the cached entries that disagree with the store."""
    segments: int = 4
    """Parallel scan segments of ``everything``."""
    settle_seconds: float = 1.0
    """How long after a first look a suspected violation is looked at again."""


def clean(report: Report, plan: FsckPlan) -> bool:
    """Nothing left to fix: no violation, or (with ``repair_cache``) only cache ones, all deleted.
    (Counters that were not checked are ``report.counters_not_checked``, not a violation.)"""
    if not report.total:
        return True
    return plan.repair_cache and set(report.by_kind) <= CACHE_KINDS and report.unrepaired == 0


async def check(
    dynamo: AsyncDynamo,
    redis: AnyRedis | None,
    tables: TableNames,
    counters_stream: CountersStream,
    plan: FsckPlan,
    *,
    out: TextIO | None = None,
    report: Report | None = None,
) -> Report:
    """Check what ``plan`` says, print each violation and the summary on ``out`` (stdout), or into
    ``report`` if given (which the caller may read as the run goes). ``redis``: the graph cache's
    (None: caching is off, no entry to check); the caller closes the clients
    (``entrypoints.fsck.run_fsck`` builds them from the settings)."""
    report = Report(out) if report is None else report
    checked: dict[str, int] = {}
    if redis is None:
        log.warning("fsck_cache_skipped", reason="SG_REDIS_URL is empty")
    else:
        await redis.ping()  # unreachable: fail now (exit 3), not after a long scan of the tables
    behind = await counters_behind(dynamo, tables, counters_stream, settle_seconds=plan.settle_seconds)
    if behind is not None:
        report.skip_counters(behind.line())
    async with Confirmer(plan.settle_seconds) as later:
        store = StoreChecker(dynamo, tables, report, later, counters=behind is None)
        cache = None
        if redis is not None:
            cache = CacheChecker(
                CacheInspector(redis),
                DynamoGraphStore(dynamo, tables),
                report,
                later,
                repair=plan.repair_cache,
                accounts=DynamoAccounts(dynamo, tables),
            )
        if plan.everything:
            await _everything(dynamo, tables, store, plan.segments, counters=behind is None)
            users: Sequence[int] | None = None
        else:
            users = list(dict.fromkeys(plan.users)) or await _sample(dynamo, tables, plan.sample)
            await _users(store, users)
            checked["users"] = len(users)
        store.flush()
        if cache is not None:
            await cache.check(users)
    checked["partitions"] = store.partitions
    checked["cache_entries"] = cache.checked if cache is not None else 0
    report.summary(checked)
    return report


async def _everything(
    dynamo: AsyncDynamo, names: TableNames, store: StoreChecker, segments: int, *, counters: bool
) -> None:
    """``counters``: also scan the ``users`` table (its items are only counters)."""
    scanned = (FOLLOWING, FOLLOWERS, USERS) if counters else (FOLLOWING, FOLLOWERS)
    tables = [names.table(t) for t in scanned]

    async def following(pk: int, items: list[Item]) -> None:
        await store.check_partition(FOLLOWING, pk, items, outgoing=True, scanning=True)

    async def followers(pk: int, items: list[Item]) -> None:
        await store.check_partition(FOLLOWERS, pk, items, outgoing=True, scanning=True)

    total = await total_items(dynamo, names, scanned)
    with meter("fsck", total, estimated=True) as progress:  # the item counts lag the writes
        await for_each_partition(dynamo, tables[0], following, segments=segments, on_items=progress.advance)
        await for_each_partition(dynamo, tables[1], followers, segments=segments, on_items=progress.advance)
        store.check_outgoing()
        if counters:
            await for_each_partition(
                dynamo, tables[2], store.check_counter_item, segments=segments, key="user_id", on_items=progress.advance
            )


async def _users(store: StoreChecker, users: Sequence[int]) -> None:
    gate = asyncio.Semaphore(USER_CONCURRENCY)

    async def one(user_id: int) -> None:
        async with gate:
            await store.check_user(user_id)
            progress.advance()

    with meter("fsck", len(users)) as progress:
        # Every user's check ends before a failure is raised: none is left running on closed clients.
        results = await asyncio.gather(*(one(u) for u in users), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def _sample(dynamo: AsyncDynamo, tables: TableNames, wanted: int) -> list[int]:
    """``wanted`` users picked at random among those with a partition in either edge table (not the
    jobs' registry, pk=0: no user's)."""
    found = await asyncio.gather(
        *(sample_partition_keys(dynamo, tables.table(t), wanted) for t in (FOLLOWERS, FOLLOWING))
    )
    users = sorted({u for keys in found for u in keys} - {JOBS_PK})
    random.shuffle(users)
    return sorted(users[:wanted])
