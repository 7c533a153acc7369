"""What every long-running process is to its entry point: built once, run until a stop, closed once."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

from graph_service.settings import Settings

__all__ = ["Reloadable", "Runtime", "run_until_signal"]


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


def run_until_signal(build: Callable[[Settings], Awaitable[R]], settings: Settings) -> None:
    """Build the runtime, run it until SIGTERM or SIGINT, then close it; SIGHUP reloads a runtime
    that can (the server's callers file) and is ignored by the others (the consumers)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
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

    asyncio.run(main())
