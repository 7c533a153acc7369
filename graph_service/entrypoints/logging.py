"""structlog configured for one JSON object per line, with request IDs from contextvars."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


def configure_logging(level: str = "info", *, cache_loggers: bool = True) -> None:
    """JSON lines on stderr at ``level``. ``cache_loggers=False`` (the tests) keeps every logger
    looking up the configuration at each call, so ``structlog.testing.capture_logs()`` sees them all."""
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    logging.basicConfig(level=numeric, stream=sys.stderr, format="%(message)s")
    for chatty in ("botocore", "boto3", "urllib3"):
        logging.getLogger(chatty).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=cache_loggers,
    )
