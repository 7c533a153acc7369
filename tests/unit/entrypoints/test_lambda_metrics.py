"""The Lambda handlers, invoked in-process, write one CloudWatch Embedded Metric Format line per
invocation on stdout: the figures of the work their runtime answered, and a failure when it raised
(a bad configuration included). The runtimes are stand-ins; the real ones are run in
tests/integration/counters/test_lambda_handler.py and tests/integration/relay/test_relay_lambda.py."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from graph_service.entrypoints import lambda_handler, relay_lambda
from graph_service.entrypoints.relay_lambda import RelayLambdaRuntime, relay_batches
from graph_service.settings import Settings, SettingsError
from tests.support.emf import emf_lines, metrics_of

EVENT_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "followers_stream_event.json"


def load_event() -> dict[str, Any]:
    event: dict[str, Any] = json.loads(EVENT_PATH.read_text())
    return event


@dataclass
class LambdaContext:
    """What the Lambda runtime hands a handler, as far as the handlers read it."""

    function_name: str = "sg-prod-counters"
    aws_request_id: str = "5f1d1c1e-0000-4000-8000-000000000001"


class Answering:
    """A runtime whose invocation answers ``figures`` (or raises ``error``)."""

    def __init__(self, figures: dict[str, int], error: Exception | None = None) -> None:
        self.figures = figures
        self.error = error

    def invoke(self, event: dict[str, Any]) -> dict[str, int]:
        if self.error is not None:
            raise self.error
        return self.figures


def with_runtime(monkeypatch: pytest.MonkeyPatch, module: ModuleType, runtime: Answering) -> None:
    monkeypatch.setattr(module._container, "current", lambda *args: runtime)


def the_line(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    (document,) = emf_lines(capsys.readouterr().out)
    return document


@pytest.mark.parametrize(
    ("module", "figures", "wanted"),
    [
        (
            lambda_handler,
            {"applied": 5, "skipped": 1, "repair_debts": 2},
            {"ChangesApplied": 5, "ReplaysSkipped": 1, "RepairDebts": 2},
        ),
        (relay_lambda, {"records": 12, "produced": 6, "skipped": 1}, {"EventsProduced": 6, "RecordsSkipped": 1}),
    ],
)
def test_an_invocation_writes_its_figures_under_the_function_s_name(
    module: ModuleType,
    figures: dict[str, int],
    wanted: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with_runtime(monkeypatch, module, Answering(figures))
    event = load_event()
    assert module.handler(event, LambdaContext()) == {"batchItemFailures": []}
    document = the_line(capsys)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Socialgraph"
    assert document["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Function"]]
    assert document["Function"] == "sg-prod-counters"
    assert document["RequestId"] == LambdaContext.aws_request_id
    assert document["Component"] == ("counters" if module is lambda_handler else "relay")
    values = {name: value for name, (value, _) in metrics_of(document).items()}
    assert values.pop("DurationMilliseconds") >= 0
    assert values.pop("StreamLagSeconds") > 0  # the fixture's records are from 2024
    assert values == {
        "RecordsRead": len(event["Records"]),
        **wanted,
        "BatchItemFailures": 0,
        "InvocationFailures": 0,
    }


@pytest.mark.parametrize("module", [lambda_handler, relay_lambda])
def test_a_failed_invocation_is_counted_and_still_raises(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with_runtime(monkeypatch, module, Answering({}, error=RuntimeError("Kafka at b:9092: no leader")))
    with pytest.raises(RuntimeError, match="no leader"):
        module.handler(load_event(), LambdaContext())
    figures = metrics_of(the_line(capsys))
    assert figures["InvocationFailures"] == (1, "Count")
    assert "BatchItemFailures" not in figures


def test_a_bad_configuration_is_a_failed_invocation_of_the_function_named_by_lambda(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No context object (a local run): the name comes from AWS_LAMBDA_FUNCTION_NAME, as Lambda sets it."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "sg-staging-relay")

    def refuse(*args: Any) -> Any:
        raise SettingsError("SG_TOPIC_PARTITIONS must be a whole number")

    monkeypatch.setattr(relay_lambda._container, "current", refuse)
    with pytest.raises(SettingsError):
        relay_lambda.handler({"Records": []}, None)
    document = the_line(capsys)
    assert document["Function"] == "sg-staging-relay"
    assert metrics_of(document)["InvocationFailures"] == (1, "Count")


def test_without_lambda_s_names_the_function_is_named_by_its_component(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    with_runtime(monkeypatch, lambda_handler, Answering({}))
    lambda_handler.handler({"Records": []}, None)
    assert the_line(capsys)["Function"] == "counters"


class Acknowledging:
    """A producer whose every send is acknowledged at once."""

    async def send(self, topic: str, **record: Any) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def test_the_relay_runtime_counts_the_records_it_could_not_convert_per_invocation() -> None:
    settings = Settings(table_prefix="p_")
    producer: Any = Acknowledging()
    loop = asyncio.new_event_loop()
    runtime = RelayLambdaRuntime(settings, loop, producer, relay_batches(producer, settings))
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/p_tweets/stream/2024-06-10T09:12:41.137"
    good = {"tweet_id": {"N": "15"}, "author_id": {"N": "5"}, "text": {"S": "hi"}}
    broken = {"tweet_id": {"N": "14"}, "text": {"S": "no author"}}
    records = [
        {
            "eventID": f"t{n}",
            "eventName": "INSERT",
            "eventSourceARN": arn,
            "dynamodb": {"NewImage": image, "SequenceNumber": n},
        }
        for n, image in (("1", broken), ("2", good))
    ]
    try:
        assert runtime.invoke({"Records": records}) == {"records": 2, "produced": 1, "skipped": 1}
        assert runtime.invoke({"Records": records[1:]}) == {"records": 1, "produced": 1, "skipped": 0}
    finally:
        loop.close()
