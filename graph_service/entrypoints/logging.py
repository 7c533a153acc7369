"""One JSON object per line on stderr, for our lines and everybody else's.

structlog's loggers and the standard library's (aiokafka, botocore, grpc, asyncio, warnings) end
in the same handler, whose ``ProcessorFormatter`` renders every record with the same processors:
time, level, logger name, whatever is bound in contextvars (request ID, caller), the trace and span
IDs of the span the line is written in (when tracing is on), and the traceback as a string field.
Uncaught exceptions (main thread, other threads) are logged the same way, so a crash is one JSON
line too. Only gRPC C-core's own messages (``GRPC_VERBOSITY``, errors only by default) bypass
Python and stay plain text.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from types import TracebackType
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["LibraryRepeats", "configure_logging", "json_handler"]

OURS = ("graph_service", "counters", "relay", "fanout", "socialgraph_devstack", "socialgraph_client", "bench")
"""Loggers at SG_LOG_LEVEL; every other logger (botocore, aiokafka, redis, asyncio, grpc, ...) stays at
warning or above whatever the level: at info or debug they log every request, connection or rebalance
step, which drowns the service's own lines."""


class LibraryRepeats(logging.Filter):
    """At most one line per ``interval`` seconds for each message of a library's logger (by logger
    and message template), the line that passes carrying ``repeated``: how many were held back since.
    A library that retries in a loop (aiokafka waiting for a topic's metadata logs an error every
    100 ms) cannot flood the log. Our own loggers (``OURS``, which rate-limit where they retry) and
    uncaught exceptions always pass."""

    def __init__(self, interval: float = 10.0) -> None:
        super().__init__()
        self._interval = interval
        self._seen: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".", 1)[0] in OURS or record.name == "uncaught" or record.levelno >= logging.CRITICAL:
            return True
        key = (record.name, record.msg)
        last, held = self._seen.get(key, (float("-inf"), 0))
        if record.created - last < self._interval:
            self._seen[key] = (last, held + 1)
            return False
        if held:
            record.repeated = held
        if len(self._seen) > 10_000:  # a library that puts values in its templates: forget, not grow
            self._seen.clear()
        self._seen[key] = (record.created, 0)
        return True


def _trace_ids() -> Processor:
    """``trace_id`` and ``span_id`` of the span current where the line is written (lower-case hex,
    32 and 16 digits, as OpenTelemetry writes them); nothing outside a span. Only in the chain
    when tracing is on: a process without it pays nothing for it per line."""
    from opentelemetry.trace import get_current_span

    def add_trace_ids(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        context = get_current_span().get_span_context()
        if context.is_valid:
            event["trace_id"] = format(context.trace_id, "032x")
            event["span_id"] = format(context.span_id, "016x")
        return event

    return add_trace_ids


def _tracing_on() -> bool:
    """Whether the environment turns tracing on (``telemetry/tracing.py``'s rule); a variable it
    refuses is reported when the process configures tracing, not here."""
    if not any(name.startswith("OTEL_") for name in os.environ):
        return False  # the common case, without importing the telemetry package (a command's start)
    from graph_service.telemetry.tracing import TracingConfigError, exporter_names

    try:
        return bool(exporter_names(os.environ))
    except TracingConfigError:
        return False


def _shared_processors(trace_ids: bool = False) -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        *((_trace_ids(),) if trace_ids else ()),
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def json_handler(stream: Any = None, *, trace_ids: bool = False) -> logging.Handler:
    """A stdlib handler that writes each record as one JSON line (``stream``: stderr by default),
    with the current span's IDs if ``trace_ids``."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(trace_ids),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    return handler


def _log_uncaught(kind: type[BaseException], value: BaseException, trace: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, trace)
        return
    logging.getLogger("uncaught").critical("uncaught_exception", exc_info=(kind, value, trace))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    logging.getLogger("uncaught").critical(
        "uncaught_exception",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        extra={"thread_name": getattr(args.thread, "name", None)},
    )


def configure_logging(level: str = "info", *, cache_loggers: bool = True, trace_ids: bool | None = None) -> None:
    """JSON lines on stderr at ``level`` (validated by the settings). ``cache_loggers=False`` (the
    tests) keeps every logger looking up the configuration at each call, so
    ``structlog.testing.capture_logs()`` sees them all. ``trace_ids``: each line written inside a
    span carries its ``trace_id`` and ``span_id``; by default, when the ``OTEL_*`` variables turn
    tracing on (``telemetry/tracing.py``)."""
    traced = _tracing_on() if trace_ids is None else trace_ids
    numeric = logging.getLevelNamesMapping().get(level.strip().upper(), logging.INFO)
    root = logging.getLogger()
    for old in list(root.handlers):  # basicConfig's, or the Lambda runtime's plain-text one
        root.removeHandler(old)
    handler = json_handler(trace_ids=traced)
    handler.addFilter(LibraryRepeats())
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    for ours in OURS:
        logging.getLogger(ours).setLevel(numeric)
    logging.captureWarnings(True)
    structlog.configure(
        processors=[*_shared_processors(traced), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=cache_loggers,
    )
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
