"""`socialgraph fsck` as an operator runs it: its lines, its JSON logs and its exit codes (usage errors,
exit 2, are in ``tests/unit/operations/test_fsck_report.py``)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from socialgraph_devstack.processes import free_port

from graph_service.cache import keys
from graph_service.domain.models import Edge
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.entrypoints import cli
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.commands import command_environment, socialgraph
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters
from tests.support.tables import create_tables, drop_tables

T0 = 1_764_000_000_000_000


@pytest.fixture
async def tables(dynamodb_local: str, redis_url: str) -> AsyncIterator[Settings]:
    value = make_settings(dynamodb_local, redis_url)
    await create_tables(value, streams=False)
    yield value
    await drop_tables(value)


def fsck(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `socialgraph fsck <args>` against the test's tables and Redis."""
    return socialgraph(command_environment(settings, **env), "fsck", *args)


def json_lines(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


async def test_exit_codes_say_found_repaired_left_or_unreachable(tables: Settings, tmp_path: Path) -> None:
    """Each run first names what it checks on stderr; ``--json`` prints one object instead of the lines,
    ``--metrics-file`` leaves the result for node_exporter."""
    cache = redis.Redis.from_url(tables.redis_url, decode_responses=True)
    try:
        cache.set(keys.follow_state(5, 6), "1")  # 5 does not follow 6
        found = fsck(tables, "5", "--settle-seconds", "0")
        assert found.returncode == 1, found.stderr
        target = f"DynamoDB {tables.dynamodb_endpoint} (region {tables.aws_region}), tables {tables.table_prefix}*"
        assert found.stderr.splitlines()[0] == f"socialgraph fsck: {target}, cache {tables.redis_url}"
        line = "cache_follow_state user=5 other=6: sg:{5}:fs:6 = 1; DynamoDB: 5 does not follow 6"
        assert found.stdout.splitlines() == [
            line,
            "fsck: 1 violation (cache_follow_state 1) (1 users, 2 partitions, 1 cache entries)",
        ]
        (logged,) = [e for e in json_lines(found.stderr) if e["event"] == "fsck_violation"]
        assert (logged["kind"], logged["user_id"], logged["other_id"], logged["repaired"]) == (
            "cache_follow_state",
            5,
            6,
            False,
        )

        repaired = fsck(tables, "--all", "--repair-cache", "--settle-seconds", "0")
        assert repaired.returncode == 0, repaired.stderr
        assert repaired.stdout.splitlines() == [
            f"{line} (repaired: entry deleted)",
            "fsck: 1 violation (cache_follow_state 1); 1 repaired (0 partitions, 1 cache entries)",
        ]
        assert cache.exists(keys.follow_state(5, 6)) == 0
    finally:
        cache.close()

    dynamo = AsyncDynamo.build(tables)
    try:  # 7 -> 8 in the followers table only: a store violation, which --repair-cache leaves to the operator
        made = Edge(7, T0)
        for item in (it.item(it.key(it.EDGE, 8, 7), made), it.item(it.order_key(it.EDGE_ORDER, 8, made), made)):
            await dynamo.call("put_item", TableName=tables.table(FOLLOWERS), Item=item)
    finally:
        dynamo.close()
    metrics_file = tmp_path / "fsck.prom"
    broken = fsck(tables, "8", "--repair-cache", "--settle-seconds", "0", "--json", "--metrics-file", str(metrics_file))
    assert broken.returncode == 1, broken.stderr
    summary = json.loads(broken.stdout)  # one object, no lines
    one_sided = {
        "kind": "edge_one_sided",
        "user_id": 8,
        "other_id": 7,
        "detail": "followers pk=8 E#7 (at 1764000000000000) has no following pk=7 E#8",
        "repaired": False,
    }
    assert one_sided in summary["violations"]
    by_kind = {"counter_drift": 1, "edge_one_sided": 1}  # 8's counters say 0 of the 1 follower
    assert (summary["total"], summary["by_kind"], summary["repaired"]) == (2, by_kind, 0)
    assert summary["checked"] == {"users": 1, "partitions": 2, "cache_entries": 0}
    written = metrics_file.read_text()
    assert 'socialgraph_fsck_violations{kind="edge_one_sided"} 1.0' in written
    assert 'socialgraph_fsck_violations{kind="across_block"} 0.0' in written  # every kind, found or not
    assert 'socialgraph_operator_exit_code{command="fsck"} 1.0' in written

    unreachable = fsck(tables, "5", "--settle-seconds", "0", SG_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert unreachable.returncode == 3, unreachable.stderr
    assert "a dependency is unreachable" in unreachable.stderr


async def in_process(monkeypatch: pytest.MonkeyPatch, settings: Settings, *argv: str) -> int:
    """``socialgraph ARGV`` through ``cli.main`` in this process (on a thread: it runs its own loop)."""
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: None)
    for name, value in command_environment(settings).items():
        monkeypatch.setenv(name, value)
    return await asyncio.to_thread(cli.main, list(argv))


@pytest.mark.streams
async def test_a_counters_consumer_behind_is_reported_instead_of_counter_drift(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Follows the stopped consumer has not applied: fsck checks the rest and says how far behind
    it is, reconcile checks nothing, both exit 3; once it has caught up, the counters are checked
    again (they once came out as one ``counter_drift`` per user, exit 1)."""
    dynamo = AsyncDynamo.build(settings)
    tables = TableNames(settings.table_prefix)
    store, counters = DynamoGraphStore(dynamo, tables), DynamoCounterTable(dynamo, tables)

    async def followers_of_2() -> int:
        return (await counters.read_counts([2]))[2].followers

    try:
        async with running_counters(settings):
            await store.add_edge(1, 2, now_us())
            await eventually(followers_of_2, lambda n: n == 1)  # the consumer has a checkpoint
        for follower in (3, 4, 5):
            await store.add_edge(follower, 2, now_us())

        assert await in_process(monkeypatch, settings, "fsck", "2", "--settle-seconds", "0.2") == 3
        lines = capsys.readouterr().out.splitlines()
        behind = re.fullmatch(
            r"counters consumer (\d+) s behind: counters not checked \(run fsck again once it has caught up\)", lines[0]
        )
        assert behind is not None, lines
        assert len(lines) == 2, lines
        summary = f"fsck: no violation; counters not checked (counters consumer {behind[1]} s behind) (1 users, "
        assert lines[1].startswith(summary), lines
        assert await in_process(monkeypatch, settings, "reconcile", "2", "--fix", "--settle-seconds", "0.2") == 3
        (line,) = capsys.readouterr().out.splitlines()
        assert re.fullmatch(
            r"reconcile: counters consumer \d+ s behind; counts not checked \(run it again once it has caught up\)",
            line,
        ), line
        assert await followers_of_2() == 1  # reconcile --fix wrote nothing

        async with running_counters(settings):
            await eventually(followers_of_2, lambda n: n == 4)
            assert await in_process(monkeypatch, settings, "fsck", "2", "--settle-seconds", "0.2") == 0
            assert "counters not checked" not in capsys.readouterr().out
            assert await in_process(monkeypatch, settings, "reconcile", "2", "--settle-seconds", "0.2") == 0
    finally:
        dynamo.close()
