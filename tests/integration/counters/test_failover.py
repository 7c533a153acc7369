"""Two counters consumers on one stream, against DynamoDB Local: shard leases and takeovers.

The lease rules on DynamoDB's conditional writes; each shard read by one consumer at a time; a
survivor that takes a crashed owner's shard within SG_LEASE_SECONDS; and counts that stay exact
when the takeover lands in the middle of a batch, after the first owner's transaction (a crash) or
before it (a pause, whose late commit the checkpoint fence refuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from counters.applier import chunk_changes
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.entrypoints.counters import CountersRuntime, build_counters
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams import leases
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.leases import Renewal, ShardLeases
from tests.support.figures import Record
from tests.support.polling import eventually
from tests.support.runtimes import run_built
from tests.support.scrape import scrape
from tests.support.seeding import seed_follows
from tests.support.tables import require_streams

LEASE_SECONDS = 2.0
PAIRS = [(7000 + i, 8000 + i) for i in range(24)]  # distinct users: 3 follows a transaction below
Counts = dict[int, tuple[int, int]]


def counts_of(pairs: Sequence[tuple[int, int]]) -> Counts:
    followers, following = Counter(b for _, b in pairs), Counter(a for a, _ in pairs)
    return {u: (followers[u], following[u]) for u in sorted({u for pair in pairs for u in pair})}


async def stored_counts(settings: Settings, users: list[int]) -> Counts:
    dynamo = AsyncDynamo.build(settings)
    try:
        stored = await DynamoCounterTable(dynamo, TableNames(settings.table_prefix)).read_counts(users)
    finally:
        dynamo.close()
    return {u: (c.followers, c.following) for u, c in stored.items()}


async def owners(settings: Settings) -> list[str | None]:
    """The lease owner of each shard of the counters' checkpoints."""
    dynamo = AsyncDynamo.build(settings)
    try:
        checkpoints = await CheckpointStore(
            dynamo, TableNames(settings.table_prefix), settings.counters_consumer_name
        ).load_all()
    finally:
        dynamo.close()
    return [c.owner for c in checkpoints.values()]


async def lease_metrics(runtime: CountersRuntime) -> tuple[float | None, float | None, float | None]:
    """Leases held, taken over and lost, as the consumer's /metrics reports them."""
    metrics = await scrape(runtime.metrics_port)
    return (
        metrics.value("socialgraph_stream_leases_held", consumer="counters"),
        metrics.value("socialgraph_stream_lease_takeovers_total", consumer="counters"),
        metrics.value("socialgraph_stream_leases_lost_total", consumer="counters"),
    )


