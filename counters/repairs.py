"""Cache repairs after committed counter updates, and the debts they leave when Redis is down."""

from __future__ import annotations

import asyncio
import itertools
import json

import structlog

from counters.applier import CounterApplier
from graph_service.domain.models import Counts
from graph_service.domain.ports import CacheRepairs
from graph_service.domain.retry import Backoff
from graph_service.domain.tasks import detached
from graph_service.store.changes import EdgeChange
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.telemetry.counters import CountersMetrics

__all__ = ["CacheRepairer", "decode_note", "encode_note"]

log = structlog.get_logger(__name__)


def encode_note(changes: list[EdgeChange]) -> str:
    """What a restarted consumer must redo in the cache for the last committed chunk."""
    return json.dumps([[c.follower_id, c.followee_id, c.at_us, int(c.added)] for c in changes])


def decode_note(note: str) -> list[EdgeChange]:
    if not note:
        return []
    return [EdgeChange(f, t, at, bool(a), "", "") for f, t, at, a in json.loads(note)]


class CacheRepairer:
    """Brings Redis in line with committed changes.

    A repair that fails (Redis unreachable) becomes a *debt* stored in DynamoDB, next to the
    checkpoints, and is retried until Redis answers again; debts survive a stop or crash and are
    settled by the next consumer that starts. Without a debt store (tests of the applier alone)
    failed repairs are simply retried in memory.
    """

    def __init__(
        self,
        cache: CacheRepairs | None,
        applier: CounterApplier,
        debts: CheckpointStore | None = None,
        *,
        metrics: CountersMetrics | None = None,
    ) -> None:
        self._cache = cache
        self._metrics = metrics if metrics is not None else CountersMetrics()
        """``debts``: owed repairs. Exact: a debt is stored and counted under ``_counting``, and a
        settling look reads the stored debts and sets the gauge under it too, so no debt can be
        both in the look and counted again after it (nor missed by both)."""
        self._counting = asyncio.Lock()
        self._applier = applier
        self._debts = debts
        self._unsaved: list[list[EdgeChange]] = []
        self._retry: asyncio.Task[None] | None = None
        self._owed_since_look = False
        """Set by ``start``: a repair was owed after the settling task last looked at the debts."""

    async def _attempt(self, changes: list[EdgeChange], counts: dict[int, Counts]) -> bool:
        assert self._cache is not None
        ok = True
        for change in changes:
            ok = (
                await self._cache.repair_edge(change.follower_id, change.followee_id, change.at_us, change.added) and ok
            )
        for user_id, value in counts.items():
            ok = await self._cache.set_counts(user_id, value) and ok
        return ok

    async def repair(self, changes: list[EdgeChange], counts: dict[int, Counts]) -> None:
        if self._cache is None or await self._attempt(changes, counts):
            return
        await self.owe(changes)
        log.warning("cache_repair_deferred", changes=len(changes))
        self.start()

    async def owe(self, changes: list[EdgeChange]) -> None:
        """Remember a repair that could not be made: stored as a debt (kept in memory without a
        debt store) and counted in ``socialgraph_counters_repair_debts``. ``start`` settles it."""
        if not changes:
            return  # nothing to redo (the debt store keeps no empty note either)
        if self._debts is None:
            self._unsaved.append(changes)
            self._metrics.debts.inc()
            return
        async with self._counting:
            await self._debts.add_debt(encode_note(changes))
            self._metrics.debts.inc()

    async def touch(self, pairs: list[tuple[int, int]]) -> None:
        """Drop cached relationship and privacy entries of pairs whose requests, blocks or mutes changed.
        A drop Redis refuses is owed by the cache in memory and delivered when Redis answers;
        a consumer that stops before that leaves them to their TTL."""
        cache = self._cache
        if cache is None:
            return

        async def drop(a: int, b: int) -> None:
            if a == b:
                await cache.drop_private(a, essential=False)
            else:
                await cache.touch_pair(a, b, essential=False)

        await asyncio.gather(*(drop(a, b) for a, b in pairs))

    async def redo(self, changes: list[EdgeChange]) -> bool:
        """Repeat a repair with counters read afresh (the values committed since are newer anyway)."""
        if self._cache is None:
            return True
        users = sorted({u for c in changes for u in (c.follower_id, c.followee_id)})
        counts = await self._applier.read_counts(users) if users else {}
        return await self._attempt(changes, counts)

    async def settle(self) -> bool:
        """Redo every owed repair; True when nothing is owed any more."""
        while self._unsaved:
            if not await self.redo(self._unsaved[0]):
                return False
            self._unsaved.pop(0)
            self._metrics.debts.dec()
        if self._debts is None:
            return True
        async with self._counting:  # no debt is being stored while the look is taken and counted
            stored = await self._debts.debts()
            self._metrics.debts.set(len(self._unsaved) + len(stored))
        for key, note in stored.items():
            if not await self.redo(decode_note(note)):
                return False
            await self._debts.settle_debt(key)
            self._metrics.debts.dec()
        return True

    def start(self) -> None:
        """Settle owed repairs in the background, retrying until Redis answers."""
        if self._cache is None:
            return
        self._owed_since_look = True
        if self._retry is None or self._retry.done():
            self._retry = detached(self._settle_until_done())

    async def _settle_until_done(self) -> None:
        attempts = itertools.count(1)
        backoff = Backoff(base=0.5, cap=5.0)  # Redis is unreachable: no faster than its circuit breaker
        # A debt added while ``settle`` runs (a repair that failed just before Redis came back) may
        # be missed by it: ``start`` then finds this task still running and only marks it owed, so
        # settle again until nothing was owed since the last look.
        while self._owed_since_look:
            self._owed_since_look = False
            while not await self.settle():
                next(attempts)
                await asyncio.sleep(backoff.next_delay())
        log.info("cache_repair_caught_up", attempts=next(attempts))

    async def aclose(self) -> None:
        """Stop settling in the background; what is still owed stays stored as debts (the cache
        itself is closed by its owner)."""
        if self._retry is not None:
            self._retry.cancel()
            await asyncio.gather(self._retry, return_exceptions=True)
