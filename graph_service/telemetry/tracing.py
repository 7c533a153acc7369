"""OpenTelemetry tracing of every process (SPEC §7.4), configured only by the standard ``OTEL_*`` variables.

Tracing is **off** unless an exporter is named: ``OTEL_TRACES_EXPORTER`` set to ``otlp`` or
``console``, or an OTLP endpoint given (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, which imply ``otlp``). ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn it off whatever else is set. Off costs nothing: no provider is
installed, and the code that would make spans (the server's tracing interceptor, the DynamoDB and
Redis hooks, the Kafka headers) is not installed either, because each asks ``enabled()`` once, when
it is built.

On, the SDK reads the rest of the standard variables itself: ``OTEL_SERVICE_NAME`` (default
``socialgraph-<process>``), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and its argument
(default: parent-based, always on), ``OTEL_BSP_*`` (the batch processor), ``OTEL_EXPORTER_OTLP_*``
(endpoint, headers, certificate, timeout, compression) and ``OTEL_PROPAGATORS`` (default W3C trace
context and baggage). The OTLP exporter speaks gRPC (``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``, the
default); another protocol is refused at start rather than silently exporting nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK's tracing is imported only when tracing is on (about 0.1 s of a start otherwise)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span

__all__ = [
    "TracingConfigError",
    "configure_tracing",
    "current_span",
    "enabled",
    "exporter_names",
    "shutdown_tracing",
    "tracer",
]

_EXPORTERS = ("otlp", "console")
_state: dict[str, TracerProvider] = {}
"""The provider this process installed (``"provider"``), if tracing is on."""


class TracingConfigError(ValueError):
    """An ``OTEL_*`` variable names something this service cannot do."""


def exporter_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The trace exporters ``environ`` asks for; () when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not named:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ("otlp",) if endpoint else ()
    names = tuple(dict.fromkeys(part.strip() for part in named.split(",") if part.strip()))
    if "none" in names:
        return ()
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown:
        raise TracingConfigError(f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not one of {', '.join(_EXPORTERS)}")
    return names


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if name == "console":
        return ConsoleSpanExporter()
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    if protocol.strip().lower() != "grpc":
        raise TracingConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only grpc is supported")
    # Imported only when on: the exporter pulls in its own gRPC stubs.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def configure_tracing(process: str, environ: Mapping[str, str] | None = None) -> bool:
    """Install a tracer provider for this process if ``environ`` (default ``os.environ``) names an
    exporter; returns whether ``environ`` turns tracing on. ``process``: ``serve``, ``counters``, ``relay``,
    ``fanout``, ... (the default service name is ``socialgraph-<process>``). Idempotent: a second
    call keeps the first provider (OpenTelemetry allows one per process)."""
    env = os.environ if environ is None else environ
    names = exporter_names(env)
    if not names:
        return False
    if "provider" in _state:
        return True
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    processors: list[SpanProcessor] = [BatchSpanProcessor(_exporter(name, env)) for name in names]
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: f"socialgraph-{process}"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    _state["provider"] = provider
    return True


def enabled() -> bool:
    """Whether this process installed a tracer provider (``configure_tracing``)."""
    return "provider" in _state


def tracer(name: str) -> trace.Tracer:
    """The tracer of module ``name`` (its instrumentation scope)."""
    from opentelemetry import trace

    return trace.get_tracer(name)


@contextlib.contextmanager
def current_span(
    tracer: trace.Tracer, name: str, *, expected: tuple[type[Exception], ...] = (), **options: Any
) -> Iterator[Span]:
    """``tracer.start_as_current_span(name, **options)``, whose error status is for failures only:
    an exception of ``expected`` (an outcome its caller handles: a job superseded by a later call, a
    shard another consumer took over) sets ``error.type`` and leaves the status unset, as a refused
    call's span does; any other is recorded and sets the error status."""
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False, **options) as span:
        try:
            yield span
        except expected as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            raise
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


def shutdown_tracing(timeout_seconds: float = 5.0) -> bool:
    """Export the spans still buffered, then stop (a process's last step; no-op when off). Waits at
    most ``timeout_seconds``: a collector that does not answer must not hold a stop past its grace
    (the SDK's own flush ignores its timeout, and its exporter retries for up to
    ``OTEL_EXPORTER_OTLP_TIMEOUT``). False when the wait ran out (what was still buffered is lost)."""
    provider = _state.pop("provider", None)  # off from now on: nothing made later is exported
    if provider is None:
        return True
    # The provider's shutdown stops taking spans at once, so the SDK's own shutdown at exit returns
    # at once too; its batch worker exports the rest on its daemon thread, which exit does not wait for.
    stopping = threading.Thread(target=provider.shutdown, name="tracing-shutdown", daemon=True)
    stopping.start()
    stopping.join(timeout_seconds)
    return not stopping.is_alive()
