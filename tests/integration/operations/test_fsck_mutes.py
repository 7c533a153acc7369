"""fsck on mutes: a mute in force whose two items disagree or lack each other is reported, an ended
one is left to TTL, and a replace in flight at the first look is not reported."""

from __future__ import annotations

import io

from graph_service.domain.models import Mute
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.entrypoints.fsck import run_fsck
from graph_service.operations.fsck import FsckPlan
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_report import Report
from graph_service.operations.fsck_store import StoreChecker
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.graph_store import DynamoGraphStore

HOUR = 3_600_000_000


async def fsck(settings: Settings, plan: FsckPlan) -> tuple[Report, list[str]]:
    out = io.StringIO()
    report = await run_fsck(settings, plan, out=out)
    return report, out.getvalue().splitlines()


async def test_mutes_whose_items_disagree_are_reported_and_ended_ones_are_not(settings: Settings) -> None:
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    table = settings.table(FOLLOWERS)

    async def put(muter: int, mute: Mute, *, member: bool = True, order: bool = True) -> None:
        keys = [it.key(it.MUTE, muter, mute.user_id)] if member else []
        keys += [it.order_key(it.MUTE_ORDER, muter, mute)] if order else []
        for key in keys:
            await dynamo.call("put_item", TableName=table, Item=it.mute_item(key, mute))

    now = now_us()
    try:
        assert await store.put_mute(1, Mute(2, now, 0, True), replacing=None)  # well formed
        assert await store.put_mute(1, Mute(3, now, now + HOUR, False), replacing=None)
        await put(1, Mute(4, now - 5, now - 1, False), order=False)  # ended: TTL took its MT# first
        await put(1, Mute(5, now - 5, now - 1, False), member=False)  # ended: TTL took its M# first
        await put(10, Mute(11, now, 0, False), order=False)  # in force, no MT#
        await put(12, Mute(13, now, now + HOUR, True), member=False)  # in force, no M#
        await put(14, Mute(15, now, 0, True), order=False)  # M# and MT# differ
        await put(14, Mute(15, now, 0, False), member=False)
        await put(16, Mute(17, now, 0, False))  # replaced, its old MT# left behind
        await put(16, Mute(17, now - 9, 0, False), member=False)
    finally:
        dynamo.close()

    report, lines = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))

    expected = {("mute_unpaired", u, o) for u, o in ((10, 11), (12, 13), (14, 15), (16, 17))}
    assert {(v.kind, v.user, v.other) for v in report.violations} == expected
    assert f"mute_unpaired user=10 other=11: followers pk=10 M#11 (at {now}, exp 0, ntf false) has no MT#" in lines
    assert (
        lines[-1] == "fsck: 4 violations (mute_unpaired 4) (7 partitions, 0 cache entries)"
    )  # the muted ones hold the reverses

    report, _ = await fsck(settings, FsckPlan(users=(1, 14), settle_seconds=0))
    assert {(v.kind, v.user, v.other) for v in report.violations} == {("mute_unpaired", 14, 15)}


async def test_a_replace_in_flight_at_the_first_look_is_not_reported(settings: Settings) -> None:
    """The first look sees the new ``M#`` beside the old ``MT#`` (a scan reads ``M#`` before ``MT#``,
    a replace may commit between); the snapshot a moment later sees the replace whole."""
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    now = now_us()
    old, new = Mute(2, now, 0, False), Mute(2, now + 5, now + HOUR, True)
    try:
        assert await store.put_mute(1, old, replacing=None)
        assert await store.put_mute(3, Mute(4, now, 0, False), replacing=None)
        report = Report(io.StringIO())
        later = Confirmer(0)  # not started yet: suspicions wait in its queue
        checker = StoreChecker(dynamo, TableNames(settings.table_prefix), report, later, counters=False)
        halfway = [
            it.mute_item(it.key(it.MUTE, 1, 2), new),
            it.mute_item(it.order_key(it.MUTE_ORDER, 1, old), old),
        ]
        await checker.check_partition(FOLLOWERS, 1, halfway)
        await checker.check_user(3)
        assert later.waiting == 1
        assert await store.put_mute(1, new, replacing=old)
        async with later:
            pass
        assert report.violations == []
    finally:
        dynamo.close()
