"""A consumer's heartbeat: ready while running and beaten within the window; what the answer says."""

from __future__ import annotations

import time

import pytest

from graph_service.telemetry.readiness import Heartbeat


def test_the_answer_names_the_missing_evidence_and_its_age(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [500.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    heartbeat = Heartbeat("fanout Kafka consumer", stale_after=3, evidence="answer from the broker")
    assert heartbeat.problem() == "fanout Kafka consumer: not running"
    heartbeat.start()
    assert heartbeat.problem() == "fanout Kafka consumer: no answer from the broker yet"
    assert heartbeat.older_than(1)
    heartbeat.beat()
    now[0] += 1
    assert not heartbeat.older_than(1)
    now[0] += 2
    assert heartbeat.older_than(1)
    assert heartbeat.problem() is None  # 3 s old: still within the window
    now[0] += 1
    assert heartbeat.problem() == "fanout Kafka consumer: last answer from the broker 4s ago"
    heartbeat.stop()
    assert heartbeat.problem() == "fanout Kafka consumer: not running"


@pytest.mark.parametrize("bad", [0, -1])
def test_a_window_of_no_length_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="stale_after must be above 0"):
        Heartbeat("x", stale_after=bad)
