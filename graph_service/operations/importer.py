"""``socialgraph import``: load an edge list into the edge tables, batched, resumable, idempotent.

Each row becomes a FOLLOW EDGE, with the very items and conditions of ``Follow`` on a public
account (``items.follow_elements``): the file lists follows that exist, so a private account's
followers in the old system were approved already and are not turned into requests. Blocks,
pending requests and the following cap are respected (the row is rejected, with its reason); the
follow rate limit is not applied; counts are not written here: the counters consumer counts the
new edges from the table's stream as it counts every other follow.

Batches (``import_batches.py``) run ``concurrency`` at a time. Two batches with a follower in
common never run at once, and a batch never starts before an earlier one that shares a follower:
each follower's outgoing count is then moved in file order (which rows pass the cap does not
depend on timing, so a resumed run ends like an uninterrupted one), and concurrent batches never
conflict on that count's item. A batch is committed, and a cancelled one sorted out, by
``import_commit.py``; units are settled, rejects written and the state saved in line order here.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.operations.import_batches import Outcome, Settled, Unit, pack
from graph_service.operations.import_commit import BatchWriter
from graph_service.operations.import_rows import Reason, Reject, Row, RowParser, count_rows
from graph_service.operations.import_state import (
    ImportFileError,
    ImportState,
    RejectFile,
    Tally,
    identify,
    load_state,
    save_state,
)
from graph_service.operations.progress import Meter
from graph_service.store.account_store import DynamoAccounts

__all__ = ["ImportOptions", "ImportResult", "check_tables", "import_edges", "prepare"]

log = structlog.get_logger(__name__)

WINDOW_PER_WORKER = 4
"""Units read ahead per concurrent batch, to find batches whose followers are not busy."""


@dataclass(frozen=True, slots=True)
class ImportOptions:
    source: Path
    state_path: Path
    rejects_path: Path
    concurrency: int = 8
    """Batches in flight."""
    restart: bool = False
    """Forget the state file (and the reject file) and start from line 1."""
    save_every_seconds: float = 1.0
    """How often the state is saved (work redone after a crash is at most this much)."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    state: ImportState
    finished: bool
    """Every line is settled (False: stopped by a signal; the state says where)."""
    already_done: bool
    """The state said the file was imported already: nothing was read or written."""
    written_now: int
    elapsed_seconds: float

    @property
    def tally(self) -> Tally:
        return self.state.tally


def prepare(options: ImportOptions) -> tuple[ImportState, bool]:
    """The state to go on from (a new one, or the saved one of this same file), and whether it is new.
    A saved state of a file that has changed since is refused, unless ``restart``."""
    identity = identify(options.source)
    saved = None if options.restart else load_state(options.state_path)
    if saved is None:
        return ImportState(input=identity, started_us=now_us()), True
    if not saved.input.same_file(identity):
        raise ImportFileError(
            f"{options.source} changed since the import recorded in {options.state_path} began"
            f" ({saved.input.size} bytes then, {identity.size} now, or other content):"
            " --restart imports it from the start (rows already imported are skipped)"
        )
    return saved, False


def _lines(source: Path) -> Iterator[tuple[int, bytes]]:
    with source.open("rb") as rows:
        yield from enumerate(rows, start=1)


@dataclass(slots=True)
class _Slot:
    unit: Unit
    followers: set[int]
    task: asyncio.Task[dict[int, Outcome]] | None = None
    outcomes: dict[int, Outcome] | None = None

    @property
    def done(self) -> bool:
        return self.outcomes is not None


