"""`socialgraph import` as an operator runs it: a real process, killed (SIGKILL) or stopped (Ctrl-C)
half way and run again, ending exactly as one uninterrupted run: edge items both ways, outgoing
counts, the reject file, and the counts the counters consumer derives from the new edges."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from socialgraph_devstack.processes import free_port, start_dynamodb_local

from graph_service.domain.models import Counts, Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.graph_store import load_counts
from tests.support.commands import command_environment
from tests.support.polling import eventually

SOCIALGRAPH = Path(sys.executable).with_name("socialgraph")


@pytest.fixture(scope="module")
def dynamodb_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A DynamoDB Local of this module's own: the 12,000 or so stream records of the big import would
    otherwise slow down every later streams test of the folder (``tests/support/servers.py``)."""
    server = start_dynamodb_local(free_port(), tmp_path_factory.mktemp("import-dynamodb"))
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


MALFORMED = "expected follower_id,followee_id[,followed_at]"


@dataclass
class Plan:
    """An import file and everything one uninterrupted run of it must leave behind."""

    lines: list[str] = field(default_factory=lambda: ["follower_id,followee_id,followed_at"])
    rejects: list[tuple[int, str, str, str]] = field(default_factory=list)
    edges: list[tuple[int, int, int | None]] = field(default_factory=list)
    """(follower, followee, time in µs or None: the import's start plus the line)"""
    lines_of_edges: list[int] = field(default_factory=list)
    blocks: list[tuple[int, int]] = field(default_factory=list)
    requests: list[tuple[int, int]] = field(default_factory=list)

    def add(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def reject(self, text: str, reason: str, detail: str) -> None:
        self.rejects.append((self.add(text), reason, detail, text))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def reject_file(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("line", "reason", "detail", "raw"))
        writer.writerows(self.rejects)
        return out.getvalue()


def make_plan(rows: int, users: int, seed: int) -> Plan:
    """``rows`` lines among ``users`` accounts: about 5% bad lines of every kind the file alone shows,
    rows across seeded blocks and pending requests, a tenth with an explicit time, some blank lines."""
    chooser = random.Random(seed)
    pairs = [(a, b) for a in range(1, users + 1) for b in range(1, users + 1) if a != b]
    chooser.shuffle(pairs)
    plan = Plan()
    blocked = {frozenset(p) for p in pairs[: rows // 200]}  # rows either way are refused
    plan.blocks = [(b, a) for a, b in pairs[: rows // 200]]  # the followee blocks the follower
    plan.requests = sorted(p for p in pairs[rows // 200 : rows // 100] if frozenset(p) not in blocked)
    pending = set(plan.requests)
    first_line: dict[tuple[int, int], int] = {}
    taken = 0
    while len(plan.lines) - 1 < rows:
        roll = chooser.random()
        if roll < 0.01:
            plan.reject(f"{chooser.randint(1, users)};{chooser.randint(1, users)}", "MALFORMED", MALFORMED)
        elif roll < 0.02:
            plan.reject(f"0,{chooser.randint(1, users)}", "INVALID_ID", "follower_id '0' is not an ID in 1..2**64-1")
        elif roll < 0.03:
            user = chooser.randint(1, users)
            plan.reject(f"{user},{user}", "SELF_FOLLOW", f"{user} follows itself")
        elif roll < 0.04:
            a, b = pairs[-1 - chooser.randint(0, 99)]  # pairs never given otherwise
            plan.reject(f"{a},{b},tomorrow", "INVALID_TIME", "followed_at 'tomorrow': not ISO-8601 or Unix seconds")
        elif roll < 0.05 and first_line:
            (a, b), line = chooser.choice(list(first_line.items()))
            plan.reject(f"{a},{b}", "DUPLICATE", f"same pair as line {line}")
        elif roll < 0.055:
            plan.lines.append("")
        else:
            a, b = pairs[taken]
            taken += 1
            at = 1_600_000_000 + taken if chooser.random() < 0.1 else None
            text = f"{a},{b}" + ("" if at is None else f",{at}")
            if frozenset((a, b)) in blocked:
                plan.reject(text, "BLOCKED", f"{a} and {b}: one blocks the other")
            elif (a, b) in pending:
                plan.reject(text, "REQUEST_PENDING", f"{a} has a pending follow request to {b}")
            else:
                line = plan.add(text)
                plan.edges.append((a, b, None if at is None else at * 1_000_000))
                plan.lines_of_edges.append(line)
            first_line[(a, b)] = len(plan.lines)
    return plan


async def seed(settings: Settings, plan: Plan) -> None:
    """The plan's blocks and pending requests, as the store writes them (outgoing counts included),
    in a few BatchWriteItem calls: one transaction each would cost seconds of the test's time."""
    followers, following = settings.table(FOLLOWERS), settings.table(FOLLOWING)
    puts: list[tuple[str, dict[str, Any]]] = []
    for blocker, blocked in plan.blocks:
        puts.append((followers, it.item(it.key(it.BLOCK, blocker, blocked), Edge(blocked, 1))))
    for follower, followee in plan.requests:
        request = Edge(follower, 2)
        puts.append((followers, it.item(it.key(it.REQUEST, followee, follower), request)))
        puts.append((followers, it.item(it.order_key(it.REQUEST_ORDER, followee, request), request)))
    for follower, n in Counter(a for a, _ in plan.requests).items():
        puts.append((following, {**it.outgoing_key(follower), "n": {"N": str(n)}}))
    dynamo = AsyncDynamo.build(settings)
    try:
        for first in range(0, len(puts), 25):
            request_items: dict[str, list[dict[str, Any]]] = {}
            for table, item in puts[first : first + 25]:
                request_items.setdefault(table, []).append({"PutRequest": {"Item": item}})
            while request_items:
                request_items = (await dynamo.call("batch_write_item", RequestItems=request_items)).get(
                    "UnprocessedItems"
                ) or {}
    finally:
        dynamo.close()


async def scan(settings: Settings, table: str) -> list[tuple[int, str, int]]:
    dynamo = AsyncDynamo.build(settings)
    items: list[dict[str, dict[str, str]]] = []
    request: dict[str, Any] = {"TableName": settings.table(table), "ConsistentRead": True}
    try:
        while True:
            page = await dynamo.call("scan", **request)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    finally:
        dynamo.close()
    return sorted((int(i["pk"]["N"]), i["sk"]["S"], int(i.get("at", i.get("n", {"N": "-1"}))["N"])) for i in items)


def expected_tables(plan: Plan, started_us: int) -> tuple[list[tuple[int, str, int]], list[tuple[int, str, int]]]:
    """The E#/T# items of both tables and the outgoing counts (``O``) one uninterrupted run leaves."""
    followers, following = [], []
    outgoing = Counter(a for a, _ in plan.requests)
    for (a, b, at), line in zip(plan.edges, plan.lines_of_edges, strict=True):
        at_us = started_us + line if at is None else at
        followers += [(b, f"E#{a:020d}", at_us), (b, f"T#{at_us:016d}#{a:020d}", at_us)]
        following += [(a, f"E#{b:020d}", at_us), (a, f"T#{at_us:016d}#{b:020d}", at_us)]
        outgoing[a] += 1
    following += [(user, "O", n) for user, n in outgoing.items()]
    return sorted(followers), sorted(following)


def edge_items(items: list[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    return [i for i in items if i[1].startswith(("E#", "T#", "O"))]


@contextlib.asynccontextmanager
async def started(
    settings: Settings, source: Path, *options: str, log_level: str = "warning"
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``socialgraph import FILE [options]`` as a process of its own, killed if the test ends before it does."""
    process = await asyncio.create_subprocess_exec(
        str(SOCIALGRAPH),
        "import",
        str(source),
        *options,
        env=command_environment(settings, SG_LOG_LEVEL=log_level),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


def saved(source: Path) -> dict[str, Any]:
    path = source.with_name(f"{source.name}.import-state.json")
    return json.loads(path.read_text()) if path.exists() else {"watermark": 0, "finished": False}


async def watermark_reaches(source: Path, line: int) -> dict[str, Any]:
    async def probe() -> dict[str, Any]:
        return saved(source)

    # A deadline for a loaded machine (DynamoDB Local with streams writes ~150 edges/s on a quiet one).
    return await eventually(probe, lambda s: int(s["watermark"]) >= line, timeout=300)


async def check_end_state(settings: Settings, plan: Plan, source: Path) -> int:
    state = saved(source)
    assert state["finished"] is True
    started_us = int(state["started_us"])
    followers, following = expected_tables(plan, started_us)
    assert edge_items(await scan(settings, FOLLOWERS)) == followers
    assert edge_items(await scan(settings, FOLLOWING)) == following
    assert source.with_name(f"{source.name}.rejects.csv").read_text() == plan.reject_file()
    return started_us


@pytest.mark.streams
@pytest.mark.timeout(900)
async def test_killed_half_way_and_run_again_it_ends_as_one_run_with_exact_counts(
    settings: Settings, counters: asyncio.Task[None], tmp_path: Path
) -> None:
    """700 lines among 100 users (about 20 of the importer's batches of 12 to 14 rows before the
    kill, 30 after, 8 at a time); SIGKILL once 300 lines are settled; the second run finishes it."""
    # 400 lines still ahead at the kill: more than the rows written past the saved state (it is
    # saved every second, ~150 rows on a quiet machine) and the 8 batches in flight, so the kill
    # always lands mid-file with rows past the state; a longer file only repeats the same batches.
    plan = make_plan(700, 100, seed=5)
    await seed(settings, plan)
    source = tmp_path / "edges.csv"
    source.write_text(plan.text())

    async with started(settings, source) as first:
        at_kill = await watermark_reaches(source, 300)
        first.kill()
        await first.wait()
    assert first.returncode == -signal.SIGKILL
    assert saved(source)["finished"] is False
    assert int(at_kill["watermark"]) < len(plan.lines)

    async with started(settings, source) as second:
        out, err = await second.communicate()
    assert second.returncode == 0, err.decode()
    assert out.decode().startswith(f"imported {source}: {len(plan.lines) - 1 - plan.lines.count('')} rows read")
    await check_end_state(settings, plan, source)

    following = Counter(a for a, _, _ in plan.edges)
    followers = Counter(b for _, b, _ in plan.edges)
    users = list(range(1, 101))
    expected = {u: (followers[u], following[u]) for u in users}

    dynamo = AsyncDynamo.build(settings)

    async def counts() -> dict[int, tuple[int, int]]:
        found: dict[int, Counts] = await load_counts(dynamo, settings.table(USERS), users)
        return {u: (c.followers, c.following) for u, c in found.items()}

    try:
        await eventually(counts, lambda c: c == expected, timeout=90)
    finally:
        dynamo.close()


async def test_ctrl_c_stops_cleanly_with_the_state_saved_and_a_second_run_finishes_exactly(
    settings: Settings, tmp_path: Path
) -> None:
    """SIGINT: the batches in flight end, the state is saved, it says where it stopped, exit 130;
    the second run counts every edge written, none "already present" (only a hard stop leaves rows
    written past the saved state), and its progress total is the file's rows, not its lines."""
    plan = make_plan(600, 40, seed=9)  # about 20 batches either side of the stop
    await seed(settings, plan)
    source = tmp_path / "edges.csv"
    source.write_text(plan.text())

    async with started(settings, source) as first:
        await watermark_reaches(source, 200)
        first.send_signal(signal.SIGINT)
        out, err = await first.communicate()
    assert first.returncode == 130, err.decode()
    state = saved(source)
    assert state["finished"] is False
    assert out.decode().splitlines()[0].startswith(f"stopped at line {state['watermark']} of {len(plan.lines)}: ")
    assert out.decode().splitlines()[1] == (
        f"state saved in {source}.import-state.json; run the same command again to continue"
    )
    rejects = source.with_name(f"{source.name}.rejects.csv").read_text()
    assert rejects == "".join(
        line
        for line in io.StringIO(plan.reject_file())
        if line.startswith("line,") or int(line.split(",")[0]) <= int(state["watermark"])
    )

    async with started(settings, source, "--json", log_level="info") as second:  # info: the progress lines
        out, err = await second.communicate()
    assert second.returncode == 0, err.decode()
    await check_end_state(settings, plan, source)
    rows = len(plan.lines) - 1 - plan.lines.count("")  # no header, no blank line
    summary = json.loads(out.decode())  # one object, no lines
    assert (summary["outcome"], summary["rows"], summary["written"]) == ("imported", rows, len(plan.edges))
    assert (summary["already_present"], summary["finished"]) == (0, True)
    assert summary["rejected"] == sum(summary["rejected_by_reason"].values()) == len(plan.rejects)
    logged = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    (done,) = [e for e in logged if e.get("event") == "progress_done"]
    assert (done["done"], done["total"]) == (rows, rows)


async def test_a_state_path_that_cannot_be_written_is_one_line_and_exit_2(settings: Settings, tmp_path: Path) -> None:
    """``--state`` in a directory that does not exist: what to fix, on one line after the one naming
    the tables, not a traceback; and nothing written (no reject file, no edge)."""
    source = tmp_path / "edges.csv"
    source.write_text("1,2\n")
    state_path = tmp_path / "no-such-dir" / "state.json"
    async with started(settings, source, "--state", str(state_path)) as process:
        out, err = await process.communicate()
    target = f"DynamoDB {settings.dynamodb_endpoint} (region {settings.aws_region}), tables {settings.table_prefix}*"
    assert (process.returncode, out.decode(), err.decode()) == (
        2,
        "",
        f"socialgraph import: {target}\n"  # what it was about to write to, before it started
        f"socialgraph import: cannot write the state file {state_path}: No such file or directory\n",
    )
    assert not source.with_name("edges.csv.rejects.csv").exists()
    assert edge_items(await scan(settings, FOLLOWING)) == []
