"""``reconcile --fix`` while the counters consumer runs and the same users gain followers: a follow
committed between the two observations of a drifted user (counted, not yet applied) holds the fix
back until the consumer has applied it, and afterwards the counters are exact: no consumer update
lost, none counted twice."""

from __future__ import annotations

import asyncio

import pytest

from graph_service.domain.models import Counts, Made
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache, counters_stream
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.reconcile import Reconciler
from graph_service.operations.reconcile_rules import Outcome
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.drift import cached_count_hash
from tests.support.polling import eventually

pytestmark = pytest.mark.streams

SETTLE = 0.3


async def test_fix_during_follows_lands_on_a_stable_moment_and_the_counts_end_exact(
    settings: Settings, counters: asyncio.Task[None]
) -> None:
    dynamo = AsyncDynamo.build(settings)
    cache = build_graph_cache(settings)
    tables = TableNames(settings.table_prefix)
    store, table, counter = (
        DynamoGraphStore(dynamo, tables),
        DynamoCounterTable(dynamo, tables),
        EdgeCounter(dynamo, tables),
    )
    x, y = 501, 502
    edges = {(601, x), (602, x), (601, y), (x, y)}
    try:
        for follower, followee in sorted(edges):
            assert await store.add_edge(follower, followee, now_us()) is Made.CREATED

        async def both() -> dict[int, Counts]:
            return await table.read_counts([x, y])

        settled = await eventually(both, lambda c: (c[x].followers, c[x].following, c[y].followers) == (2, 1, 2))
        # the drift: a guarded write of wrong counters, as a bug or a lost stream record leaves it
        for user, wrong in ((x, Counts(7, 1)), (y, Counts(3, 4))):
            was = settled[user]
            assert await table.write_absolute(
                user, Counts(wrong.followers, wrong.following, was.version + 1), expected_version=was.version
            )

        planted = await table.read_counts([x, y])
        waits = 0

        async def settle_then_follow(seconds: float) -> None:
            """The reconciler's wait. The first ends with a follow of each user, committed just before
            the second observation counts it and (most likely) before the consumer applies it. The
            second first waits for the consumer to apply those follows: the premise of the rule (the
            wait outlasts the consumer's lag), made true here whatever the machine's load."""
            nonlocal waits
            waits += 1
            if waits == 2:
                await eventually(
                    lambda: table.read_counts([x, y]),
                    lambda now: all(now[u].version > planted[u].version for u in (x, y)),
                )
            await asyncio.sleep(seconds)
            if waits == 1:
                for follower, followee in ((700, x), (701, y)):
                    assert await store.add_edge(follower, followee, now_us()) is Made.CREATED
                    edges.add((follower, followee))

        reconciler = Reconciler(
            dynamo,
            tables,
            cache,
            counters=counters_stream(settings),
            fix=True,
            settle_seconds=SETTLE,
            rounds=5,
            sleep=settle_then_follow,
        )
        report = await reconciler.users([x, y])
        assert [(f.user_id, f.outcome) for f in report.users] == [(x, Outcome.FIXED), (y, Outcome.FIXED)]
        # The follows moved the first pair of observations, so the fix waited at least once more.
        # Their application moved the second pair too, unless the consumer applied them before the
        # second observation (a loaded machine's scan is slow): then the first pair saw both.
        assert waits >= 2

        expected = {u: (sum(b == u for _, b in edges), sum(a == u for a, _ in edges)) for u in (x, y)}
        assert expected == {x: (3, 1), y: (3, 0)}

        async def stored_and_true() -> dict[int, tuple[tuple[int, int], tuple[int, int]]]:
            stored = await table.read_counts([x, y])
            return {u: ((stored[u].followers, stored[u].following), await counter.both(u)) for u in (x, y)}

        await eventually(
            stored_and_true, lambda seen: all(seen[u] == (expected[u], expected[u]) for u in (x, y)), timeout=10
        )
        final = await table.read_counts([x, y])
        wanted = {u: {"fl": str(expected[u][0]), "fg": str(expected[u][1]), "v": str(final[u].version)} for u in (x, y)}

        async def cached() -> dict[int, dict[str, str]]:
            return {u: await cached_count_hash(settings, u) for u in (x, y)}

        await eventually(cached, lambda found: found == wanted, timeout=10)  # the consumer's repairs, or ours
    finally:
        if cache is not None:
            await cache.aclose()
        dynamo.close()
