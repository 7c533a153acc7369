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


def test_ready_only_while_every_reader_runs_and_has_progressed() -> None:
    metrics = StreamMetrics(CollectorRegistry())
    assert metrics.problem() == "no stream reader started yet"
    tweets, followers = metrics.consumer("relay:tweets"), metrics.consumer("relay:followers")
    tweets.heartbeat.start()
    followers.heartbeat.start()
    tweets.listed(reading=False)  # no shard to read: the listing is the sign of life
    assert metrics.problem() == "stream consumer relay:followers: no progress yet"
    followers.shard_started("shard-1")
    followers.read("shard-1", [record(time.time())])  # records read, not handled yet: no progress
    assert metrics.problem() == "stream consumer relay:followers: no progress yet"
    followers.listed(reading=True)  # shards are being read: the listing is no evidence
    assert metrics.problem() == "stream consumer relay:followers: no progress yet"
    followers.handled("shard-1", [record(time.time())])
    assert metrics.problem() is None
    tweets.heartbeat.stop()
    assert metrics.problem() == "stream consumer relay:tweets: not running"


def test_a_reader_without_progress_for_too_long_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = StreamMetrics(CollectorRegistry(), stale_after=30).consumer("counters")
    consumer.heartbeat.start()
    consumer.listed(reading=False)
    later = time.monotonic() + 31
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert consumer.problem() == "stream consumer counters: last progress 31s ago"


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(time, "monotonic", lambda: self.now)


def test_reads_whose_batches_keep_failing_are_not_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay with Kafka down: each restarted shard task reads the same batch and its handler
    fails. Reads and restarts alone never make the consumer ready again."""
    clock = Clock(monkeypatch)
    consumer = StreamMetrics(CollectorRegistry(), stale_after=1).consumer("relay:tweets")
    consumer.heartbeat.start()
    consumer.shard_started("shard-1")
    consumer.read("shard-1", [])  # caught up: progress
    assert consumer.problem() is None
    for _ in range(5):  # a record arrives; the handler fails; the task restarts and reads it again
        clock.now += 0.5
        consumer.listed(reading=True)
        consumer.shard_started("shard-1")
        consumer.read("shard-1", [record(time.time())])
    assert consumer.problem() == "stream consumer relay:tweets: last progress 2s ago"
    consumer.handled("shard-1", [record(time.time())])  # Kafka is back: the batch goes through
    assert consumer.problem() is None


def test_one_stuck_shard_is_enough_to_be_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    consumer = StreamMetrics(CollectorRegistry(), stale_after=10).consumer("counters")
    consumer.heartbeat.start()
    consumer.shard_started("shard-a")
    consumer.shard_started("shard-b")
    for _ in range(4):
        clock.now += 5
        consumer.read("shard-a", [])  # caught up, again and again
        consumer.read("shard-b", [record(time.time())])  # its batch keeps failing
    assert consumer.problem() == "stream consumer counters: shard shard-b made no progress for 20s"
    consumer.shard_finished("shard-b")
    assert consumer.problem() is None


def test_a_restarted_shard_keeps_its_lag_and_checkpoint_age(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing shard task restarts at each refresh: its lag must not dip to 0 each time, nor its
    checkpoint age start again; a read that finds nothing new sets the lag to 0."""
    clock = Clock(monkeypatch)
    registry = CollectorRegistry()
    consumer = StreamMetrics(registry).consumer("counters")
    labels = {"consumer": "counters", "shard": "shard-1"}
    consumer.shard_started("shard-1")
    consumer.read("shard-1", [record(time.time() - 40)])
    clock.now += 7
    consumer.shard_started("shard-1")  # the handler failed; the task starts again
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", labels) == pytest.approx(40, abs=1)
    assert registry.get_sample_value("socialgraph_stream_checkpoint_age_seconds", labels) == 7
    consumer.read("shard-1", [])
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", labels) == 0


def test_leases_held_takeovers_and_lost_leases_are_counted_per_consumer() -> None:
    """A lost lease also drops the shard's lag series here: the new owner reports them."""
    registry = CollectorRegistry()
    consumer = StreamMetrics(registry).consumer("counters")
    by_consumer = {"consumer": "counters"}
    assert registry.get_sample_value("socialgraph_stream_leases_held", by_consumer) == 0
    consumer.lease_taken("shard-1", takeover=False)
    consumer.lease_taken("shard-2", takeover=True)  # from an owner whose lease had expired
    consumer.shard_started("shard-2")
    assert registry.get_sample_value("socialgraph_stream_leases_held", by_consumer) == 2
    assert registry.get_sample_value("socialgraph_stream_lease_takeovers_total", by_consumer) == 1
    consumer.lease_given_up("shard-1", lost=False)  # released: a clean stop, a finished shard
    consumer.lease_given_up("shard-2", lost=True)
    assert registry.get_sample_value("socialgraph_stream_leases_held", by_consumer) == 0
    assert registry.get_sample_value("socialgraph_stream_leases_lost_total", by_consumer) == 1
    lag = {"consumer": "counters", "shard": "shard-2"}
    assert registry.get_sample_value("socialgraph_stream_lag_seconds", lag) is None
