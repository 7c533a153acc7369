"""What every long-running process is to its entry point: built once, run until a stop, closed once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

import structlog

from graph_service.settings import Settings
from graph_service.telemetry.build_info import build_info

__all__ = ["OVERDUE_EXIT", "OVERDUE_MARGIN_SECONDS", "Reloadable", "Runtime", "run_until_signal"]

log = structlog.get_logger(__name__)
OVERDUE_MARGIN_SECONDS = 2.0
"""After SG_SHUTDOWN_GRACE_SECONDS (the server drains its calls that long), this long to close clients."""
OVERDUE_EXIT = 1


class Runtime(Protocol):
    async def run(self, stop: asyncio.Event) -> None:
        """Do the process's work until ``stop`` is set (or a failure ends it)."""
        ...

    async def aclose(self) -> None:
        """Release every client and thread the builder made; safe after a failed ``run``."""
        ...


@runtime_checkable
class Reloadable(Protocol):
    def reload(self) -> None:
        """Re-read what may change without a restart (SIGHUP)."""
        ...


R = TypeVar("R", bound=Runtime)


def run_until_signal(
    build: Callable[[Settings], Awaitable[R]],
    settings: Settings,
    *,
    force_exit: Callable[[int], object] = os._exit,
) -> None:
    """Build the runtime, run it until SIGTERM or SIGINT, then close it; SIGHUP reloads a runtime
    that can (the server's callers file) and is ignored by the others (the consumers).

    A stop never waits for ever, whatever state the process is in (a retry loop, a client that hangs
    on a dead broker): a process still running SG_SHUTDOWN_GRACE_SECONDS plus ``OVERDUE_MARGIN_SECONDS``
    after the signal logs ``shutdown_overdue`` and exits with ``OVERDUE_EXIT``; so does a second
    signal (Ctrl-C twice)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def overdue(why: str) -> None:
            log.error("shutdown_overdue", why=why, grace_seconds=settings.shutdown_grace_seconds)
            sys.stdout.flush()
            sys.stderr.flush()
            force_exit(OVERDUE_EXIT)

        def request_stop() -> None:
            if stop.is_set():
                overdue("a second stop signal")
                return
            stop.set()
            deadline = settings.shutdown_grace_seconds + OVERDUE_MARGIN_SECONDS
            loop.call_later(deadline, overdue, "still running after the grace period")

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, request_stop)
        built: list[Reloadable] = []

        def reload() -> None:
            for reloadable in built:
                reloadable.reload()

        # Installed before the build: a SIGHUP during a slow start must not end the process
        # (its default action); the build reads the newest files anyway.
        loop.add_signal_handler(signal.SIGHUP, reload)
        runtime = await build(settings)
        if isinstance(runtime, Reloadable):
            built.append(runtime)
        try:
            await runtime.run(stop)
        finally:
            await runtime.aclose()

    build_info()  # read before the loop runs: outside an image it may ask git, which must not block the loop
    asyncio.run(main())
