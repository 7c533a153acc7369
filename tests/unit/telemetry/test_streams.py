"""A stream consumer's lag and checkpoint age per shard, and what its readiness says."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from graph_service.telemetry.streams import StreamMetrics, record_created_at


def record(created: float) -> dict[str, Any]:
    return {"dynamodb": {"ApproximateCreationDateTime": datetime.fromtimestamp(created, UTC)}}


def test_the_creation_time_is_read_as_boto3_parses_it_or_as_a_number() -> None:
    assert record_created_at(record(1_700_000_000)) == 1_700_000_000
    assert record_created_at({"dynamodb": {"ApproximateCreationDateTime": 1_700_000_000.5}}) == 1_700_000_000.5
    assert record_created_at({"dynamodb": {}}) is None


def test_lag_is_the_age_of_the_batch_in_hand_and_zero_once_a_read_finds_nothing() -> None:
    registry = CollectorRegistry()
    metrics = StreamMetrics(registry)
    consumer = metrics.consumer("counters")
    consumer.shard_started("shard-1")
    lag = {"consumer": "counters", "shard": "shard-1"}
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) == 0
    now = time.time()
    consumer.read("shard-1", [record(now - 30), record(now - 10)])
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) == pytest.approx(30, abs=1)
    consumer.handled("shard-1", [record(now - 30), record(now - 10)])
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) == pytest.approx(10, abs=1)
    assert registry.get_sample_value("socialgraph_stream_checkpoint_age_seconds", lag) == pytest.approx(0, abs=1)
    consumer.read("shard-1", [])
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) == 0
    assert registry.get_sample_value("socialgraph_stream_records_read_total", {"consumer": "counters"}) == 2
    consumer.shard_finished("shard-1")
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) is None


def test_ready_only_while_every_reader_runs_and_has_read() -> None:
    metrics = StreamMetrics(CollectorRegistry())
    assert metrics.problem() == "no stream reader started yet"
    tweets, followers = metrics.consumer("relay:tweets"), metrics.consumer("relay:followers")
    tweets.heartbeat.start()
    followers.heartbeat.start()
    tweets.listed()
    assert metrics.problem() == "stream consumer relay:followers: no successful read yet"
    followers.read("shard-1", [])
    assert metrics.problem() is None
    tweets.heartbeat.stop()
    assert metrics.problem() == "stream consumer relay:tweets: not running"


def test_a_reader_not_heard_from_for_too_long_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = StreamMetrics(CollectorRegistry(), stale_after=30).consumer("counters")
    consumer.heartbeat.start()
    consumer.listed()
    later = time.monotonic() + 31
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert consumer.heartbeat.problem() == "stream consumer counters: last successful read 31s ago"
