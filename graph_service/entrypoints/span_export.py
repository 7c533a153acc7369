"""The spans a process still holds, exported within a bound: at a stop (``export_spans``, the last
step of the consumers' ``aclose``) and at the end of every Lambda invocation (``flush_spans``: Lambda
freezes a container between invocations, and the batch span processor's export thread with it, so
spans left buffered would wait for the next invocation, or be lost with the container).

A collector that does not answer holds neither longer than ``EXPORT_SECONDS`` (the SDK's own flush
ignores its timeout; its exporter retries for up to ``OTEL_EXPORTER_OTLP_TIMEOUT``): the spans it
did not take are lost, which ``spans_not_exported`` says. Nothing happens with tracing off.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import structlog

from graph_service.telemetry.tracing import enabled, shutdown_tracing

__all__ = ["EXPORT_SECONDS", "export_spans", "flush_spans"]

log = structlog.get_logger(__name__)
EXPORT_SECONDS = 1.0


async def export_spans(seconds: float = EXPORT_SECONDS) -> None:
    """Export what is buffered and stop tracing, on a thread (the loop, and a stop's overdue timer,
    go on meanwhile)."""
    if enabled() and not await asyncio.to_thread(shutdown_tracing, seconds):
        log.warning("spans_not_exported", why=f"the collector did not take them within {seconds} s")


def flush_spans(seconds: float = EXPORT_SECONDS, provider: Any = None) -> bool:
    """Export the spans ended so far, waiting at most ``seconds``; False if the wait ran out.
    ``provider``: the process's tracer provider (None: the one ``configure_tracing`` installed)."""
    if provider is None:
        if not enabled():
            return True
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is None:
        return True
    flushing = threading.Thread(target=flush, name="tracing-flush", daemon=True)
    flushing.start()
    flushing.join(seconds)
    if flushing.is_alive():
        log.warning("spans_not_exported", why=f"the collector did not take them within {seconds} s")
        return False
    return True
