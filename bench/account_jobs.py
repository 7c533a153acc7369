"""Account jobs (SPEC §3b): edges/s of deactivating, reactivating and deleting an account vs bare
TransactWriteItems batches moving the same items, and the time until counts are exact after each job.

Run: .venv/bin/python -m bench.account_jobs [--followers 10000] [--followings 1000] [--sample 100]

One private stack (DynamoDB Local with streams, Redis) and the ``counters`` consumer as a process of
its own, as deployed. Two accounts of the same size are seeded straight into the tables in
BatchWriteItem batches (the four items of each follow and the followers' outgoing counts, the items
a ``Follow`` writes): U, whose jobs are measured, and V, the baseline's copy, with followers and
followings of their own. Then, for each of deactivate, reactivate and delete, in turn:

- the baseline on V: the same items moved by sequential TransactWriteItems, as many edges per
  transaction as the job's own batches (``per_batch``/``per_restore``), built before the clock
  starts, from a plain boto3 client: archive deletes each edge's four items, moves the follower's
  outgoing count and puts the archive item; restore puts the four items back, moves the count and
  deletes the archive item; delete deletes the four items and moves the count. No fence, no reads,
  no archive marks, no checks: what the job does on top is what the ratio measures;
- the job on U, as ``serve`` runs it: ``DynamoAccounts.change`` to the job's state, then
  ``AccountJob(...).run`` in this process (its batches are sequential by design).

The baseline goes first in every phase (DynamoDB Local slows down as it holds more stream records,
so this errs against the job), and each run waits for the counters consumer to catch up before the
next one starts. From the moment ``run`` returns, the counters of U, ``--sample`` of its followers
and ``--sample`` of its followings (``users`` table, strongly consistent) are polled every 10 ms;
the convergence time is from then to the start of the first poll that found them all exact. The
edge tables are counted afterwards to prove those were the true counts. SPEC §8 asks for a ratio of
at least 0.5; the convergence times are reported (the baseline's own, after its last batch, beside).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from account_jobs.job import AccountJob, JobReport
from bench.harness import private_stack, start_process, stop_process
from graph_service.cache.write_through import CacheWriteThrough, NoGraphCache
from graph_service.domain.account_ports import AccountForgetting
from graph_service.domain.accounts import Archived, Lifecycle, Side
from graph_service.domain.models import Edge
from graph_service.domain.ports import GraphChanges
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, backoff
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.entrypoints.components import build_graph_cache, build_timelines
from graph_service.entrypoints.logging import configure_logging
from graph_service.limits.follow_budget import RedisFollowBudget
from graph_service.redis_client.connect import graph_cache_redis
from graph_service.settings import Settings
from graph_service.store import account_items as ai
from graph_service.store import items as it
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import load_counts

U, V = 1, 2
"""The measured account and the baseline's copy."""
SPACE = 100_000_000
"""Account ``a``'s followers are ``a * SPACE + 1 ...``, its followings ``a * SPACE + SPACE // 2 + 1 ...``."""
BATCH_WRITE_ITEMS = 25
SEED_CONCURRENCY = 8
POLL_SECONDS = 0.01
GIVE_UP_SECONDS = 600.0
TARGET = 0.5
JOBS = (("deactivate", Lifecycle.DEACTIVATING), ("reactivate", Lifecycle.REACTIVATING), ("delete", Lifecycle.DELETING))
EDGE_SIDES = (Side.FOLLOWER, Side.FOLLOWING)


