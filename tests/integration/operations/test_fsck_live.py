"""fsck on a live system reports no violation that writes in flight explain: a counter the counters
consumer is still catching up with, a request made between the two edge-table scans. What keeps
moving through every second look is printed as unconfirmed, not as a violation."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from graph_service.domain.models import Counts, Made
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWING, TableNames
from graph_service.entrypoints.fsck import run_fsck
from graph_service.operations import fsck as fsck_module
from graph_service.operations.fsck import FsckPlan
from graph_service.operations.fsck_report import Report, Violation
from graph_service.operations.scanning import for_each_partition
from graph_service.settings import Settings
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.drift import plant_counts
from tests.support.polling import eventually


async def fsck(settings: Settings, plan: FsckPlan) -> tuple[Report, list[str]]:
    out = io.StringIO()
    report = await run_fsck(settings, plan, out=out)
    return report, out.getvalue().splitlines()


@pytest.mark.streams
async def test_a_counter_behind_follows_in_flight_is_not_reported_as_drift(
    settings: Settings, counters: asyncio.Task[None]
) -> None:
    """Followers of one user keep coming while fsck looks at that user: each committed follow is in
    the edge tables before the consumer applies it, so the counter is behind at almost every
    instant, yet it is never stable (same ``ver``, same true counts) across a settle interval."""
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    star = 7_000
    made = 0
    stop = asyncio.Event()

    async def follow_the_star() -> None:
        nonlocal made
        while not stop.is_set():
            assert await store.add_edge(7_001 + made, star, now_us()) is Made.CREATED
            made += 1

    writer = asyncio.create_task(follow_the_star())
    try:
        await eventually(lambda: asyncio.sleep(0, made), lambda n: n >= 3)  # follows are in flight
        report, lines = await fsck(settings, FsckPlan(users=(star,), settle_seconds=0.3))
        stop.set()
        await writer
    finally:
        stop.set()
        await asyncio.gather(writer, return_exceptions=True)
        dynamo.close()

    assert [v for v in report.violations if v.kind == "counter_drift"] == []
    assert report.violations == []
    assert lines[-1].startswith("fsck: no violation")
    assert made >= 3


async def test_a_request_made_between_the_edge_scans_is_unconfirmed_not_a_violation(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """900 follows 901 (``n`` = 1), and requests 902 after the first edge table is scanned. Read
    in the other order (requests first, ``n`` after), ``n`` = 2 against 1 follow and no request
    seen would be reported; read ``n`` first, the request is seen and the recheck finds ``n``
    moved since it was read: unconfirmed, and the run is clean."""
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    scans = 0

    async def scan_then_request(*args: Any, **kwargs: Any) -> None:
        nonlocal scans
        await for_each_partition(*args, **kwargs)
        scans += 1
        if scans == 1:
            assert await store.add_request(900, 902, now_us()) is Made.CREATED

    monkeypatch.setattr(fsck_module, "for_each_partition", scan_then_request)
    try:
        assert await store.add_edge(900, 901, now_us()) is Made.CREATED
        await plant_counts(dynamo, settings, {900: Counts(0, 1, 1), 901: Counts(1, 0, 1)})
        report, lines = await fsck(settings, FsckPlan(everything=True, segments=2, settle_seconds=0))
    finally:
        dynamo.close()

    assert scans == 3  # following, followers, users
    assert report.violations == []
    detail = "following pk=900 O n=1; 1 follows + 1 pending requests"
    assert report.unconfirmed == [Violation("outgoing_count", 900, None, detail)]
    assert f"unconfirmed outgoing_count user=900: {detail}" in lines
    assert lines[-1].startswith("fsck: no violation; 1 unconfirmed (kept changing) (")


async def test_outgoing_drift_that_stands_still_is_still_reported(settings: Settings) -> None:
    """The same users without the request in flight, but with ``n`` planted wrong: a violation."""
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    try:
        assert await store.add_edge(900, 901, now_us()) is Made.CREATED
        assert await store.add_request(900, 902, now_us()) is Made.CREATED
        await plant_counts(dynamo, settings, {900: Counts(0, 1, 1), 901: Counts(1, 0, 1)})
        await dynamo.call(
            "update_item",
            TableName=settings.table(FOLLOWING),
            Key={"pk": {"N": "900"}, "sk": {"S": "O"}},
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "5"}},
        )
        report, lines = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))
    finally:
        dynamo.close()

    detail = "following pk=900 O n=5; 1 follows + 1 pending requests"
    assert report.violations == [Violation("outgoing_count", 900, None, detail)]
    assert report.unconfirmed == []
    assert lines[-1].startswith("fsck: 1 violation (outgoing_count 1) (")