@dataclass(slots=True)
class _Run:
    max_following: int
    options: ImportOptions
    state: ImportState
    dynamo: AsyncDynamo
    rejects: RejectFile
    meter: Meter
    writer: BatchWriter
    written_now: int = 0
    saved_at: float = field(default_factory=time.monotonic)

    # -- settling units in line order -----------------------------------------------------

    def _detail(self, row: Row, reason: Reason) -> str:
        if reason is Reason.BLOCKED:
            return f"{row.follower_id} and {row.followee_id}: one blocks the other"
        if reason is Reason.REQUEST_PENDING:
            return f"{row.follower_id} has a pending follow request to {row.followee_id}"
        if reason is Reason.ACCOUNT_AWAY:
            return f"{row.follower_id} or {row.followee_id} is deactivated or deleted"
        return f"{row.follower_id} would follow more than {self.max_following} accounts"

    def retire(self, slot: _Slot) -> None:
        """The unit is settled: its rejects go to the file, in line order, and the watermark moves."""
        assert slot.outcomes is not None
        tally = self.state.tally
        rejects = list(slot.unit.rejects)
        for row in slot.unit.rows:
            outcome = slot.outcomes[row.line]
            if outcome is Settled.WRITTEN:
                tally.written += 1
                self.written_now += 1
            elif outcome is Settled.PRESENT:
                tally.already_present += 1
            else:
                assert isinstance(outcome, Reason)
                rejects.append(Reject(row.line, outcome, self._detail(row, outcome), row.raw))
        rejects.sort(key=lambda r: r.line)
        rows = len(slot.unit.rows) + len(slot.unit.rejects)
        tally.rows += rows
        tally.rejected.update(r.reason.value for r in rejects)
        self.rejects.write(rejects)
        self.meter.advance(rows)
        self.state.watermark = slot.unit.last_line

    def checkpoint(self, *, force: bool = False) -> None:
        """Rejects made durable first, then the state that counts them."""
        if not force and time.monotonic() - self.saved_at < self.options.save_every_seconds:
            return
        self.state.rejects_bytes = self.rejects.sync()
        save_state(self.options.state_path, self.state)
        self.saved_at = time.monotonic()

    async def drive(self, units: Iterator[Unit], stop: asyncio.Event) -> bool:
        """Run the units; True when the file was read to its end and every unit settled."""
        window: deque[_Slot] = deque()
        limit = max(1, self.options.concurrency) * WINDOW_PER_WORKER
        exhausted = False
        try:
            while True:
                while not exhausted and not stop.is_set() and len(window) < limit:
                    unit = next(units, None)
                    if unit is None:
                        exhausted = True
                    else:
                        window.append(_Slot(unit, unit.followers))
                running = self._start(window, stop)
                while window and window[0].done:
                    self.retire(window.popleft())
                self.checkpoint()
                if not running and (stop.is_set() or not window):
                    self.checkpoint(force=True)
                    return exhausted and not window
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for slot in window:
                    if slot.task is not None and slot.task.done() and slot.outcomes is None:
                        slot.outcomes = slot.task.result()  # a failed batch raises here
        except KeyboardInterrupt:
            raise  # may have struck half way through ``retire``: the state saved last stands, as after kill -9
        except BaseException:  # a failed batch, or cancelled at an await (where the state is whole)
            await self._abandon(window)
            self.checkpoint(force=True)
            raise

    def _start(self, window: deque[_Slot], stop: asyncio.Event) -> set[asyncio.Task[dict[int, Outcome]]]:
        """Start every unit that may start; the tasks now running.

        Once ``stop`` is set, only the units before the last one started may still start: units
        run out of order (one waits while its follower is busy in an earlier one), so a unit that
        ran past one that had not started yet would leave its rows written but beyond the
        watermark, and the next run would count them "already present". Running the gaps (at
        most the read-ahead window) lets the watermark reach every unit that ran."""
        running = {s.task for s in window if s.task is not None and not s.done}
        horizon = len(window)
        if stop.is_set():
            horizon = max((i for i, s in enumerate(window) if s.task is not None), default=-1)
        busy: set[int] = set()
        for index, slot in enumerate(window):
            if slot.task is None and not slot.done:
                if not slot.unit.rows:
                    slot.outcomes = {}
                elif index < horizon and len(running) < self.options.concurrency and not slot.followers & busy:
                    slot.task = asyncio.create_task(self.writer.settle(slot.unit.rows))
                    running.add(slot.task)
            if not slot.done:
                busy |= slot.followers
        return {t for t in running if t is not None}

    async def _abandon(self, window: deque[_Slot]) -> None:
        """After a failure: let the batches in flight end (their rows are redone by the next run),
        and keep what finished in order, so the saved state is as far as it can be."""
        tasks = [s.task for s in window if s.task is not None and not s.done]
        for pending in tasks:
            pending.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for slot in window:
            ended = slot.task
            if ended is not None and slot.outcomes is None and not ended.cancelled() and ended.exception() is None:
                slot.outcomes = ended.result()
        while window and window[0].done:
            self.retire(window.popleft())


async def check_tables(dynamo: AsyncDynamo, tables: TableNames) -> None:
    """Fail (``ClientError``: exit 2; ``Unavailable``: exit 3) unless the edge tables answer: a
    missing table or an unreachable endpoint fails here, before any file is touched."""
    for table in (FOLLOWERS, FOLLOWING):
        await dynamo.call("describe_table", TableName=tables.table(table))


async def import_edges(
    dynamo: AsyncDynamo,
    tables: TableNames,
    options: ImportOptions,
    state: ImportState,
    *,
    max_following: int,
    fresh: bool,
    stop: asyncio.Event,
    meter: Meter,
) -> ImportResult:
    """Import from the state's watermark to the end of the file, or until ``stop`` is set (the
    batches in flight then finish and the state is saved). ``max_following``: the following cap
    (``SG_MAX_FOLLOWING``; 0: none). ``fresh``: the state is a new one (``prepare``), not saved yet.
    A state or reject file that cannot be written is ``ImportFileError``. The caller closes ``dynamo``."""
    started = time.monotonic()
    if state.finished:
        return ImportResult(state, finished=True, already_done=True, written_now=0, elapsed_seconds=0.0)
    await check_tables(dynamo, tables)
    if fresh:  # replaces an old state (--restart) before its reject file is cut: see import_state.py
        save_state(options.state_path, state)
    rejects = RejectFile(options.rejects_path, keep_bytes=state.rejects_bytes)
    try:
        accounts = DynamoAccounts(dynamo, tables)
        writer = BatchWriter(dynamo, tables.table(FOLLOWERS), tables.table(FOLLOWING), max_following, accounts)
        run = _Run(max_following, options, state, dynamo, rejects, meter, writer)
        run.checkpoint(force=True)  # the start time is durable before any row is written with it
        meter.total(count_rows(_lines(options.source)))  # rows, as the summary counts them
        meter.advance(state.tally.rows)
        if state.watermark:
            log.info("import_resumed", source=str(options.source), watermark=state.watermark)
        parser = RowParser(state.started_us)
        watermark = state.watermark

        def parsed() -> Iterator[tuple[int, Row | Reject | None]]:
            for line, raw in _lines(options.source):
                what = parser.parse(line, raw)  # lines up to the watermark too: they hold the pairs seen
                if line > watermark:
                    yield line, what

        finished = await run.drive(pack(parsed()), stop)
        if finished:
            state.watermark = max(state.watermark, state.input.lines)
            state.finished = True
            run.checkpoint(force=True)
    finally:
        rejects.close()
    elapsed = time.monotonic() - started
    return ImportResult(
        state, finished=finished, already_done=False, written_now=run.written_now, elapsed_seconds=elapsed
    )
