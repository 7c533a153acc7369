"""Background work that outlives the call that started it."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["detached"]

T = TypeVar("T")


def detached(work: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """``work`` as a task in an empty context, not a copy of the caller's: a retry loop started by
    one request (owed cache invalidations, owed counter repairs) runs long after that request
    ended, and must not carry its trace, span or request ID into every line and span it makes."""
    return asyncio.create_task(work, name=name, context=contextvars.Context())
