"""The counters consumer: stream records -> exactly-once counter updates -> cache repair."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import structlog
from botocore.exceptions import ClientError

from counters.applier import CounterApplier, Fence, FenceRejected, chunk_changes
from counters.checkpoints import CheckpointStore
from counters.edge_changes import EdgeChange, decode_note, edge_changes, encode_note, touched_pairs
from counters.stream_reader import StreamReader
from graph_service.bootstrap import build_cache
from graph_service.cache.graph_cache import GraphCache
from graph_service.models import Counts
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo, error_code
from graph_service.store.tables import FOLLOWERS

__all__ = ["CacheRepairer", "CountersConsumer", "run_counters"]

log = structlog.get_logger(__name__)


class CacheRepairer:
    """Brings Redis in line with committed changes.

    A repair that fails (Redis unreachable) becomes a *debt* stored in DynamoDB, next to the
    checkpoints, and is retried until Redis answers again; debts survive a stop or crash and are
    settled by the next consumer that starts. Without a debt store (tests of the applier alone)
    failed repairs are simply retried in memory.
    """

    def __init__(self, cache: GraphCache | None, applier: CounterApplier, debts: CheckpointStore | None = None) -> None:
        self._cache = cache
        self._applier = applier
        self._debts = debts
        self._unsaved: list[list[EdgeChange]] = []
        self._retry: asyncio.Task[None] | None = None

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
        if self._debts is not None:
            await self._debts.add_debt(encode_note(changes))
        else:
            self._unsaved.append(changes)
        log.warning("cache_repair_deferred", changes=len(changes))
        self.start()

    async def touch(self, pairs: list[tuple[int, int]]) -> None:
        """Drop cached relationship and privacy entries of pairs whose requests or blocks changed.
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
        if self._debts is None:
            return True
        for key, note in (await self._debts.debts()).items():
            if not await self.redo(decode_note(note)):
                return False
            await self._debts.settle_debt(key)
        return True

    def start(self) -> None:
        """Settle owed repairs in the background, retrying until Redis answers."""
        if self._cache is not None and (self._retry is None or self._retry.done()):
            self._retry = asyncio.create_task(self._settle_until_done())

    async def _settle_until_done(self) -> None:
        for attempt in itertools.count():
            if await self.settle():
                log.info("cache_repair_caught_up", attempts=attempt + 1)
                return
            await asyncio.sleep(0.5)  # Redis is unreachable: the circuit breaker's pace

    async def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            await asyncio.gather(self._retry, return_exceptions=True)  # owed repairs stay stored as debts
        if self._cache is not None:
            await self._cache.close()


class CountersConsumer:
    """The handler of a ``StreamReader``: chunk, apply with the checkpoint as fence, repair."""

    def __init__(self, applier: CounterApplier, checkpoints: CheckpointStore, repairer: CacheRepairer) -> None:
        self._applier = applier
        self._checkpoints = checkpoints
        self._repairer = repairer
        self.applied_changes = 0

    async def redo_last_repairs(self) -> None:
        """After a (re)start: the last chunk of every shard may have missed its repair; debts too."""
        for checkpoint in (await self._checkpoints.load_all()).values():
            if not await self._repairer.redo(decode_note(checkpoint.note)):
                await self._checkpoints.add_debt(checkpoint.note)
        self._repairer.start()

    async def handle(self, shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        last = str(records[-1]["dynamodb"]["SequenceNumber"])
        chunks = chunk_changes(edge_changes(records))
        ends = [c[-1].sequence for c in chunks[:-1]] + [last]
        for chunk, end in zip(chunks or [[]], ends, strict=True):
            committed = await self._commit_chunk(shard_id, chunk, end, committed)
        await self._repairer.touch(touched_pairs(records))
        return committed

    async def _commit_chunk(
        self, shard_id: str, chunk: list[EdgeChange], end: str, committed: str | None
    ) -> str | None:
        while True:
            if committed is not None and int(committed) >= int(end):
                return committed  # applied before (a replay after a crash or by another process)
            todo = [c for c in chunk if committed is None or int(c.sequence) > int(committed)]
            previous = committed
            try:
                if todo:
                    fence = Fence([self._checkpoints.advance_item(shard_id, previous, end, encode_note(todo))])
                    counts = await self._applier.apply(todo, fence)
                else:
                    await self._checkpoints.advance(shard_id, previous, end)
                    counts = {}
            except FenceRejected:
                committed = (await self._checkpoints.load(shard_id)).sequence
                log.warning("checkpoint_moved_elsewhere", shard_id=shard_id, now=committed)
                continue
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                committed = (await self._checkpoints.load(shard_id)).sequence
                continue
            self.applied_changes += len(todo)
            await self._repairer.repair(todo, counts)
            return end


async def run_counters(settings: Settings, stop: asyncio.Event) -> None:
    """Run the consumer until ``stop`` is set (the ``socialgraph counters`` command)."""
    dynamo = AsyncDynamo.build(settings)
    streams = AsyncDynamo.build(settings, "dynamodbstreams")
    applier = CounterApplier(dynamo, settings)
    checkpoints = CheckpointStore(dynamo, settings, settings.counters_consumer_name)
    repairer = CacheRepairer(build_cache(settings), applier, checkpoints)
    consumer = CountersConsumer(applier, checkpoints, repairer)
    try:
        await consumer.redo_last_repairs()
        reader = await StreamReader.for_table(dynamo, streams, settings, FOLLOWERS, checkpoints, consumer.handle)
        log.info("counters_started")
        await reader.run(stop)
    finally:
        await repairer.close()
        dynamo.close()
        streams.close()
        log.info("counters_stopped")
