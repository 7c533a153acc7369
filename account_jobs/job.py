"""One account's job (SPEC §3b): archive its edges and requests, restore them, or delete everything
about it, in batches, each one transaction fenced by the account's state at the job's generation.

A batch removes what it moves, so the job always works on the first items left: a job that stops
anywhere (a crash, a kill -9, its account changing state again) and runs again goes on where the
last committed batch left it, and nothing is moved twice. When the fence refuses, a later call has
won: the job stops (``run`` returns False) and the later call's own job takes over.

The order is fixed: followers, following, requests made to it, requests it made; then (restore)
the archive, side by side. A job's batches are sequential: each moves the state item's progress,
and DynamoDB serialises transactions on one item, so parallel batches of one account would only
conflict; jobs of different accounts run in parallel (``worker.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from account_jobs.tracing import JobSpans
from graph_service.domain.account_ports import AccountForgetting, AccountJobStore
from graph_service.domain.accounts import Archived, Lifecycle, Moved, Restored, Side
from graph_service.domain.errors import TimelineUnavailable, Unavailable
from graph_service.domain.ports import GraphChanges, TimelineWrites

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["SIDES", "AccountJob", "JobReport"]

log = structlog.get_logger(__name__)
SIDES = (Side.FOLLOWER, Side.FOLLOWING, Side.REQUESTER, Side.REQUESTED)
REFUSALS_IN_A_ROW = 20
"""Batches in a row an item's concurrent change may refuse before the job gives up for now."""
OWN_PREFIXES = ("B#", "M#", "MT#")
"""A deleted account's own items in its ``followers`` partition: its blocks and mutes (and ``P``)."""
REVERSE_PREFIXES = ("b#", "m#")
"""Others' blocks and mutes of the account, by their reverse items in its partition."""
REVERSE_BATCH = 32
"""Reverse items handled per transaction (three elements each at most)."""
DROP_BATCH = 98
OWN_BATCH = 49
"""Own blocks and mutes per transaction (each with its reverse item in the other's partition)."""
LOG_EVERY_SECONDS = 10.0
"""A running job logs how far it is this often."""
COUNTERS_WAIT_SECONDS = 60.0
"""How long a deletion waits for the counters consumer to count the account's last edges out."""


class JobReport:
    """How far a job is, as it goes: every committed batch calls ``add``, which counts into
    ``on_moved`` (the worker's metric) and logs a progress line every ``LOG_EVERY_SECONDS``."""

    def __init__(self, user_id: int = 0, kind: str = "", on_moved: Callable[[int], None] | None = None) -> None:
        self.moved = 0
        self._user_id = user_id
        self._kind = kind
        self._on_moved = on_moved
        self._logged = time.monotonic()

    def add(self, n: int) -> None:
        self.moved += n
        if self._on_moved is not None:
            self._on_moved(n)
        if time.monotonic() - self._logged >= LOG_EVERY_SECONDS:
            self._logged = time.monotonic()
            log.info("account_job_progress", user_id=self._user_id, job=self._kind, moved=self.moved)


class Superseded(Exception):
    """The account's state moved past the job's generation."""


