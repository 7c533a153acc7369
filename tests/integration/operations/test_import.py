"""`import` against DynamoDB Local: the items of a follow, blocks, pending requests and the cap
respected, an existing follow skipped, a second run adds nothing, and the reject file exactly."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from graph_service.domain.accounts import Lifecycle
from graph_service.domain.models import Made, PairState
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.entrypoints.importer import run_import
from graph_service.operations import importer
from graph_service.operations.import_state import ImportFileError, RejectFile, Tally, save_state
from graph_service.operations.importer import ImportOptions, ImportResult, prepare
from graph_service.operations.progress import meter
from graph_service.settings import Settings
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.seeding import seed_follows

Items = list[tuple[int, str, int]]


async def run(settings: Settings, source: Path, **options: object) -> ImportResult:
    chosen = ImportOptions(source, source.with_suffix(".state"), source.with_suffix(".rejects"))
    chosen = replace(chosen, **options)  # type: ignore[arg-type]  # the caller's ImportOptions fields
    state, fresh = prepare(chosen)
    with source.with_suffix(".progress").open("a") as out, meter("import", stream=out) as progress:
        return await run_import(settings, chosen, state, fresh=fresh, stop=asyncio.Event(), meter=progress)


async def table_items(settings: Settings, table: str) -> Items:
    """Every item as (pk, sk, the number it holds: ``at``, or ``n`` for an outgoing count), sorted."""
    dynamo = AsyncDynamo.build(settings)
    try:
        found = (await dynamo.call("scan", TableName=settings.table(table), ConsistentRead=True))["Items"]
    finally:
        dynamo.close()
    return sorted((int(i["pk"]["N"]), i["sk"]["S"], int(i.get("at", i.get("n", {"N": "-1"}))["N"])) for i in found)


def edge(follower: int, followee: int, at: int) -> tuple[Items, Items]:
    """The items a follow puts in the followers table and in the following table."""
    return (
        [(followee, f"E#{follower:020d}", at), (followee, f"T#{at:016d}#{follower:020d}", at)],
        [(follower, f"E#{followee:020d}", at), (follower, f"T#{at:016d}#{followee:020d}", at)],
    )


async def test_rows_become_follows_with_the_items_of_follow_and_outgoing_counts(
    settings: Settings, tmp_path: Path
) -> None:
    """Each row is the four items of a follow (its time given or the import's), plus the follower's count."""
    source = tmp_path / "edges.csv"
    source.write_text("follower_id,followee_id,followed_at\n1,2,2020-09-13T12:26:40Z\n1,3\n\n4,2,1600000001\n")
    result = await run(settings, source)
    started = result.state.started_us
    expected = [edge(1, 2, 1_600_000_000_000_000), edge(1, 3, started + 3), edge(4, 2, 1_600_000_001_000_000)]
    assert await table_items(settings, FOLLOWERS) == sorted(i for e in expected for i in e[0])
    assert await table_items(settings, FOLLOWING) == sorted(
        [*(i for e in expected for i in e[1]), (1, "O", 2), (4, "O", 1)]
    )
    assert (result.finished, result.written_now, result.tally.as_dict()) == (
        True,
        3,
        {"rows": 3, "written": 3, "already_present": 0, "rejected": 0, "rejected_by_reason": {}},
    )
    assert source.with_suffix(".rejects").read_text() == "line,reason,detail,raw\n"
    assert (result.state.watermark, result.state.finished) == (5, True)


async def test_blocks_requests_the_cap_and_bad_lines_are_rejected_and_existing_follows_skipped(
    settings: Settings, tmp_path: Path
) -> None:
    """One batch holding every case: the store's refusals are told apart from the batch's cancellation,
    the cap passes the follower's first rows in file order, a row with an account away is refused
    before the batch commits, and the rest of the batch is written."""
    capped = replace(settings, max_following=3)
    dynamo = AsyncDynamo.build(capped)
    store = DynamoGraphStore(dynamo, TableNames(capped.table_prefix))
    try:
        assert await store.add_block(1, 2, 1, PairState())
        assert await store.add_request(3, 4, 7, cap=3) is Made.CREATED  # 3 -> 4 pending
        assert await store.add_request(5, 12, 8, cap=3) is Made.CREATED  # follower 5 starts at 1 of 3
        accounts = DynamoAccounts(dynamo, TableNames(capped.table_prefix))
        assert await accounts.change(await accounts.status(31), Lifecycle.DEACTIVATING, 9)  # 31 is away
    finally:
        dynamo.close()
    (existing_at,) = await seed_follows(capped, [(10, 11)])
    source = tmp_path / "edges.csv"
    source.write_text("2,1\n1,2\n3,4\n5,6\n5,7\n5,8\n5,9\n10,11\n20,21\n1;2\n20,21\n20,20\n30,31\n")
    result = await run(capped, source)
    assert source.with_suffix(".rejects").read_text() == (
        "line,reason,detail,raw\n"
        '1,BLOCKED,2 and 1: one blocks the other,"2,1"\n'
        '2,BLOCKED,1 and 2: one blocks the other,"1,2"\n'
        '3,REQUEST_PENDING,3 has a pending follow request to 4,"3,4"\n'
        '6,FOLLOW_LIMIT,5 would follow more than 3 accounts,"5,8"\n'
        '7,FOLLOW_LIMIT,5 would follow more than 3 accounts,"5,9"\n'
        '10,MALFORMED,"expected follower_id,followee_id[,followed_at]",1;2\n'
        '11,DUPLICATE,same pair as line 9,"20,21"\n'
        '12,SELF_FOLLOW,20 follows itself,"20,20"\n'
        '13,ACCOUNT_AWAY,30 or 31 is deactivated or deleted,"30,31"\n'
    )
    assert result.tally.as_dict() == {
        "rows": 13,
        "written": 3,
        "already_present": 1,
        "rejected": 9,
        "rejected_by_reason": {
            "ACCOUNT_AWAY": 1,
            "BLOCKED": 2,
            "DUPLICATE": 1,
            "FOLLOW_LIMIT": 2,
            "MALFORMED": 1,
            "REQUEST_PENDING": 1,
            "SELF_FOLLOW": 1,
        },
    }
    started = result.state.started_us
    following = await table_items(capped, FOLLOWING)
    assert [i for i in following if i[1] == "O"] == [(3, "O", 1), (5, "O", 3), (20, "O", 1)]
    assert [i for i in following if i[1].startswith("E#")] == [
        (5, f"E#{6:020d}", started + 4),
        (5, f"E#{7:020d}", started + 5),
        (10, f"E#{11:020d}", existing_at),  # left as it was
        (20, f"E#{21:020d}", started + 9),
    ]


async def test_a_second_run_adds_nothing(settings: Settings, tmp_path: Path) -> None:
    """The finished state says so; and run again from scratch, every row is already present."""
    source = tmp_path / "edges.csv"
    source.write_text("".join(f"{n},{n + 1}\n" for n in range(1, 31)) + "7,7\n")
    first = await run(settings, source)
    followers, following = await table_items(settings, FOLLOWERS), await table_items(settings, FOLLOWING)
    assert (len(followers), len(following), first.written_now) == (60, 90, 30)
    rejects = source.with_suffix(".rejects").read_text()

    again = await run(settings, source)
    assert (again.already_done, again.written_now, again.tally) == (True, 0, first.tally)

    restarted = await run(settings, source, restart=True)
    assert (restarted.written_now, restarted.tally.already_present, restarted.tally.written) == (0, 30, 0)
    assert await table_items(settings, FOLLOWERS) == followers
    assert await table_items(settings, FOLLOWING) == following
    assert (
        source.with_suffix(".rejects").read_text()
        == rejects
        == ('line,reason,detail,raw\n31,SELF_FOLLOW,7 follows itself,"7,7"\n')
    )


async def test_a_run_killed_before_it_saved_is_redone_to_the_same_end(settings: Settings, tmp_path: Path) -> None:
    """Everything written, nothing saved: the next run cuts the reject file back to what the state
    says, finds every edge already present, and ends with the same items and rejects."""
    source = tmp_path / "edges.csv"
    source.write_text("1,2\n2,2\n1,3\n4,1\n1,2\n")
    first = await run(settings, source)
    followers, following = await table_items(settings, FOLLOWERS), await table_items(settings, FOLLOWING)
    rejects = source.with_suffix(".rejects").read_text()
    header = len("line,reason,detail,raw\n")
    save_state(
        source.with_suffix(".state"),
        replace(first.state, watermark=0, rejects_bytes=header, finished=False, tally=Tally()),
    )

    again = await run(settings, source)
    assert (again.finished, again.written_now, again.tally.already_present, again.tally.written) == (True, 0, 3, 0)
    assert await table_items(settings, FOLLOWERS) == followers
    assert await table_items(settings, FOLLOWING) == following
    assert (
        source.with_suffix(".rejects").read_text()
        == rejects
        == ('line,reason,detail,raw\n2,SELF_FOLLOW,2 follows itself,"2,2"\n5,DUPLICATE,same pair as line 1,"1,2"\n')
    )


async def test_a_new_follower_with_more_rows_than_the_cap_gets_exactly_the_cap_in_file_order(
    settings: Settings, tmp_path: Path
) -> None:
    """No ``O`` item yet and 5 rows in one batch under a cap of 3 (the batch moves the count by 5):
    the first 3 lines are written, the last 2 are FOLLOW_LIMIT, and the other follower of the batch
    is written as usual."""
    capped = replace(settings, max_following=3)
    source = tmp_path / "edges.csv"
    source.write_text("7,1\n7,2\n8,1\n7,3\n7,4\n7,5\n")
    result = await run(capped, source)
    assert source.with_suffix(".rejects").read_text() == (
        "line,reason,detail,raw\n"
        '5,FOLLOW_LIMIT,7 would follow more than 3 accounts,"7,4"\n'
        '6,FOLLOW_LIMIT,7 would follow more than 3 accounts,"7,5"\n'
    )
    started = result.state.started_us
    following = await table_items(capped, FOLLOWING)
    assert [i for i in following if i[1] == "O"] == [(7, "O", 3), (8, "O", 1)]
    assert [i for i in following if i[1].startswith("E#")] == [
        (7, f"E#{1:020d}", started + 1),
        (7, f"E#{2:020d}", started + 2),
        (7, f"E#{3:020d}", started + 4),
        (8, f"E#{1:020d}", started + 3),
    ]
    assert (result.tally.written, dict(result.tally.rejected)) == (4, {"FOLLOW_LIMIT": 2})


async def test_a_state_path_that_cannot_be_written_stops_the_import_before_anything_is_touched(
    settings: Settings, tmp_path: Path
) -> None:
    """No such directory: ``ImportFileError`` (one line, exit 2), before the reject file or a row is written."""
    source = tmp_path / "edges.csv"
    source.write_text("1,2\n")
    state_path = tmp_path / "no-such-dir" / "state.json"
    with pytest.raises(ImportFileError) as raised:
        await run(settings, source, state_path=state_path)
    assert str(raised.value) == f"cannot write the state file {state_path}: No such file or directory"
    assert not source.with_suffix(".rejects").exists()
    assert await table_items(settings, FOLLOWING) == []


class Killed(BaseException):
    """Stands for ``kill -9`` at one point of a run: nothing after it happens."""


class StopAfterFirstUnit:
    """A meter that asks the run to stop (as Ctrl-C does) once the first unit is settled."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop

    def advance(self, done: int = 1) -> None:
        if done:
            self._stop.set()

    def total(self, total: int | None) -> None: ...


async def test_a_restart_killed_right_after_it_cut_the_reject_file_is_continued_by_the_next_run(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import stopped half way (its state counts a reject); ``--restart`` killed just after it cut
    the reject file: the next plain run continues the restart (whose state replaced the old one
    first) and ends as one run, instead of refusing a reject file shorter than the old state says."""
    source = tmp_path / "edges.csv"
    source.write_text("5,5\n" + "".join(f"{n},{n + 100}\n" for n in range(1, 31)))  # 12 rows a batch
    options = ImportOptions(source, source.with_suffix(".state"), source.with_suffix(".rejects"), concurrency=1)
    state, fresh = prepare(options)
    stop = asyncio.Event()
    first = await run_import(settings, options, state, fresh=fresh, stop=stop, meter=StopAfterFirstUnit(stop))
    stopped = (first.finished, first.state.watermark, first.tally.written, first.tally.rejected)
    assert stopped == (False, 25, 24, Counter({"SELF_FOLLOW": 1}))  # the second batch was in flight
    rejects = 'line,reason,detail,raw\n1,SELF_FOLLOW,5 follows itself,"5,5"\n'
    assert source.with_suffix(".rejects").read_text() == rejects

    def cut_then_killed(path: Path, *, keep_bytes: int) -> RejectFile:
        RejectFile(path, keep_bytes=keep_bytes).close()
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(importer, "RejectFile", cut_then_killed)
        with pytest.raises(Killed):
            await run(settings, source, restart=True, concurrency=1)
    assert source.with_suffix(".rejects").read_text() == "line,reason,detail,raw\n"

    again = await run(settings, source)
    assert (again.finished, again.tally.written, again.tally.already_present) == (True, 6, 24)
    assert source.with_suffix(".rejects").read_text() == rejects
    following = await table_items(settings, FOLLOWING)
    assert [i for i in following if i[1].startswith("E#")] == [
        (n, f"E#{n + 100:020d}", (first if n <= 24 else again).state.started_us + n + 1) for n in range(1, 31)
    ]
