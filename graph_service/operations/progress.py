"""Progress of a long operator run: a bar with rate and ETA on a terminal, JSON lines otherwise.

On a terminal (stderr is a TTY) it is a ``rich`` progress bar. Anywhere else (CI, a pod's log, a
pipe) it is a ``progress`` log line every ``every_seconds`` and one at the end, through the same
structlog JSON as every other line, so a log shipper reads it like the rest.

A total may be an estimate (``estimated``: DynamoDB's item count, which lags the writes made since
it was taken, by hours on AWS): the bar then says so, the total grows with the work when the work
passes it (done never shows more than the total), and at the end it is what was done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, TextIO

import structlog
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["Meter", "Watcher", "meter", "watching"]

log = structlog.get_logger(__name__)


class Meter(Protocol):
    def advance(self, done: int = 1) -> None:
        """``done`` more units of work are finished."""
        ...

    def total(self, total: int | None) -> None:
        """The total is (now) known, or unknown (None: a bar without an end, still with a rate)."""
        ...


Watcher = Callable[[int, int | None], None]
"""Told ``(done, total)`` at each step of a meter (a run's metrics file: ``telemetry.operator_runs``)."""

_WATCHERS: ContextVar[tuple[Watcher, ...]] = ContextVar("progress_watchers", default=())


@contextmanager
def watching(watcher: Watcher) -> Iterator[None]:
    """``watcher`` hears every step of every meter opened inside, in this context and the event
    loops and tasks started from it (``asyncio.run`` copies the context)."""
    token = _WATCHERS.set((*_WATCHERS.get(), watcher))
    try:
        yield
    finally:
        _WATCHERS.reset(token)


class _Watched:
    """A meter that also tells the watchers how far it is."""

    def __init__(self, inner: Meter, watchers: tuple[Watcher, ...], total: int | None, *, estimated: bool) -> None:
        self._inner = inner
        self._watchers = watchers
        self._total = total
        self._estimated = estimated
        self._done = 0

    def advance(self, done: int = 1) -> None:
        self._inner.advance(done)
        self._done += done
        if self._estimated and self._total is not None and self._done > self._total:
            self._total = self._done
        self._tell()

    def total(self, total: int | None) -> None:
        self._inner.total(total)
        self._total = total
        self._tell()

    def _tell(self) -> None:
        for watcher in self._watchers:
            watcher(self._done, self._total)


def _watched(inner: Meter, total: int | None, *, estimated: bool) -> Meter:
    watchers = _WATCHERS.get()
    return _Watched(inner, watchers, total, estimated=estimated) if watchers else inner


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "-/s")


class _BarMeter:
    def __init__(self, progress: Progress, task_id: TaskID, total: int | None, *, estimated: bool) -> None:
        self._progress = progress
        self._task_id = task_id
        self._total = total
        self._estimated = estimated
        self._done = 0

    def advance(self, done: int = 1) -> None:
        self._done += done
        if self._estimated and self._total is not None and self._done > self._total:
            self.total(self._done)
        self._progress.advance(self._task_id, done)

    def total(self, total: int | None) -> None:
        self._total = total
        self._progress.update(self._task_id, total=total)

    def end(self) -> None:
        if self._estimated:
            self.total(self._done)


class _LogMeter:
    def __init__(self, name: str, total: int | None, every_seconds: float, *, estimated: bool) -> None:
        self._name = name
        self._total = total
        self._estimated = estimated
        self._every = every_seconds
        self._done = 0
        self._started = time.monotonic()
        self._last = self._started

    def advance(self, done: int = 1) -> None:
        self._done += done
        if self._estimated and self._total is not None and self._done > self._total:
            self._total = self._done
        now = time.monotonic()
        if now - self._last >= self._every:
            self._last = now
            self.report("progress")

    def total(self, total: int | None) -> None:
        self._total = total

    def end(self) -> None:
        if self._estimated:
            self._total = self._done
        self.report("progress_done")

    def report(self, event: str) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self._done / elapsed
        fields: dict[str, object] = {"task": self._name, "done": self._done, "rate_per_second": round(rate, 1)}
        if self._total is not None:
            fields["total"] = self._total
            if self._estimated:
                fields["total_estimated"] = True
            if rate > 0:
                fields["eta_seconds"] = round(max(self._total - self._done, 0) / rate, 1)
        fields["elapsed_seconds"] = round(elapsed, 1)
        log.info(event, **fields)


@contextmanager
def meter(
    name: str,
    total: int | None = None,
    *,
    estimated: bool = False,
    stream: TextIO | None = None,
    every_seconds: float = 10.0,
) -> Iterator[Meter]:
    """A progress meter for ``name`` (e.g. "import"), closed (a final line or a full bar) on exit.
    ``estimated``: ``total`` is a guess (module docstring)."""
    out = sys.stderr if stream is None else stream
    if out.isatty():
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(file=out),
            transient=False,
        ) as progress:
            description = f"{name} (total estimated)" if estimated and total is not None else name
            bar = _BarMeter(progress, progress.add_task(description, total=total), total, estimated=estimated)
            yield _watched(bar, total, estimated=estimated)
            bar.end()
        return
    logged = _LogMeter(name, total, every_seconds, estimated=estimated)
    yield _watched(logged, total, estimated=estimated)
    logged.end()  # only when the work ended, not when a failure cut it short
