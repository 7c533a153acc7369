"""Log capture at every level: the tests run at ``warning``, but some behaviour is an info line."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

import structlog
from structlog.testing import capture_logs

__all__ = ["capture_every_level"]


@contextlib.contextmanager
def capture_every_level() -> Iterator[list[MutableMapping[str, Any]]]:
    """``capture_logs()`` with debug and info lines too, and what is bound in contextvars (the
    request ID, the caller), as the JSON lines have it; for the block only."""
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=previous)
