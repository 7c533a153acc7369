"""A process's last step with tracing on (``shutdown_tracing``): the buffered spans are exported,
and a collector that does not answer holds the stop no longer than the time given."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graph_service.telemetry import tracing


class Hung(SpanExporter):
    """A collector that never answers (until the test lets it go)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        return SpanExportResult.FAILURE


def installed(exporter: SpanExporter, monkeypatch: pytest.MonkeyPatch) -> TracerProvider:
    """A provider as ``configure_tracing`` leaves it (batched, a minute between batches), not made global."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    monkeypatch.setitem(tracing._state, "provider", provider)  # the process's provider, for this test
    return provider


def test_the_buffered_spans_are_exported_at_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = installed(exporter, monkeypatch)
    provider.get_tracer("test").start_span("rpc").end()
    assert exporter.get_finished_spans() == ()
    assert tracing.shutdown_tracing(5.0) is True
    assert [span.name for span in exporter.get_finished_spans()] == ["rpc"]
    assert not tracing.enabled()  # nothing built after the stop takes a tracer


@pytest.fixture
def hung() -> Iterator[Hung]:
    exporter = Hung()
    yield exporter
    exporter.release.set()


def test_a_collector_that_does_not_answer_holds_the_stop_only_as_long_as_given(
    monkeypatch: pytest.MonkeyPatch, hung: Hung
) -> None:
    provider = installed(hung, monkeypatch)
    provider.get_tracer("test").start_span("rpc").end()
    assert tracing.shutdown_tracing(0.3) is False
    assert not hung.release.is_set()  # returned while the export still hangs
    provider.get_tracer("test").start_span("late").end()  # after the stop: dropped, not queued


def test_with_tracing_off_the_stop_has_nothing_to_do() -> None:
    assert not tracing.enabled()
    assert tracing.shutdown_tracing(0.0) is True
