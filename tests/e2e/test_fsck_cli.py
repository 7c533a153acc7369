"""`socialgraph fsck` as an operator runs it: its lines, its JSON logs and its exit codes (usage errors,
exit 2, are in ``tests/unit/operations/test_fsck_report.py``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator

import pytest
import redis
from socialgraph_devstack.processes import free_port

from graph_service.cache import keys
from graph_service.domain.models import Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS
from graph_service.settings import Settings
from graph_service.store import items as it
from tests.support.commands import command_environment, socialgraph
from tests.support.runtimes import make_settings
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


async def test_exit_codes_say_found_repaired_left_or_unreachable(tables: Settings) -> None:
    cache = redis.Redis.from_url(tables.redis_url, decode_responses=True)
    try:
        cache.set(keys.follow_state(5, 6), "1")  # 5 does not follow 6
        found = fsck(tables, "5", "--settle-seconds", "0")
        assert found.returncode == 1, found.stderr
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
    broken = fsck(tables, "8", "--repair-cache", "--settle-seconds", "0")
    assert broken.returncode == 1, broken.stderr
    assert (
        "edge_one_sided user=8 other=7: followers pk=8 E#7 (at 1764000000000000) has no following pk=7 E#8"
        in broken.stdout
    )

    unreachable = fsck(tables, "5", "--settle-seconds", "0", SG_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert unreachable.returncode == 3, unreachable.stderr
    assert "a dependency is unreachable" in unreachable.stderr
