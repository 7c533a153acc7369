"""A clean stop of an import (Ctrl-C) leaves no written row past the saved watermark: a batch that
ran ahead of one still waiting for its follower gets the gap filled, so the next run finds nothing
of this one's to count as "already present"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from graph_service.operations.import_batches import Outcome, Settled, Unit
from graph_service.operations.import_commit import BatchWriter
from graph_service.operations.import_rows import Row
from graph_service.operations.import_state import ImportState, InputIdentity, RejectFile, load_state
from graph_service.operations.importer import ImportOptions, _Run
from graph_service.settings import Settings


class HeldWriter:
    """Writes a unit when the test lets its first line go; remembers what it wrote."""

    def __init__(self) -> None:
        self.release: dict[int, asyncio.Event] = {}
        self.started: list[int] = []
        self.written: list[int] = []

    def gate(self, line: int) -> asyncio.Event:
        return self.release.setdefault(line, asyncio.Event())

    async def settle(self, rows: list[Row]) -> dict[int, Outcome]:
        first = rows[0].line
        self.started.append(first)
        await self.gate(first).wait()
        self.written += [row.line for row in rows]
        return {row.line: Settled.WRITTEN for row in rows}


class Counted:
    def __init__(self) -> None:
        self.done = 0

    def advance(self, done: int = 1) -> None:
        self.done += done

    def total(self, total: int | None) -> None: ...


def unit(line: int, follower: int) -> Unit:
    return Unit(line, line, rows=[Row(line, follower, 1_000 + line, line, f"{follower},{1_000 + line}")])


async def until(condition: Any) -> None:
    for _ in range(1_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the import never got there")


async def test_a_stop_fills_the_gap_before_a_batch_that_ran_ahead_and_starts_nothing_later(tmp_path: Path) -> None:
    """Two batches at a time. Line 2 waits for follower 1 (busy in line 1); line 3 runs ahead and
    ends; then the stop. Line 2 still runs (it is before line 3), line 4 does not (after every
    batch that ran): the watermark is line 3 and every written row is counted written."""
    options = ImportOptions(tmp_path / "edges.csv", tmp_path / "state.json", tmp_path / "rejects.csv", concurrency=2)
    state = ImportState(InputIdentity(str(options.source), 0, "", 4), started_us=1)
    writer = HeldWriter()
    meter = Counted()
    rejects = RejectFile(options.rejects_path, keep_bytes=0)
    run = _Run(Settings().max_following, options, state, cast(Any, None), rejects, meter, cast(BatchWriter, writer))
    stop = asyncio.Event()
    driving = asyncio.create_task(run.drive(iter([unit(1, 1), unit(2, 1), unit(3, 2), unit(4, 3)]), stop))

    await until(lambda: writer.started == [1, 3])
    writer.gate(3).set()
    await until(lambda: writer.written == [3])
    stop.set()
    writer.gate(2).set()
    writer.gate(1).set()
    finished = await asyncio.wait_for(driving, timeout=5)
    rejects.close()

    assert finished is False
    assert writer.written == [3, 1, 2]
    assert writer.started == [1, 3, 2]  # line 4 never started
    saved = load_state(options.state_path)
    assert saved is not None
    assert (saved.watermark, saved.tally.written, saved.tally.already_present, saved.tally.rows) == (3, 3, 0, 3)
    assert meter.done == 3
