"""One Lambda invocation's EMF line: the common figures, the handler's own, written also when it fails."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from graph_service.telemetry.build_info import build_info
from graph_service.telemetry.lambda_invocations import LambdaInvocation
from tests.support.emf import metrics_of, parse_emf

NOW = 1_718_010_100.0


def record(created: float | None) -> dict[str, Any]:
    dynamodb: dict[str, Any] = {"SequenceNumber": "1"}
    if created is not None:
        dynamodb["ApproximateCreationDateTime"] = created
    return {"eventID": "e", "dynamodb": dynamodb}


def test_a_finished_invocation_writes_its_figures_once() -> None:
    lines: list[str] = []
    event = {"Records": [record(NOW - 30), record(NOW - 90), record(None)]}
    with LambdaInvocation(
        "sg-counters", "counters", event, request_id="r-1", write=lines.append, clock=lambda: NOW
    ) as inv:
        inv.count("ChangesApplied", 2)
        inv.answered({"batchItemFailures": []})
    (line,) = lines
    document = parse_emf(line)
    figures = metrics_of(document)
    assert figures.pop("DurationMilliseconds")[1] == "Milliseconds"
    assert figures == {
        "RecordsRead": (3, "Count"),
        "StreamLagSeconds": (90.0, "Seconds"),  # the oldest record's age when the invocation began
        "ChangesApplied": (2, "Count"),
        "BatchItemFailures": (0, "Count"),
        "InvocationFailures": (0, "Count"),
    }
    assert document["Function"] == "sg-counters"
    assert document["_aws"]["Timestamp"] == int(NOW * 1000)
    assert (document["Component"], document["RequestId"]) == ("counters", "r-1")
    assert (document["Version"], document["Commit"]) == (build_info().version, build_info().commit)


def test_a_failed_invocation_writes_its_line_and_still_raises() -> None:
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="Kafka"), LambdaInvocation("relay", "relay", {}, write=lines.append):
        raise RuntimeError("Kafka at b:9092: no leader")
    figures = metrics_of(parse_emf(lines[0]))
    assert figures["InvocationFailures"] == (1, "Count")
    assert figures["RecordsRead"] == (0, "Count")
    assert "StreamLagSeconds" not in figures  # no record, no lag
    assert "BatchItemFailures" not in figures  # it never answered


def test_a_line_that_cannot_be_written_never_fails_a_batch_that_committed() -> None:
    """The figures are not worth a retry of the batch: a line refused (a figure CloudWatch would
    drop) or a write that fails is logged, and the invocation answers as it would have."""

    def broken(line: str) -> None:
        raise OSError("stdout closed")

    with capture_logs() as logged, LambdaInvocation("sg-counters", "counters", {}, write=broken) as inv:
        inv.count("ChangesApplied", 1)
    with capture_logs() as refused, LambdaInvocation("sg-counters", "counters", {}, write=print) as inv:
        inv.count("NotANumber", float("nan"))
    assert [entry["event"] for entry in logged + refused] == ["emf_line_failed", "emf_line_failed"]
