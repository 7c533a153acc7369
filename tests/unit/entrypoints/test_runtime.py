"""``run_until_signal``: what the signals do to a running process."""

from __future__ import annotations

import asyncio
import os
import signal

from graph_service.entrypoints.runtime import run_until_signal
from graph_service.settings import Settings


class Reloading:
    def __init__(self) -> None:
        self.reloads = 0
        self.closed = False
        self._reloaded: asyncio.Event | None = None

    def reload(self) -> None:
        self.reloads += 1
        if self._reloaded is not None:
            self._reloaded.set()

    async def run(self, stop: asyncio.Event) -> None:
        for _ in range(2):
            self._reloaded = asyncio.Event()
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(self._reloaded.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)

    async def aclose(self) -> None:
        self.closed = True


def test_sighup_reloads_and_sigterm_stops() -> None:
    """SIGHUP calls the runtime's ``reload`` (the process goes on); SIGTERM ends the run and closes it."""
    runtime = Reloading()

    async def build(settings: Settings) -> Reloading:
        return runtime

    run_until_signal(build, Settings())
    assert runtime.reloads == 2
    assert runtime.closed
