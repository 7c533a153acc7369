"""``reconcile`` against DynamoDB Local and Redis: drift planted in the tables is reported exactly,
fixed exactly (version bumped, count cache repaired), and a second run finds nothing."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from socialgraph_devstack.processes import free_port

from graph_service.cache.graph_cache import GraphCache
from graph_service.domain.models import Counts
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache, counters_stream
from graph_service.operations import scanning
from graph_service.operations.progress import meter
from graph_service.operations.reconcile import Reconciler
from graph_service.operations.reconcile_census import take_census
from graph_service.operations.reconcile_rules import Observation, Outcome, OutgoingFinding, UserFinding
from graph_service.settings import Settings
from tests.support.drift import (
    cached_count_hash,
    plant_counts,
    plant_n,
    plant_request,
    read_n,
    stored_counts,
)
from tests.support.logs import capture_every_level
from tests.support.seeding import seed_follows

SETTLE = 0.05  # nothing else writes these tables: any wait is longer than a consumer's lag


@pytest.fixture
async def dynamo(settings: Settings) -> AsyncIterator[AsyncDynamo]:
    client = AsyncDynamo.build(settings)
    yield client
    client.close()


@pytest.fixture
async def cache(settings: Settings) -> AsyncIterator[GraphCache]:
    built = build_graph_cache(settings)
    assert built is not None
    yield built
    await built.aclose()


def reconciler(dynamo: AsyncDynamo, settings: Settings, cache: GraphCache | None = None, *, fix: bool) -> Reconciler:
    return Reconciler(
        dynamo,
        TableNames(settings.table_prefix),
        cache,
        counters=counters_stream(settings),
        fix=fix,
        settle_seconds=SETTLE,
    )


async def test_given_users_drift_is_reported_exactly_then_fixed_with_the_version_bumped(
    settings: Settings, dynamo: AsyncDynamo, cache: GraphCache
) -> None:
    """101 has 4 followers but says 7; 103 follows one account but was never counted; 102 is right;
    104 is nobody (0 / 0, not an error)."""
    await seed_follows(settings, [(201, 101), (202, 101), (203, 101), (201, 102), (103, 101)])
    await plant_counts(dynamo, settings, {101: Counts(7, 0, 3), 102: Counts(1, 0, 2)})
    await cache.set_counts(101, Counts(7, 0, 3))  # the stale value, cached

    check = await reconciler(dynamo, settings, fix=False).users([101, 102, 103, 104])
    assert check.users == [
        UserFinding(101, Outcome.DRIFT, Observation(Counts(7, 0, 3), 4, 0)),
        UserFinding(103, Outcome.DRIFT, Observation(Counts(0, 0, 0), 0, 1)),
    ]
    assert check.unresolved
    assert check.lines()[:2] == [
        "user 101: followers stored 7 true 4, following stored 0 true 0",
        "user 103: followers stored 0 true 0, following stored 0 true 1",
    ]
    assert check.lines()[2].startswith("reconcile: 4 users checked, 2 drifted, 0 fixed, 0 busy; ")
    assert await stored_counts(dynamo, settings, 101) == Counts(7, 0, 3)  # a check writes nothing

    with capture_every_level() as logs:
        fixed = await reconciler(dynamo, settings, cache, fix=True).users([101, 102, 103, 104])
    assert [(f.user_id, f.outcome, f.cache_updated) for f in fixed.users] == [
        (101, Outcome.FIXED, True),
        (103, Outcome.FIXED, True),
    ]
    assert not fixed.unresolved
    assert await stored_counts(dynamo, settings, 101) == Counts(4, 0, 4)
    assert await stored_counts(dynamo, settings, 102) == Counts(1, 0, 2)  # untouched
    assert await stored_counts(dynamo, settings, 103) == Counts(0, 1, 1)
    assert await cached_count_hash(settings, 101) == {"fl": "4", "fg": "0", "v": "4"}
    assert await cached_count_hash(settings, 103) == {"fl": "0", "fg": "1", "v": "1"}
    drift_lines = [e for e in logs if e["event"] == "reconcile_drift"]
    assert [(e["user"], e["outcome"], e["followers_stored"], e["followers_true"]) for e in drift_lines] == [
        (101, "fixed", 7, 4),
        (103, "fixed", 0, 0),
    ]
    (summary,) = [e for e in logs if e["event"] == "reconcile_summary"]
    assert summary["users"] == {"drifted": 2, "drift": 0, "fixed": 2, "busy": 0}
    assert summary["users_checked"] == 4

    again = await reconciler(dynamo, settings, cache, fix=True).users([101, 102, 103, 104])
    assert again.users == []
    assert not again.unresolved


async def test_with_redis_unreachable_the_fix_lands_and_the_cache_part_is_logged_as_skipped(
    settings: Settings, dynamo: AsyncDynamo
) -> None:
    await seed_follows(settings, [(301, 300)])
    await plant_counts(dynamo, settings, {300: Counts(5, 0, 9)})
    down = build_graph_cache(replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    assert down is not None
    try:
        with capture_every_level() as logs:
            report = await reconciler(dynamo, settings, down, fix=True).users([300])
    finally:
        await down.aclose()
    assert [(f.user_id, f.outcome, f.cache_updated) for f in report.users] == [(300, Outcome.FIXED, False)]
    assert report.lines()[0] == (
        "user 300: followers stored 5 true 1, following stored 0 true 0; fixed"
        " (count cache not updated: Redis unreachable)"
    )
    assert await stored_counts(dynamo, settings, 300) == Counts(1, 0, 10)
    assert any(e["event"] == "reconcile_cache_skipped" and e["user"] == 300 for e in logs)


async def test_all_finds_planted_drift_among_many_users_and_fixes_counters_and_following_counts(
    settings: Settings, dynamo: AsyncDynamo, cache: GraphCache
) -> None:
    """About 200 follows among 60 users, every counter and ``n`` right but for the planted ones:
    three counters (one of a user with no edges at all), two users whose follows predate ``n``,
    one wrong ``n``, and two pending requests (one of them counted in its requester's ``n``)."""
    rng = random.Random(7)
    people = list(range(1000, 1060))
    pairs = sorted({(a, b) for a, b in (rng.sample(people, 2) for _ in range(200))})
    await seed_follows(settings, pairs)
    followers, following = Counter(b for _, b in pairs), Counter(a for a, _ in pairs)
    truth = {u: Counts(followers[u], following[u], 5) for u in people}
    followees = sorted(following)
    x, y, legacy1, legacy2, wrong_n = followees[:5]
    z = 1999  # a counters row and no edges
    requester, quiet = 1070, 1071  # each requested to follow 1001; only the first's n counts it
    await plant_counts(
        dynamo,
        settings,
        {
            **truth,
            x: replace(truth[x], followers=truth[x].followers + 2),
            y: replace(truth[y], following=truth[y].following + 1),
            z: Counts(3, 0, 1),
        },
    )
    n = {u: following[u] for u in followees if u not in (legacy1, legacy2)}
    await plant_n(dynamo, settings, {**n, wrong_n: following[wrong_n] + 4, requester: 1})
    await plant_request(dynamo, settings, requester, 1001, now_us())
    await plant_request(dynamo, settings, quiet, 1001, now_us())

    check = await reconciler(dynamo, settings, fix=False).everyone(segments=3)
    assert [(f.user_id, f.outcome) for f in check.users] == sorted(
        [(x, Outcome.DRIFT), (y, Outcome.DRIFT), (z, Outcome.DRIFT)]
    )
    assert check.outgoing == sorted(
        [
            OutgoingFinding(legacy1, Outcome.DRIFT, None, following[legacy1], 0),
            OutgoingFinding(legacy2, Outcome.DRIFT, None, following[legacy2], 0),
            OutgoingFinding(wrong_n, Outcome.DRIFT, following[wrong_n] + 4, following[wrong_n], 0),
            OutgoingFinding(quiet, Outcome.DRIFT, None, 0, 1),
        ],
        key=lambda f: f.user_id,
    )
    assert check.users_checked == len(people) + 3  # the users, z and the two requesters
    assert check.outgoing_checked == len(followees) + 2
    assert check.unresolved

    fixed = await reconciler(dynamo, settings, cache, fix=True).everyone(segments=3)
    assert {f.outcome for f in fixed.users} | {f.outcome for f in fixed.outgoing or []} == {Outcome.FIXED}
    assert len(fixed.users) == 3
    assert len(fixed.outgoing or []) == 4
    assert await stored_counts(dynamo, settings, x) == replace(truth[x], version=6)
    assert await stored_counts(dynamo, settings, y) == replace(truth[y], version=6)
    assert await stored_counts(dynamo, settings, z) == Counts(0, 0, 2)
    assert [await read_n(dynamo, settings, u) for u in (legacy1, legacy2, wrong_n, quiet, requester)] == [
        following[legacy1],
        following[legacy2],
        following[wrong_n],
        1,
        1,
    ]

    again = await reconciler(dynamo, settings, fix=False).everyone(segments=2)
    assert (again.users, again.outgoing, again.unresolved) == ([], [], False)


async def test_the_census_tallies_page_by_page_and_never_holds_a_partition(
    settings: Settings, dynamo: AsyncDynamo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition spread over several pages of 3 items (followee 5: 7 followers, 14 items plus a
    request) is tallied exactly, and the whole-partition scan is never used (it would hold a
    celebrity's 100 million followers in memory)."""

    async def held(*args: object, **kwargs: object) -> None:
        raise AssertionError("the census gathered a whole partition")

    monkeypatch.setattr(scanning, "_segment_partitions", held)
    await seed_follows(settings, [(f, 5) for f in range(11, 18)])
    await plant_counts(dynamo, settings, {5: Counts(7, 0, 3)})
    await plant_n(dynamo, settings, {9: 1})
    await plant_request(dynamo, settings, 9, 5, now_us())

    with meter("census", None) as progress:
        census = await take_census(dynamo, TableNames(settings.table_prefix), segments=2, meter=progress, page_size=3)

    assert sorted(census) == [5, 9, *range(11, 18)]
    assert (census[5].stored, census[5].followers, census[5].counts_drifted) == (Counts(7, 0, 3), 7, False)
    assert (census[9].outgoing.n, census[9].outgoing.follows, census[9].outgoing.requested) == (1, 0, [5])
    assert [(census[f].outgoing.follows, census[f].counts_drifted) for f in range(11, 18)] == [(1, True)] * 7
