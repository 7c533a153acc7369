"""``socialgraph reconcile`` as an operator runs it: its lines, its JSON log lines and its exit codes
(0 nothing left to fix, 1 drift found and not fixed, 2 usage, 3 a dependency unreachable)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from socialgraph_devstack.processes import free_port

from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.entrypoints import cli
from graph_service.settings import Settings
from tests.support.commands import command_environment
from tests.support.commands import socialgraph as socialgraph_process
from tests.support.drift import plant_counts, plant_n, stored_counts
from tests.support.seeding import seed_follows


@pytest.fixture
async def drifted(settings: Settings) -> AsyncIterator[Settings]:
    """Users 11 (2 followers, says 5) and 12 (right) in the settings' tables."""
    await seed_follows(settings, [(21, 11), (22, 11), (21, 12)])
    dynamo = AsyncDynamo.build(settings)
    try:
        await plant_counts(dynamo, settings, {11: Counts(5, 0, 2), 12: Counts(1, 0, 1), 21: Counts(0, 2, 2)})
        await plant_counts(dynamo, settings, {22: Counts(0, 1, 1)})
        yield settings
    finally:
        dynamo.close()


async def socialgraph(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *argv: str) -> int:
    """``cli.main`` in this process (on a thread: it runs its own event loop), logging left as the
    session has it."""
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: None)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return await asyncio.to_thread(cli.main, list(argv))


async def test_exit_1_on_drift_0_once_fixed_with_one_line_per_drifted_user(
    drifted: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = command_environment(drifted)
    assert await socialgraph(monkeypatch, env, "reconcile", "11", "12", "--settle-seconds", "0.05") == 1
    shown = capsys.readouterr()
    target = f"DynamoDB {drifted.dynamodb_endpoint} (region {drifted.aws_region}), tables {drifted.table_prefix}*"
    assert shown.err.splitlines()[0] == f"socialgraph reconcile: {target}"
    lines = shown.out.splitlines()
    assert lines[0] == "user 11: followers stored 5 true 2, following stored 0 true 0"
    assert lines[1].startswith("reconcile: 2 users checked, 1 drifted, 0 fixed, 0 busy; ")
    assert len(lines) == 2

    fix = ("reconcile", "11", "12", "--fix", "--settle-seconds", "0.05", "--json")
    assert await socialgraph(monkeypatch, env, *fix) == 0
    shown = capsys.readouterr()
    assert shown.err.splitlines()[0] == f"socialgraph reconcile: {target}, cache {drifted.redis_url}"  # --fix: both
    summary = json.loads(shown.out)  # one object, no lines
    fixed = {"user_id": 11, "outcome": "fixed", "followers_stored": 5, "followers_true": 2}
    fixed |= {"following_stored": 0, "following_true": 0, "cache_updated": True}
    assert summary["users"] == {"checked": 2, "drifted": 1, "fixed": 1, "busy": 0, "drifted_users": [fixed]}
    assert (summary["outgoing"], summary["fixing"], summary["behind_seconds"]) == (None, True, None)

    dynamo = AsyncDynamo.build(drifted)
    try:  # the following cap's counts as the service would have kept them
        await plant_n(dynamo, drifted, {21: 2, 22: 1})
    finally:
        dynamo.close()
    assert await socialgraph(monkeypatch, env, "reconcile", "--all", "--settle-seconds", "0.05") == 0
    (summary,) = capsys.readouterr().out.splitlines()
    assert summary.startswith(
        "reconcile: 4 users checked, 0 drifted, 0 fixed, 0 busy;"
        " outgoing counts: 2 users checked, 0 drifted, 0 fixed, 0 busy; "
    )


async def test_an_unreachable_dynamodb_is_exit_3(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**command_environment(settings), "SG_DYNAMODB_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    assert await socialgraph(monkeypatch, env, "reconcile", "11") == 3
    target, failure = capsys.readouterr().err.splitlines()  # what it was about to read, then one line
    assert target.startswith("socialgraph reconcile: DynamoDB http://127.0.0.1:")
    assert failure.startswith("socialgraph reconcile: a dependency is unreachable: ")


async def test_the_installed_command_prints_findings_and_json_log_lines(drifted: Settings) -> None:
    """A real process: the lines on stdout; on stderr, after the line naming what it touches, one
    JSON object per drift and for the summary (with --all the progress lines too, as stderr is no
    terminal here)."""
    env = command_environment(drifted, SG_LOG_LEVEL="info")
    ran = await asyncio.to_thread(socialgraph_process, env, "reconcile", "--all", "--fix", "--settle-seconds", "0.05")
    assert ran.returncode == 0, ran.stderr
    out = ran.stdout.splitlines()
    assert out[0] == "user 11: followers stored 5 true 2, following stored 0 true 0; fixed"
    assert out[1] == "outgoing 21: stored none true 2 (follows 2 + requests 0); fixed"
    assert out[2] == "outgoing 22: stored none true 1 (follows 1 + requests 0); fixed"
    assert out[3].startswith("reconcile: 4 users checked, 1 drifted, 1 fixed, 0 busy;")
    target, *log_lines = ran.stderr.splitlines()  # first what it reads and writes, for the person running it
    assert target.startswith(f"socialgraph reconcile: DynamoDB {drifted.dynamodb_endpoint} ")
    logged = [json.loads(line) for line in log_lines]
    drifts = [(e["kind"], e["user"], e["outcome"]) for e in logged if e["event"] == "reconcile_drift"]
    assert sorted(drifts) == [("counts", 11, "fixed"), ("outgoing", 21, "fixed"), ("outgoing", 22, "fixed")]
    (summary,) = [e for e in logged if e["event"] == "reconcile_summary"]
    assert summary["users"] == {"drifted": 1, "drift": 0, "fixed": 1, "busy": 0}
    assert summary["outgoing"] == {"drifted": 2, "drift": 0, "fixed": 2, "busy": 0}
    assert any(e["event"] == "progress_done" and e["task"] == "reconcile" for e in logged)
    dynamo = AsyncDynamo.build(drifted)
    try:
        assert await stored_counts(dynamo, drifted, 11) == Counts(2, 0, 3)
    finally:
        dynamo.close()