@dataclass(frozen=True)
class Account:
    """One seeded account: who follows it and whom it follows, each with the follow's time."""

    user_id: int
    followers: list[Edge]
    followings: list[Edge]

    def edges(self, side: Side) -> list[Edge]:
        return self.followers if side is Side.FOLLOWER else self.followings

    def sample(self, size: int) -> tuple[list[int], list[int]]:
        """Up to ``size`` followers and ``size`` followings, evenly spread."""

        def spread(edges: list[Edge]) -> list[int]:
            step = max(1, len(edges) // size) if size else len(edges) + 1
            return [e.user_id for e in edges[::step][:size]]

        return spread(self.followers), spread(self.followings)


def make_account(user_id: int, followers: int, followings: int) -> Account:
    at = now_us()
    base = user_id * SPACE
    return Account(
        user_id,
        [Edge(base + i + 1, at + i) for i in range(followers)],
        [Edge(base + SPACE // 2 + i + 1, at + followers + i) for i in range(followings)],
    )


# -- seeding --------------------------------------------------------------------------------


def seed_items(settings: Settings, account: Account) -> list[tuple[str, Item]]:
    """The items the account's follows made (``edge_puts``' four each) and the outgoing counts."""
    followers, following = settings.table(FOLLOWERS), settings.table(FOLLOWING)
    items: list[tuple[str, Item]] = []
    for side in EDGE_SIDES:
        for edge in account.edges(side):
            follower, followee = side.follower_followee(account.user_id, edge.user_id)
            for element in it.edge_puts(followers, following, follower, followee, edge.at_us):
                items.append((element["Put"]["TableName"], element["Put"]["Item"]))
            if side is Side.FOLLOWER:
                items.append((following, {**it.outgoing_key(follower), "n": {"N": "1"}}))
    if account.followings:
        items.append((following, {**it.outgoing_key(account.user_id), "n": {"N": str(len(account.followings))}}))
    return items


async def seed(dynamo: AsyncDynamo, items: list[tuple[str, Item]]) -> None:
    """BatchWriteItem, ``BATCH_WRITE_ITEMS`` at a time, ``SEED_CONCURRENCY`` batches in flight."""
    gate = asyncio.Semaphore(SEED_CONCURRENCY)

    async def write(batch: list[tuple[str, Item]]) -> None:
        request: dict[str, list[Item]] = {}
        for table, body in batch:
            request.setdefault(table, []).append({"PutRequest": {"Item": body}})
        async with gate:
            for attempt in range(10):
                response = await dynamo.call("batch_write_item", RequestItems=request)
                request = response.get("UnprocessedItems") or {}
                if not request:
                    return
                await backoff(attempt)
        raise RuntimeError("DynamoDB Local kept items unprocessed while seeding")

    await asyncio.gather(*(write(items[k : k + BATCH_WRITE_ITEMS]) for k in range(0, len(items), BATCH_WRITE_ITEMS)))


# -- the baseline -----------------------------------------------------------------------------


def bare_batches(settings: Settings, account: Account, kind: str, sizes: dict[Side, int], gen: int) -> list[list[Item]]:
    """The baseline's transactions for ``kind``: each side's edges in batches of ``sizes[side]``."""
    followers, following = settings.table(FOLLOWERS), settings.table(FOLLOWING)
    step = 1 if kind == "reactivate" else -1

    def edge_items(side: Side, edge: Edge) -> list[Item]:
        follower, followee = side.follower_followee(account.user_id, edge.user_id)
        moved = (it.edge_puts if kind == "reactivate" else it.edge_deletes)(
            followers, following, follower, followee, edge.at_us
        )
        if follower != account.user_id:
            moved.append(it.count_outgoing(following, follower, step))
        archived = Archived(account.user_id, side, edge.user_id, edge.at_us)
        if kind == "deactivate":
            moved.append(it.put(followers, ai.archive_item(archived, gen)))
        elif kind == "reactivate":
            moved.append(it.delete(followers, ai.archive_key(account.user_id, side, edge.user_id)))
        return moved

    batches: list[list[Item]] = []
    for side in EDGE_SIDES:
        edges = account.edges(side)
        for k in range(0, len(edges), sizes[side]):
            chunk = edges[k : k + sizes[side]]
            elements = [element for edge in chunk for element in edge_items(side, edge)]
            if side is Side.FOLLOWING:
                elements.append(it.count_outgoing(following, account.user_id, step * len(chunk)))
            batches.append(elements)
    return batches


def bare(settings: Settings, batches: list[list[Item]]) -> float:
    """Seconds to commit the transactions one after another."""
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)

    def send(elements: list[Item]) -> None:
        while True:
            try:
                client.transact_write_items(TransactItems=elements)  # type: ignore[arg-type]  # plain dicts, not the stubs' TypedDicts
                return
            except ClientError as exc:  # a conflict with the counters consumer's read: again
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                if "TransactionConflict" not in reasons:
                    raise

    started = time.perf_counter()
    for elements in batches:
        send(elements)
    return time.perf_counter() - started


def batch_sizes(accounts: DynamoAccounts, kind: str) -> dict[Side, int]:
    """Edges per transaction of the job's own batches."""
    if kind == "reactivate":
        return {side: accounts.per_restore(side) for side in EDGE_SIDES}
    return {side: accounts.per_batch(side, archive=kind == "deactivate") for side in EDGE_SIDES}


# -- counts -----------------------------------------------------------------------------------


def expected_counts(account: Account, sample: int, *, in_graph: bool) -> dict[int, tuple[int, int]]:
    """(followers, following) of the account and its sampled followers and followings."""
    fans, stars = account.sample(sample)
    n = 1 if in_graph else 0
    own = (len(account.followers), len(account.followings)) if in_graph else (0, 0)
    return {account.user_id: own} | {f: (0, n) for f in fans} | {s: (n, 0) for s in stars}


async def exact_after(dynamo: AsyncDynamo, users: str, expected: dict[int, tuple[int, int]], since: float) -> float:
    """Seconds from ``since`` (monotonic) to the start of the first poll that found every count exact."""
    while True:
        polled_at = time.monotonic()
        counts = await load_counts(dynamo, users, list(expected))
        if all((c.followers, c.following) == expected[u] for u, c in counts.items()):
            return max(0.0, polled_at - since)
        if polled_at - since > GIVE_UP_SECONDS:
            raise TimeoutError(f"counts not exact {GIVE_UP_SECONDS} s after the writes")
        await asyncio.sleep(POLL_SECONDS)


async def check_true(accounts: DynamoAccounts, account: Account, expected: dict[int, tuple[int, int]]) -> None:
    """The expected counts are the edge tables' own (counted live items), not only our arithmetic."""
    fans = {e.user_id for e in account.followers}

    async def true(user: int) -> tuple[int, int]:
        if user == account.user_id:
            return await accounts.count(user, Side.FOLLOWER), await accounts.count(user, Side.FOLLOWING)
        if user in fans:  # followers and followings of the account follow no one else, and vice versa
            return 0, await accounts.count(user, Side.FOLLOWING)
        return await accounts.count(user, Side.FOLLOWER), 0

    found = dict(zip(expected, await asyncio.gather(*(true(u) for u in expected)), strict=True))
    if found != expected:
        wrong = {u: (found[u], expected[u]) for u in expected if found[u] != expected[u]}
        raise AssertionError(f"edge tables disagree with the expected counts: {dict(list(wrong.items())[:5])}")


# -- one phase ----------------------------------------------------------------------------------


async def run_job(accounts: DynamoAccounts, job: AccountJob, user_id: int, state: Lifecycle) -> tuple[float, int]:
    """Move the account to ``state`` as the RPC does, then run its job: (seconds of the job, items moved)."""
    status = await accounts.status(user_id)
    if not await accounts.change(status, state, now_us()):
        raise RuntimeError(f"account {user_id} changed state under the benchmark")
    report = JobReport()
    started = time.perf_counter()
    finished = await job.run(user_id, status.gen + 1, state, report)
    elapsed = time.perf_counter() - started
    if not finished:
        raise RuntimeError(f"the {state.name.lower()} job of {user_id} was superseded")
    return elapsed, report.moved


async def phase(
    settings: Settings,
    dynamo: AsyncDynamo,
    accounts: DynamoAccounts,
    job: AccountJob,
    graph: dict[int, Account],
    kind: str,
    state: Lifecycle,
    sample: int,
) -> dict[str, Any]:
    users = settings.table(USERS)
    in_graph = state is Lifecycle.REACTIVATING
    edges = len(graph[U].followers) + len(graph[U].followings)
    sizes = batch_sizes(accounts, kind)
    batches = bare_batches(settings, graph[V], kind, sizes, gen=1)
    bare_s = await asyncio.to_thread(bare, settings, batches)
    bare_done = time.monotonic()
    bare_exact_s = await exact_after(dynamo, users, expected_counts(graph[V], sample, in_graph=in_graph), bare_done)

    job_s, moved = await run_job(accounts, job, U, state)
    job_done = time.monotonic()
    expected = expected_counts(graph[U], sample, in_graph=in_graph)
    exact_s = await exact_after(dynamo, users, expected, job_done)
    await check_true(accounts, graph[U], expected)
    if moved != edges:
        raise AssertionError(f"the {kind} job moved {moved} items, not {edges}")
    job_eps, bare_eps = edges / job_s, edges / bare_s
    return {
        "job_edges_per_second": round(job_eps, 1),
        "bare_transact_write_items_edges_per_second": round(bare_eps, 1),
        "ratio": round(job_eps / bare_eps, 3),
        "job_s": round(job_s, 2),
        "bare_s": round(bare_s, 2),
        "edges_per_transaction": {side.name.lower(): n for side, n in sizes.items()},
        "bare_transactions": len(batches),
        "counts_exact_after_s": round(exact_s, 3),
        "bare_counts_exact_after_s": round(bare_exact_s, 3),
    }


def account_job(accounts: DynamoAccounts, settings: Settings) -> tuple[AccountJob, list[Callable[[], Awaitable[None]]]]:
    """The job as ``serve`` builds it (``entrypoints/server.py``): the cache written through after
    each batch (without the cache lease of a serving process: one process here), what a deletion
    forgets (the graph cache, the follow rate limit's ledger, the timelines) and the timelines a
    restore backfills; and how to close each adapter."""
    redis = graph_cache_redis(settings)
    budget = RedisFollowBudget(redis) if redis is not None and settings.follow_rate_limit else None
    timelines = build_timelines(settings)
    cache = build_graph_cache(settings)
    changes: GraphChanges = CacheWriteThrough(cache) if cache is not None else NoGraphCache()
    built = [f for f in (cache, budget, timelines) if f is not None]
    forgetting: list[AccountForgetting] = list(built)
    return AccountJob(accounts, changes, forgetting, timelines), [f.aclose for f in built]


async def measure(settings: Settings, followers: int, followings: int, sample: int) -> dict[str, Any]:
    dynamo = AsyncDynamo.build(settings)
    accounts = DynamoAccounts(dynamo, TableNames(settings.table_prefix))
    job, closers = account_job(accounts, settings)
    try:
        graph = {a: make_account(a, followers, followings) for a in (U, V)}
        started = time.monotonic()
        await seed(dynamo, [i for a in graph.values() for i in seed_items(settings, a)])
        seeded_s = time.monotonic() - started
        seeded = time.monotonic()
        for account in graph.values():
            await exact_after(dynamo, settings.table(USERS), expected_counts(account, sample, in_graph=True), seeded)
        counted_s = time.monotonic() - seeded
        jobs = {kind: await phase(settings, dynamo, accounts, job, graph, kind, state, sample) for kind, state in JOBS}
        return {"seed_s": round(seeded_s, 1), "seed_counted_s": round(counted_s, 1), "jobs": jobs}
    finally:
        for close in closers:
            await close()
        dynamo.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=10_000, help="followers of the account (SPEC: 10,000)")
    parser.add_argument("--followings", type=int, default=1_000, help="accounts it follows (SPEC: 1,000)")
    parser.add_argument("--sample", type=int, default=100, help="followers and followings whose counts are checked")
    args = parser.parse_args(argv)
    configure_logging("warning")
    started = time.monotonic()
    with private_stack(with_service=False) as stack, tempfile.TemporaryDirectory(prefix="sg-account-jobs-") as tmp:
        counters = start_process(["-m", "graph_service", "counters"], stack.env, Path(tmp) / "counters.log")
        try:
            measured = asyncio.run(measure(stack.settings, args.followers, args.followings, args.sample))
        finally:
            stop_process(counters)
    report = {
        "benchmark": "account_jobs",
        "followers": args.followers,
        "followings": args.followings,
        "edges": args.followers + args.followings,
        "sample": args.sample,
        **measured,
        "target": TARGET,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
