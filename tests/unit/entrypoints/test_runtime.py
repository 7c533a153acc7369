"""``run_until_signal``: what the signals do to a running process."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from graph_service.entrypoints import runtime as runtime_module
from graph_service.entrypoints.runtime import OVERDUE_EXIT, run_until_signal
from graph_service.settings import Settings
from graph_service.telemetry.build_info import build_info


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


class Stuck:
    """A runtime that ignores the stop (a retry loop that never looks at it)."""

    def __init__(self) -> None:
        self.hang: asyncio.Future[None] | None = None
        self.closed = False

    async def run(self, stop: asyncio.Event) -> None:
        self.hang = asyncio.get_running_loop().create_future()
        os.kill(os.getpid(), signal.SIGTERM)
        await self.hang

    async def aclose(self) -> None:
        self.closed = True


def test_a_process_that_ignores_the_stop_exits_after_its_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM in any state ends the process: past SG_SHUTDOWN_GRACE_SECONDS (+ the margin) it exits 1."""
    monkeypatch.setattr(runtime_module, "OVERDUE_MARGIN_SECONDS", 0.0)
    runtime = Stuck()
    codes: list[int] = []

    def force_exit(code: int) -> None:
        codes.append(code)
        assert runtime.hang is not None
        runtime.hang.set_result(None)  # stands for the process ending

    async def build(settings: Settings) -> Stuck:
        return runtime

    started = time.monotonic()
    with capture_logs() as logs:
        run_until_signal(build, replace(Settings(), shutdown_grace_seconds=0.3), force_exit=force_exit)
    assert codes == [OVERDUE_EXIT]
    assert 0.3 <= time.monotonic() - started < 5
    assert [line["why"] for line in logs if line["event"] == "shutdown_overdue"] == [
        "still running after the grace period"
    ]


def test_a_second_signal_exits_at_once() -> None:
    runtime = Stuck()
    codes: list[int] = []

    async def build(settings: Settings) -> Stuck:
        class Twice(Stuck):
            async def run(self, stop: asyncio.Event) -> None:
                self.hang = asyncio.get_running_loop().create_future()
                os.kill(os.getpid(), signal.SIGINT)
                await asyncio.wait_for(stop.wait(), 5)
                os.kill(os.getpid(), signal.SIGINT)
                await self.hang

        nonlocal runtime
        runtime = Twice()
        return runtime

    def force_exit(code: int) -> None:
        codes.append(code)
        assert runtime.hang is not None
        runtime.hang.set_result(None)

    run_until_signal(build, replace(Settings(), shutdown_grace_seconds=60), force_exit=force_exit)
    assert codes == [OVERDUE_EXIT]
    assert runtime.closed


def test_the_build_is_read_before_the_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_info`` (which may run ``git rev-parse`` outside an image) is resolved before the event
    loop starts: the builders that register it find it cached and never block the loop on git."""
    monkeypatch.delenv("SG_BUILD_COMMIT", raising=False)
    build_info.cache_clear()
    cached_at_build: list[int] = []

    class Done:
        async def run(self, stop: asyncio.Event) -> None:
            return None

        async def aclose(self) -> None:
            return None

    async def build(settings: Settings) -> Done:
        cached_at_build.append(build_info.cache_info().currsize)
        return Done()

    try:
        run_until_signal(build, Settings())
    finally:
        build_info.cache_clear()
    assert cached_at_build == [1]
