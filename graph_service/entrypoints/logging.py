"""One JSON object per line on stderr, for our lines and everybody else's.

structlog's loggers and the standard library's (aiokafka, botocore, grpc, asyncio, warnings) end
in the same handler, whose ``ProcessorFormatter`` renders every record with the same processors:
time, level, logger name, whatever is bound in contextvars (request ID, caller), and the traceback
as a string field. Uncaught exceptions (main thread, other threads) are logged the same way, so a
crash is one JSON line too. Only gRPC C-core's own messages (``GRPC_VERBOSITY``, errors only by
default) bypass Python and stay plain text.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import Any

import structlog
from structlog.typing import Processor

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


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def json_handler(stream: Any = None) -> logging.Handler:
    """A stdlib handler that writes each record as one JSON line (``stream``: stderr by default)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(),
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


def configure_logging(level: str = "info", *, cache_loggers: bool = True) -> None:
    """JSON lines on stderr at ``level`` (validated by the settings). ``cache_loggers=False`` (the
    tests) keeps every logger looking up the configuration at each call, so
    ``structlog.testing.capture_logs()`` sees them all."""
    numeric = logging.getLevelNamesMapping().get(level.strip().upper(), logging.INFO)
    root = logging.getLogger()
    for old in list(root.handlers):  # basicConfig's, or the Lambda runtime's plain-text one
        root.removeHandler(old)
    handler = json_handler()
    handler.addFilter(LibraryRepeats())
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    for ours in OURS:
        logging.getLogger(ours).setLevel(numeric)
    logging.captureWarnings(True)
    structlog.configure(
        processors=[*_shared_processors(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=cache_loggers,
    )
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
