"""fsck on a graph made through the service: clean, then with bad cache entries planted in Redis,
each reported with its kind and user, and exactly those deleted by --repair-cache."""

from __future__ import annotations

import asyncio
import io

from graph_service.cache import keys
from graph_service.domain.models import Direction, Edge
from graph_service.entrypoints.fsck import run_fsck
from graph_service.operations.fsck import FsckPlan, clean
from graph_service.operations.fsck_report import Report
from graph_service.settings import Settings
from tests.support.graph_calls import (
    Stub,
    all_counts,
    block,
    cache_client,
    follow,
    is_following,
    list_page,
    relationships,
    set_private,
)
from tests.support.polling import eventually

T0 = 1_764_000_000_000_000


async def fsck(settings: Settings, plan: FsckPlan) -> tuple[Report, str]:
    out = io.StringIO()
    return await run_fsck(settings, plan, out=out), out.getvalue()


def found(report: Report) -> set[tuple[str, int, int | None]]:
    return {(v.kind, v.user, v.other) for v in report.violations}


async def make_graph(stub: Stub) -> None:
    """Follows both ways, a request to a private account, a block that removed a follow; then reads
    that fill every kind of cache entry (follow states, lists, counts, relationships, privacy)."""
    await follow(stub, 1, 2)
    await follow(stub, 2, 1)
    await follow(stub, 3, 2)
    await set_private(stub, 4, True)
    await follow(stub, 5, 4)  # a request
    await follow(stub, 6, 1)
    await block(stub, 1, 6)
    expected = {1: (1, 1), 2: (2, 1), 3: (0, 1), 4: (0, 0), 5: (0, 0), 6: (0, 0)}
    await eventually(lambda: all_counts(stub, list(expected)), lambda got: got == expected)
    for pair in ((1, 2), (2, 1), (3, 1), (2, 3)):
        await is_following(stub, pair)
    for user in (1, 2):
        await list_page(stub, Direction.FOLLOWERS, user)
        await list_page(stub, Direction.FOLLOWING, user)
    await relationships(stub, 1, [2, 3, 6])
    await follow(stub, 5, 4)  # reads the cached privacy flag (a repeat changes nothing)


async def test_a_graph_made_by_the_service_is_clean_and_planted_cache_entries_are_found_and_repaired(
    settings: Settings, counters: asyncio.Task[None], stub: Stub
) -> None:
    await make_graph(stub)
    redis = cache_client(settings)
    try:
        # The whole lists are filled in the background, and a fill that meets a counters-consumer
        # repair of the same user is refused (as it should be): read until each one is cached.
        for user in (1, 2):
            for direction in Direction:

                async def cached(user: int = user, direction: Direction = direction) -> int:
                    await list_page(stub, direction, user)
                    return int(await redis.exists(keys.list_key(direction, user)))

                await eventually(cached, lambda n: n == 1)
        report, out = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))
        assert report.violations == [], out
        assert report.total == 0
        checked = int(out.splitlines()[-1].split(" partitions, ")[1].split(" cache entries")[0])
        assert checked >= 14  # 4 follow states, 4 lists, 6 counts, 3 relationships, 1 privacy flag (at least)

        await redis.set(keys.follow_state(3, 1), "1")  # 3 does not follow 1
        await redis.zadd(keys.list_key(Direction.FOLLOWERS, 2), {Edge(9, T0).position: 0, "junk": 0})
        await redis.hset(keys.counts(1), mapping={"fl": 99, "fg": 1, "v": 1000})
        await redis.set(keys.relationship(1, 3), "111111")
        await redis.set(keys.privacy(4), "0")  # 4 is private
        await redis.set(keys.mute(1, 2), "0:1")  # 1 does not mute 2
        await redis.set(keys.mute(1, 4), "1:0")  # a mute that ended long ago: agrees with "none"
        await redis.set(keys.follow_state(1, 2), "1")  # true: must stay
        await redis.set(keys.account_state(3), "D")  # 3 was never deactivated
        await redis.set(keys.account_state(2), "r")  # in the graph, as 2 is: no difference
        bad = {
            ("cache_account_state", 3, None),
            ("cache_follow_state", 3, 1),
            ("cache_list", 2, None),
            ("cache_counts", 1, None),
            ("cache_relationship", 1, 3),
            ("cache_mute", 1, 2),
            ("cache_privacy", 4, None),
        }

        report, out = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))
        assert found(report) == bad
        assert not clean(report, FsckPlan(everything=True))
        extra = "not in DynamoDB: 9@1764000000000000, 'junk'"
        assert f"cache_list user=2: sg:{{2}}:fl: 4 cached, 2 in DynamoDB; {extra}" in out
        assert await redis.exists(keys.follow_state(3, 1)) == 1  # no repair without --repair-cache

        plan = FsckPlan(users=(1, 2, 3, 4), repair_cache=True, settle_seconds=0)
        report, out = await fsck(settings, plan)
        assert found(report) == bad
        assert report.repaired == 7
        assert clean(report, plan)
        assert out.count("(repaired: entry deleted)") == 7
        gone = [keys.follow_state(3, 1), keys.list_key(Direction.FOLLOWERS, 2), keys.counts(1)]
        gone += [keys.relationship(1, 3), keys.privacy(4), keys.mute(1, 2), keys.account_state(3)]
        assert [await redis.exists(k) for k in gone] == [0] * 7
        assert await redis.get(keys.account_state(2)) == "r"
        assert await redis.get(keys.mute(1, 4)) == "1:0"  # agrees: an ended mute mutes nothing
        assert await redis.get(keys.follow_state(1, 2)) == "1"
        assert await redis.exists(keys.list_key(Direction.FOLLOWING, 1)) == 1

        report, _ = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))
        assert report.violations == []
    finally:
        await redis.aclose()
