"""Log lines written inside a span carry its ``trace_id`` and ``span_id`` (structlog's and the
standard library's alike, on the event loop's thread and on a pool thread given the context), and
only when tracing is on. Run in a child process: logging and the tracer provider are process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from graph_service.entrypoints.exits import Exit, classify
from graph_service.telemetry.tracing import TracingConfigError

SCRIPT = textwrap.dedent(
    """
    import contextvars, functools, json, logging, os, threading
    import structlog
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from graph_service.entrypoints.logging import configure_logging

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("test")
    log = structlog.get_logger("graph_service.sample")
    for phase, environ in (("off", {}), ("on", {"OTEL_TRACES_EXPORTER": "console"})):
        os.environ.update(environ)
        configure_logging("info", cache_loggers=False)  # tracing on or off as the environment says
        log.info("before", phase=phase)
        with tracer.start_as_current_span("outer_" + phase):
            log.info("ours_in_outer", phase=phase)
            with tracer.start_as_current_span("inner_" + phase):
                logging.getLogger("botocore.hooks").warning("theirs_in_inner", extra={"phase": phase})
                line = functools.partial(log.info, "ours_on_a_thread", phase=phase)
                thread = threading.Thread(target=contextvars.copy_context().run, args=(line,))
                thread.start()
                thread.join()
        log.info("after", phase=phase)
    spans = {span.name: [format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")]
             for span in exporter.get_finished_spans()}
    print(json.dumps(spans))
    """
)


def test_each_line_in_a_span_carries_its_ids_only_when_tracing_is_on() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    spans: dict[str, list[str]] = json.loads(done.stdout)
    lines: list[dict[str, Any]] = [json.loads(line) for line in done.stderr.splitlines()]
    ids = {(line["phase"], line["event"]): [line.get("trace_id"), line.get("span_id")] for line in lines}
    none = [None, None]
    assert ids == {
        ("off", "before"): none,
        ("off", "ours_in_outer"): none,  # off: not even inside a span
        ("off", "theirs_in_inner"): none,
        ("off", "ours_on_a_thread"): none,
        ("off", "after"): none,
        ("on", "before"): none,
        ("on", "ours_in_outer"): spans["outer_on"],
        ("on", "theirs_in_inner"): spans["inner_on"],  # a library's stdlib line, through the shared processors
        ("on", "ours_on_a_thread"): spans["inner_on"],
        ("on", "after"): none,
    }
    assert all(len(trace_id) == 32 and trace_id == trace_id.lower() for trace_id, _ in spans.values())


def test_an_exporter_the_service_cannot_use_is_a_configuration_error() -> None:
    found = classify(TracingConfigError("OTEL_TRACES_EXPORTER: zipkin is not one of otlp, console"))
    assert found is not None
    assert found[0] is Exit.CONFIGURATION
    assert "zipkin" in found[1]