class AccountJob:
    def __init__(
        self,
        store: AccountJobStore,
        changes: GraphChanges,
        forgetting: Sequence[AccountForgetting] = (),
        timelines: TimelineWrites | None = None,
        *,
        tracer: Tracer | None = None,
    ) -> None:
        """``changes`` is told what every batch settled, as after a follow or an unfollow (the
        caches are written through: a list or a follow state is never older than a finished job);
        ``forgetting``: what a deletion removes outside the tables; ``timelines`` (None: no Redis)
        get the backfill of the followers a restore brings back; ``tracer``: a span per batch
        (``tracing.py``; None: the process's, if it traces)."""
        self._spans = JobSpans(tracer, expected=(Superseded,))
        self._store = store
        self._changes = changes
        self._forgetting = forgetting
        self._timelines = timelines

    async def run(self, user_id: int, gen: int, state: Lifecycle, report: JobReport | None = None) -> bool:
        """Run the job of ``state`` (DEACTIVATING, REACTIVATING or DELETING) at ``gen`` to its end:
        True when it finished (the state settled), False when a later change superseded it."""
        report = report if report is not None else JobReport()
        work = {
            Lifecycle.DEACTIVATING: self._deactivate,
            Lifecycle.REACTIVATING: self._reactivate,
            Lifecycle.DELETING: self._delete,
        }[state]
        try:
            await work(user_id, gen, report)
        except Superseded:
            return False
        return await self._store.finish(user_id, gen, state)

    # -- deactivate ---------------------------------------------------------------------------

    async def _deactivate(self, user_id: int, gen: int, report: JobReport) -> None:
        await self._total(user_id, gen, Lifecycle.DEACTIVATING, SIDES)
        for side in SIDES:
            await self._take_out(user_id, gen, side, report, archive=True)

    async def _total(self, user_id: int, gen: int, state: Lifecycle, sides: Sequence[Side | None]) -> None:
        """Record the job's total: what its batches moved so far (a job taken over after a crash)
        plus what is left to move."""
        status, counts = await asyncio.gather(
            self._store.status(user_id), asyncio.gather(*(self._store.count(user_id, side) for side in sides))
        )
        if status.gen != gen or not await self._store.set_total(user_id, gen, state, status.edges_done + sum(counts)):
            raise Superseded

    async def _take_out(self, user_id: int, gen: int, side: Side, report: JobReport, *, archive: bool) -> None:
        """Archive (or delete) every live item of the side, a batch at a time."""
        size = self._store.per_batch(side, archive=archive)
        state = Lifecycle.DEACTIVATING if archive else Lifecycle.DELETING
        refused = 0
        while edges := await self._store.live(user_id, side, size):
            with self._spans.batch("archive" if archive else "purge", user_id, _kind(state), len(edges), side):
                if side.is_edge and not await self._store.mark(user_id, gen, side, edges, state):
                    raise Superseded
                move = self._store.archive if archive else self._store.purge
                moved = await move(user_id, gen, side, edges)
                if moved is Moved.DONE:
                    await self._settled(user_id, side, [(e.user_id, e.at_us) for e in edges], live=False)
                    report.add(len(edges))
                    refused = 0
                    continue
            if moved is Moved.SUPERSEDED:
                raise Superseded
            refused += 1  # an item changed since it was read (unfollowed, accepted...): read again
            if refused >= REFUSALS_IN_A_ROW:
                raise Unavailable(f"account {user_id}'s {side.name.lower()} items kept changing under its job")

    # -- reactivate ---------------------------------------------------------------------------

    async def _reactivate(self, user_id: int, gen: int, report: JobReport) -> None:
        # Marks an interrupted archive (or a late edge's settling) left on live edges; cheap after
        # a finished deactivation, which left no live edge to read.
        cleared = await self._store.clear_marks(user_id)
        if cleared:
            log.info("archive_marks_cleared", user_id=user_id, edges=cleared)
        await self._total(user_id, gen, Lifecycle.REACTIVATING, [None])
        for side in SIDES:
            size = self._store.per_restore(side)
            while found := await self._store.archived(user_id, side, size):
                with self._spans.batch("restore", user_id, _kind(Lifecycle.REACTIVATING), len(found), side):
                    outcome = await self._store.restore(user_id, gen, side, found)
                    if outcome is Restored.SUPERSEDED:
                        raise Superseded
                    restored = list(found)
                    if outcome is not Restored.DONE:  # one by one: which of them cannot come back, and why
                        restored = [item for item in found if await self._restore_one(user_id, gen, item)]
                    await self._settled(user_id, side, [(item.other, item.at_us) for item in restored], live=True)
                    if side is Side.FOLLOWER:
                        await self._backfill(user_id, [item.other for item in restored])
                report.add(len(found))

    async def _restore_one(self, user_id: int, gen: int, item: Archived) -> bool:
        """Restore one item (True), or else (False): hand it to the other account if that one is
        away (it comes back with the other's reactivation), forget it if the other is deleted,
        blocked either way, or the pair made something newer meanwhile."""
        for _ in range(REFUSALS_IN_A_ROW):
            outcome = await self._store.restore(user_id, gen, item.side, [item])
            if outcome is Restored.DONE:
                return True
            if outcome is Restored.SUPERSEDED:
                raise Superseded
            if outcome is Restored.GONE:
                return False
            if outcome is Restored.REFUSED:
                await self._drop(user_id, gen, Lifecycle.REACTIVATING, [item])
                log.info("archived_item_not_restored", user_id=user_id, other=item.other, side=item.side.name)
                return False
            other = (await self._store.states([item.other]))[item.other]
            if other.deleted:
                await self._drop(user_id, gen, Lifecycle.REACTIVATING, [item])
                return False
            if not other.in_graph and await self._store.hand_over(user_id, gen, item):
                return False
            # The other came back (or left) meanwhile, or the item is gone: decide again.
        raise Unavailable(f"account {user_id}'s archived item with {item.other} kept changing")

    async def _settled(self, user_id: int, side: Side, moved: Sequence[tuple[int, int]], *, live: bool) -> None:
        """Tell the caches what a batch settled: each edge made (``live``) or removed, at its time;
        each request's pair touched."""

        async def settle(other: int, at_us: int) -> None:
            follower, followee = side.follower_followee(user_id, other)
            if side.is_edge:
                await self._changes.follow_settled(follower, followee, at_us, following=live)
            else:
                await self._changes.pair_settled(follower, followee)

        await asyncio.gather(*(settle(other, at_us) for other, at_us in moved))

    async def _blocks_and_mutes_settled(self, user_id: int, sort_keys: Sequence[str], *, own: bool) -> None:
        """Tell the caches of the blocks and mutes a deletion removed (``own``: the account's own,
        ``B#``/``M#``; else others' of it, by their reverses ``b#``/``m#``): the pairs' cached
        relationships and mutes go, as after an unblock or an unmute."""

        async def settle(sk: str) -> None:
            kind, other = sk.split("#", 1)
            if kind.upper() not in ("B", "M"):
                return  # an MT# order item: its M# names the pair
            a, b = (user_id, int(other)) if own else (int(other), user_id)  # (blocker or muter, other)
            if kind.upper() == "B":
                await self._changes.pair_settled(a, b)
            else:
                await self._changes.mute_settled(a, b)

        await asyncio.gather(*(settle(sk) for sk in sort_keys))

    async def _drop_counters(self, user_id: int, gen: int) -> None:
        """Delete the account's counters once the counters consumer has counted its last edges out
        (they read zero), so that the consumer does not make them again; at the version read, so a
        count it moves meanwhile is read again. After ``COUNTERS_WAIT_SECONDS`` (the consumer is
        down or far behind) they are deleted as they are, and a zero row may come back: fsck and
        reconcile take a missing row and a zero one alike."""
        deadline = time.monotonic() + COUNTERS_WAIT_SECONDS
        for attempt in itertools.count():
            counts = await self._store.counters(user_id)
            if not (counts.followers or counts.following) or time.monotonic() >= deadline:
                moved = await self._store.drop_counters(user_id, gen, counts.version)
                if moved is Moved.DONE:
                    return
                if moved is Moved.SUPERSEDED:
                    raise Superseded
                # The consumer moved them since they were read: read again, after a pause.
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))  # the consumer's pace, not a sync

    async def _backfill(self, user_id: int, followers: Sequence[int]) -> None:
        """The account's recent tweets into the home timelines of the followers it got back, as a
        new follow brings them (SPEC §5: noted among its new followers in the same step, so a tweet
        recorded meanwhile reaches them too); a celebrity's are pulled at read time anyway."""
        timelines = self._timelines
        if timelines is None or not followers:
            return

        async def backfill(follower: int) -> None:
            recent = await timelines.note_follow(user_id, follower, followed=True)
            if not celebrity:
                await timelines.merge(follower, recent)

        try:
            celebrity = await timelines.is_celebrity(user_id)
            await asyncio.gather(*(backfill(follower) for follower in followers))  # a batch's at once
        except TimelineUnavailable as exc:  # the follows are back; only their timelines miss the tweets
            log.warning("restored_followers_backfill_failed", user_id=user_id, followers=len(followers), error=str(exc))

    async def _drop(self, user_id: int, gen: int, state: Lifecycle, items: Sequence[Archived]) -> None:
        if not await self._store.drop_archived(user_id, gen, state, items):
            raise Superseded

    # -- delete -------------------------------------------------------------------------------

    async def _delete(self, user_id: int, gen: int, report: JobReport) -> None:
        await self._total(user_id, gen, Lifecycle.DELETING, [*SIDES, None])
        for side in SIDES:
            await self._take_out(user_id, gen, side, report, archive=False)
        kind = _kind(Lifecycle.DELETING)
        while found := await self._store.archived(user_id, None, DROP_BATCH):
            with self._spans.batch("drop_archived", user_id, kind, len(found)):
                await self._drop(user_id, gen, Lifecycle.DELETING, found)
            report.add(len(found))
        for prefix in OWN_PREFIXES:
            while sort_keys := await self._store.owned(user_id, prefix, OWN_BATCH):
                with self._spans.batch("drop_own", user_id, kind, len(sort_keys), prefix):
                    if not await self._store.drop_owned(user_id, gen, sort_keys):
                        raise Superseded
                    await self._blocks_and_mutes_settled(user_id, sort_keys, own=True)
        for prefix in REVERSE_PREFIXES:
            while sort_keys := await self._store.owned(user_id, prefix, REVERSE_BATCH):
                with self._spans.batch("drop_reverse", user_id, kind, len(sort_keys), prefix):
                    if not await self._store.drop_blocks_and_mutes_of(user_id, gen, sort_keys):
                        raise Superseded
                    await self._blocks_and_mutes_settled(user_id, sort_keys, own=False)
        if not await self._store.drop_owned(user_id, gen, ["P"]):
            raise Superseded
        await self._drop_counters(user_id, gen)
        for forgetting in self._forgetting:
            await forgetting.forget_account(user_id)


def _kind(state: Lifecycle) -> str:
    """A job's kind as its metrics and spans name it (``deactivating``, ``reactivating``, ``deleting``)."""
    return state.name.lower()
