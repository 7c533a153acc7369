"""Rate-limited failure lines: one per kind per interval, with the count since the last line."""

from __future__ import annotations

from typing import Any

from graph_service.telemetry.failures import FailureLog


class Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))


def test_one_line_per_kind_per_interval_with_a_count() -> None:
    now = [100.0]
    lines = Lines()
    failures = FailureLog(lines, interval=10.0, clock=lambda: now[0])
    assert failures.failure("commit_failed", "UnknownTopicOrPartition", partition=3)  # the first at once
    for _ in range(199):  # 20 a second for 10 s: no line
        now[0] += 0.05
        assert not failures.failure("commit_failed", "UnknownTopicOrPartition", partition=3)
    assert failures.failure("commit_failed", "Timeout")  # another kind is not held back
    now[0] += 0.1
    assert failures.failure("commit_failed", "UnknownTopicOrPartition", partition=3)
    assert [(e, f["kind"], f["count"], f["total"]) for _, e, f in lines.lines] == [
        ("commit_failed", "UnknownTopicOrPartition", 1, 1),
        ("commit_failed", "Timeout", 1, 1),
        ("commit_failed", "UnknownTopicOrPartition", 200, 201),
    ]
    assert lines.lines[0][2]["partition"] == 3


def test_recovery_is_one_line_and_starts_the_kind_afresh() -> None:
    now = [0.0]
    lines = Lines()
    failures = FailureLog(lines, interval=10.0, clock=lambda: now[0])
    failures.failure("fetch_failed", "Broker")
    failures.failure("fetch_failed", "Broker")
    failures.recovered("fetch_recovered", "Broker")
    failures.recovered("fetch_recovered", "Broker")  # nothing pending: no second line
    assert lines.lines[-1] == ("info", "fetch_recovered", {"kind": "Broker", "count": 1, "total": 2})
    assert len(lines.lines) == 2
    assert failures.failure("fetch_failed", "Broker")  # a new outage is reported at once