@pytest.fixture
def lease_settings(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Short leases; transactions of 3 follows, so every batch commits in several steps; and the
    consumers' lease owners named ``first``, ``second`` in the order they start reading."""
    monkeypatch.setattr("counters.consumer.chunk_changes", functools.partial(chunk_changes, max_users=6))
    names = iter(["first", "second", "third"])
    monkeypatch.setattr(leases, "owner_id", lambda: next(names))
    return replace(settings, lease_seconds=LEASE_SECONDS)


# -- the rules, on DynamoDB's conditional writes ------------------------------------------------------


async def test_leases_follow_their_rules_and_never_touch_the_checkpoint(settings: Settings) -> None:
    """One owner at a time; an expired lease may be taken; only the owner renews or releases; a done
    shard is taken by nobody until a rewind; checkpoint moves and lease writes leave each other alone."""
    settings = replace(settings, lease_seconds=LEASE_SECONDS)
    dynamo = AsyncDynamo.build(settings)
    skew = [0.0]  # how far ahead the second owner's clock runs
    tables = TableNames(settings.table_prefix)
    first = ShardLeases(dynamo, tables, "counters", lease_seconds=LEASE_SECONDS, owner="first")
    second = ShardLeases(
        dynamo, tables, "counters", lease_seconds=LEASE_SECONDS, owner="second", clock=lambda: time.time() + skew[0]
    )
    checkpoints = CheckpointStore(dynamo, tables, "counters")
    try:
        assert await first.acquire("s")
        assert await first.acquire("s")  # already its own
        assert not await second.acquire("s")
        assert await second.renew("s") is None
        assert not await second.release("s")
        await checkpoints.advance("s", None, "100", produced={0: 7})
        assert await first.renew("s") == Renewal(sequence="100")
        stored = await checkpoints.load("s")
        assert (stored.sequence, stored.produced, stored.owner) == ("100", {0: 7}, "first")

        skew[0] = first.timing.grant_seconds + 0.5  # as if the first owner had died a lease ago
        assert await second.acquire("s")
        assert await first.renew("s") is None  # it finds the shard taken
        assert not await first.release("s")
        assert await second.release("s")
        stored = await checkpoints.load("s")
        assert (stored.sequence, stored.owner) == ("100", None)

        await checkpoints.mark_done("s", "100")
        assert not await first.acquire("s")  # finished: nobody reads it again ...
        assert await checkpoints.rewind("s")
        assert await first.acquire("s")  # ... unless a rewind makes it readable again
        assert await first.renew("s") == Renewal(sequence=None)  # the rewind, as a renewal sees it
        assert (await checkpoints.load("s")).owner == "first"
    finally:
        dynamo.close()


# -- two consumers ----------------------------------------------------------------------------------


@pytest.mark.streams
async def test_a_survivor_takes_a_crashed_owners_shard_within_the_lease_and_counts_exactly(
    lease_settings: Settings, figures: Record
) -> None:
    """The first consumer commits one transaction of a batch and dies (its task cancelled, nothing
    released: kill -9). Until then the second reads nothing; then it owns the shard and counts the
    rest of the batch: every follow counted once. How long the takeover took is the figure
    ``takeover_s`` (at most 0.8 of SG_LEASE_SECONDS by design, plus the calls: the timing rule
    itself is ``tests/unit/streams/test_leases.py``'s; no test here asserts a time)."""
    settings = lease_settings
    await require_streams(settings, FOLLOWERS)
    await seed_follows(settings, PAIRS)
    first = await build_counters(settings)
    crashed = asyncio.Event()
    repair = first.repairer.repair

    async def repair_then_die(*args: Any) -> None:
        await repair(*args)  # after the chunk's transaction
        crashed.set()
        await asyncio.Event().wait()  # the process is gone: nothing more of it runs

    first.repairer.repair = repair_then_die  # type: ignore[method-assign]  # the crash, in place
    first_task = asyncio.create_task(first.run(asyncio.Event()))
    try:
        await asyncio.wait_for(crashed.wait(), timeout=30)
        second = await build_counters(settings)
        async with run_built(second):
            await asyncio.sleep(LEASE_SECONDS)  # a whole lease: the stuck owner still renews, the second waits
            assert await owners(settings) == ["first"]
            assert second.consumer.applied_changes == 0
            assert await lease_metrics(second) == (0, 0, 0)
            killed_at = time.monotonic()
            first_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first_task
            await eventually(lambda: owners(settings), lambda o: o == ["second"], interval=0.05)
            figures("takeover_s", time.monotonic() - killed_at)
            expected = counts_of(PAIRS)
            await eventually(lambda: stored_counts(settings, sorted(expected)), lambda got: got == expected)
            assert first.consumer.applied_changes == 3  # one transaction
            # The rest, nothing twice (the exact counts above). The second counted at most the rest:
            # on a loaded machine one of its renewals can come late, its shard task is stopped while
            # a transaction is on boto's thread, and that transaction lands uncounted by the task.
            assert 0 < second.consumer.applied_changes <= len(PAIRS) - 3
            held, takeovers, _ = await lease_metrics(second)
            assert held == 1
            assert (takeovers or 0) >= 1
    finally:
        first_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        await first.aclose()


@pytest.mark.streams
async def test_an_owner_paused_before_its_transaction_loses_the_shard_and_its_late_commit_is_refused(
    lease_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first consumer stops in the middle of a batch, before its transaction, renewals and all
    (a paused process). The second takes the shard once the lease runs out and counts the batch.
    The first then wakes: its commit is refused by the checkpoint fence (it counts nothing), and
    its next renewal tells it the shard is gone."""
    settings = lease_settings
    await require_streams(settings, FOLLOWERS)
    paused, batch_resumes, renewals_resume = asyncio.Event(), asyncio.Event(), asyncio.Event()
    renew = ShardLeases.renew

    async def renew_unless_paused(self: ShardLeases, shard_id: str) -> Renewal | None:
        if self.owner == "first" and paused.is_set():
            await renewals_resume.wait()
        return await renew(self, shard_id)

    monkeypatch.setattr(ShardLeases, "renew", renew_unless_paused)
    await seed_follows(settings, PAIRS[:10])
    first = await build_counters(settings)
    handle = first.consumer.handle
    entered, finished = asyncio.Event(), asyncio.Event()

    async def handle_unless_paused(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        if not paused.is_set():
            return await handle(shard_id, records, committed)
        entered.set()
        await batch_resumes.wait()
        try:
            return await handle(shard_id, records, committed)
        finally:
            finished.set()

    first.consumer.handle = handle_unless_paused  # type: ignore[method-assign]  # the pause, in place
    async with run_built(first):
        await eventually(lambda: asyncio.sleep(0, first.consumer.applied_changes), lambda n: n == 10)
        second = await build_counters(settings)
        async with run_built(second):
            paused.set()
            await seed_follows(settings, PAIRS[10:])
            await asyncio.wait_for(entered.wait(), timeout=30)
            await eventually(lambda: owners(settings), lambda o: o == ["second"])
            expected = counts_of(PAIRS)
            await eventually(lambda: stored_counts(settings, sorted(expected)), lambda got: got == expected)
            assert 0 < second.consumer.applied_changes <= len(PAIRS) - 10  # see the test above

            batch_resumes.set()  # the first wakes with its stale position and commits
            await asyncio.wait_for(finished.wait(), timeout=30)
            assert first.consumer.applied_changes == 10  # refused: nothing of the batch counted twice
            renewals_resume.set()
            assert await eventually(lambda: lease_metrics(first), lambda m: m[2] == 1) == (0, 0, 1)
            # On a loaded machine a renewal of the second's can come late and its lease be taken again.
            _, takeovers, _ = await eventually(lambda: lease_metrics(second), lambda m: m[0] == 1)
            assert (takeovers or 0) >= 1
            assert await stored_counts(settings, sorted(expected)) == expected
            assert await owners(settings) == ["second"]
