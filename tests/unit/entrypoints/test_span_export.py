"""The spans a consumer or a Lambda invocation still holds, exported at its end
(``graph_service.entrypoints.span_export``), and a collector that does not answer holding it no
longer than the bound."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graph_service.entrypoints.span_export import export_spans, flush_spans
from graph_service.telemetry import tracing
from tests.support.logs import capture_every_level


class Hung(SpanExporter):
    """A collector that never answers (until the test lets it go)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        return SpanExportResult.FAILURE


@pytest.fixture
def hung() -> Iterator[Hung]:
    exporter = Hung()
    yield exporter
    exporter.release.set()


def batched(exporter: SpanExporter) -> TracerProvider:
    """A provider as ``configure_tracing`` makes it (a minute between batches), not made global."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    return provider


def test_an_invocations_spans_are_exported_before_it_returns_and_tracing_goes_on() -> None:
    exporter = InMemorySpanExporter()
    provider = batched(exporter)
    provider.get_tracer("test").start_span("first invocation").end()
    assert flush_spans(1.0, provider) is True
    provider.get_tracer("test").start_span("second invocation").end()
    assert flush_spans(1.0, provider) is True
    assert [span.name for span in exporter.get_finished_spans()] == ["first invocation", "second invocation"]


def test_a_collector_that_does_not_answer_holds_an_invocation_no_longer_than_the_bound(hung: Hung) -> None:
    provider = batched(hung)
    provider.get_tracer("test").start_span("invocation").end()
    with capture_every_level() as logs:
        assert flush_spans(0.1, provider) is False
    assert [line["event"] for line in logs] == ["spans_not_exported"]


def test_with_tracing_off_there_is_nothing_to_flush() -> None:
    assert not tracing.enabled()
    assert flush_spans() is True


async def test_a_consumers_last_step_exports_what_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = batched(exporter)
    monkeypatch.setitem(tracing._state, "provider", provider)  # the process's provider, for this test
    provider.get_tracer("test").start_span("batch").end()
    await export_spans()
    assert [span.name for span in exporter.get_finished_spans()] == ["batch"]
