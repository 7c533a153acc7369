"""The counters Lambda handler, fed DynamoDB Streams events, against DynamoDB Local and Redis."""

from __future__ import annotations

import asyncio
import copy
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.entrypoints import lambda_handler
from graph_service.entrypoints.lambda_handler import handler
from graph_service.settings import Settings, SettingsError
from tests.support.emf import emf_lines, metrics_of
from tests.support.graph_calls import cached_counts

EVENT_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "followers_stream_event.json"
Counts = dict[int, tuple[int, int]]

# The fixture: 1001->2001, 1002->2001, 1001->2002 (records 0-5), then 1002 unfollows 2001,
# 1003->2001, 2002->1001 (records 6-11); each follow is an E# membership and a T# ordering record.
AFTER_FIRST_SIX = {1001: (0, 2), 1002: (0, 1), 1003: (0, 0), 2001: (2, 0), 2002: (1, 0)}
AFTER_ALL = {1001: (1, 2), 1002: (0, 0), 1003: (0, 1), 2001: (2, 0), 2002: (1, 1)}


def load_event() -> dict[str, Any]:
    event: dict[str, Any] = json.loads(EVENT_PATH.read_text())
    return event


def batch(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": copy.deepcopy(records)}


@pytest.fixture
def logging_levels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The levels the handler configured its JSON logging with (the session's logging stays)."""
    levels: list[str] = []
    monkeypatch.setattr(lambda_handler, "configure_logging", lambda level, **_: levels.append(level))
    return levels


@pytest.fixture
def lambda_env(settings: Settings, monkeypatch: pytest.MonkeyPatch, logging_levels: list[str]) -> Settings:
    """The Lambda's configuration: the same SG_* variables as every other process."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("SG_DYNAMODB_ENDPOINT", settings.dynamodb_endpoint)
    monkeypatch.setenv("SG_TABLE_PREFIX", settings.table_prefix)
    monkeypatch.setenv("SG_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("SG_LOG_LEVEL", "warning")
    return settings


async def invoke(event: dict[str, Any]) -> dict[str, Any]:
    """One Lambda invocation (the handler runs its own event loop, as in the Lambda runtime)."""
    result: dict[str, Any] = await asyncio.to_thread(handler, event, None)
    return result


async def counts(stub: pb_grpc.SocialGraphServiceStub, users: list[int]) -> Counts:
    reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=users))
    return {c.user_id: (c.followers_count, c.following_count) for c in reply.counts}


async def test_event_is_counted_and_a_retried_event_counts_nothing_more(
    lambda_env: Settings, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    """A stream event moves the counters; the same event delivered again (a Lambda retry) changes nothing."""
    records = load_event()["Records"]
    users = sorted(AFTER_ALL)
    assert await invoke(batch(records[:6])) == {"batchItemFailures": []}
    touched = {u: c for u, c in AFTER_FIRST_SIX.items() if u != 1003}
    assert await cached_counts(lambda_env, sorted(touched)) == touched  # absolute values, written by the handler
    assert await counts(stub, users) == AFTER_FIRST_SIX
    assert await invoke(batch(records[:6])) == {"batchItemFailures": []}
    assert await invoke(batch(records[2:4])) == {"batchItemFailures": []}  # a bisected retry
    assert await cached_counts(lambda_env, users) == AFTER_FIRST_SIX
    assert await counts(stub, users) == AFTER_FIRST_SIX


async def test_retry_of_a_superset_batch_counts_only_the_new_events(
    lambda_env: Settings, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    """A batch re-delivered with more records behind it counts only the records not seen before."""
    records = load_event()["Records"]
    users = sorted(AFTER_ALL)
    await invoke(batch(records[:6]))
    await invoke(batch(records))
    assert await counts(stub, users) == AFTER_ALL
    assert await cached_counts(lambda_env, users) == AFTER_ALL
    await invoke(batch(records))
    await invoke(batch(records[4:]))
    assert await counts(stub, users) == AFTER_ALL


async def test_ordering_item_records_are_ignored(lambda_env: Settings, stub: pb_grpc.SocialGraphServiceStub) -> None:
    """An event holding only the T# ordering-item records of the edges counts nothing."""
    ordering = [r for r in load_event()["Records"] if r["dynamodb"]["Keys"]["sk"]["S"].startswith("T#")]
    assert len(ordering) == 6
    assert await invoke(batch(ordering)) == {"batchItemFailures": []}
    zero = dict.fromkeys(AFTER_ALL, (0, 0))
    assert await counts(stub, sorted(AFTER_ALL)) == zero


def follow_records(template: dict[str, Any], pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """INSERT records of the E# items of ``pairs``, shaped like the fixture's first record."""
    records = []
    for n, (follower, followee) in enumerate(pairs):
        record = copy.deepcopy(template)
        sk = {"S": f"E#{follower:020d}"}
        at = {"N": str(1718020000000000 + n)}
        record["eventID"] = f"{0xA000 + n:032x}"
        record["dynamodb"]["Keys"] = {"pk": {"N": str(followee)}, "sk": sk}
        record["dynamodb"]["NewImage"] = {"pk": {"N": str(followee)}, "sk": sk, "other": {"N": str(follower)}, "at": at}
        record["dynamodb"]["SequenceNumber"] = str(1405400000000003000000000 + 100 * n)
        records.append(record)
    return records


async def test_large_batch_of_distinct_users_is_counted_once_even_when_delivered_twice_at_once(
    lambda_env: Settings, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    """A 150-event batch of 300 distinct users spans many transactions and two concurrent deliveries count it once."""
    pairs = [(5_000 + i, 6_000 + i) for i in range(150)]
    event = {"Records": follow_records(load_event()["Records"][0], pairs)}
    await asyncio.gather(invoke(copy.deepcopy(event)), invoke(copy.deepcopy(event)))
    await invoke(copy.deepcopy(event))
    followers = await counts(stub, [t for _, t in pairs[:100]])
    following = await counts(stub, [f for f, _ in pairs[:100]])
    assert followers == {t: (1, 0) for _, t in pairs[:100]}
    assert following == {f: (0, 1) for f, _ in pairs[:100]}
    rest = await counts(stub, [u for pair in pairs[100:] for u in pair])
    assert rest == {u: (1, 0) if u >= 6_000 else (0, 1) for pair in pairs[100:] for u in pair}


async def test_a_container_builds_its_clients_once_and_again_only_for_a_new_configuration(
    lambda_env: Settings,
    stub: pb_grpc.SocialGraphServiceStub,
    monkeypatch: pytest.MonkeyPatch,
    logging_levels: list[str],
) -> None:
    """Invocations on one container (one thread) share the DynamoDB and Redis clients of the first;
    a changed SG_* configuration builds them anew, and its JSON logging with SG_LOG_LEVEL. Every
    invocation still counts."""
    builds: list[Settings] = []
    real_build = lambda_handler.build_lambda

    def counted_build(settings: Settings) -> lambda_handler.LambdaRuntime:
        builds.append(settings)
        return real_build(settings)

    monkeypatch.setattr(lambda_handler, "build_lambda", counted_build)
    records = load_event()["Records"]
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1) as container:
        for part in (records[:2], records[2:4], records[4:6]):
            assert await loop.run_in_executor(container, handler, batch(part), None) == {"batchItemFailures": []}
        assert len(builds) == 1
        assert logging_levels == ["warning"]
        monkeypatch.setenv("SG_CACHE_TTL_SECONDS", "3600")
        monkeypatch.setenv("SG_LOG_LEVEL", "error")
        await loop.run_in_executor(container, handler, batch(records[:6]), None)  # a replay: counts nothing
        assert [b.cache_ttl_seconds for b in builds] == [lambda_env.cache_ttl_seconds, 3600]
        assert logging_levels == ["warning", "error"]
    assert await counts(stub, sorted(AFTER_FIRST_SIX)) == AFTER_FIRST_SIX


async def test_a_bad_setting_fails_the_invocation_after_logging_it_as_json(
    lambda_env: Settings, monkeypatch: pytest.MonkeyPatch, logging_levels: list[str]
) -> None:
    """Before any client is built: the JSON logging is configured (at info, the level being the bad
    setting), the error is logged, and the invocation fails (Lambda retries the batch later)."""
    monkeypatch.setenv("SG_LOG_LEVEL", "loud")
    from structlog.testing import capture_logs

    with capture_logs() as logs, pytest.raises(SettingsError, match="SG_LOG_LEVEL must be one of"):
        await invoke(load_event())
    assert logging_levels == ["info"]
    assert [(e["event"], e["log_level"]) for e in logs] == [("bad_configuration", "error")]


async def test_each_invocation_writes_its_figures_as_one_emf_line(
    lambda_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture's first six records (three follows, each an E# and a T# record), then the same
    again (a Lambda retry): three changes applied, then three skipped as replays; no repair owed,
    no failure, every record read."""
    records = load_event()["Records"][:6]
    await invoke(batch(records))
    await invoke(batch(records))
    first, again = emf_lines(capsys.readouterr().out)
    assert first["Function"] == "counters"  # no Lambda context here: named by its component
    wanted = {"RecordsRead": 6, "RepairDebts": 0, "BatchItemFailures": 0, "InvocationFailures": 0}
    for document, applied, skipped in ((first, 3, 0), (again, 0, 3)):
        figures = {name: value for name, (value, _) in metrics_of(document).items()}
        assert figures.pop("DurationMilliseconds") > 0
        assert figures.pop("StreamLagSeconds") > 0
        assert figures == {**wanted, "ChangesApplied": applied, "ReplaysSkipped": skipped}
