"""Fault table, row 3: Redis down under mixed load. ``serve`` runs as a process of its own with the
production Redis timeout (0.25 s) while writers toggle follows and readers read follow states,
lists and counts; Redis goes down twice, once hung (SIGSTOP: nothing answers, every entry stays in
memory) and once killed (``kill -9``) and started again from a snapshot taken just before, which
brings back every entry as it was then. No call fails; every writer reads its own write back, during the outage too;
the invalidations the server owes are delivered once Redis is back; afterwards no answer and no
Redis entry contradicts DynamoDB.

No counters consumer runs: it too drops the entries of every edge it sees, which would hide a
server that failed to pay its debt (the stale-dump tests of ``tests/integration/cache/
test_redis_outage.py`` make the same choice, for single writes without load).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from graph_service.cache import keys
from graph_service.settings import Settings
from tests.support.children import Child, serve_process
from tests.support.figures import Record
from tests.support.graph_calls import (
    Pair,
    Stub,
    Toggler,
    all_counts,
    check_round,
    is_following,
    read_storm,
    truth_stub,
)
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, stub_for
from tests.support.servers import OwnRedis
from tests.support.tables import create_tables

pytestmark = pytest.mark.faults

USERS = list(range(1, 9))
PAIRS = [(a, b) for a in USERS for b in USERS if a != b]
WRITERS = 6
READERS = 6
OUTAGE_SECONDS = 2.0
LOAD_SECONDS = 0.5


@pytest.fixture
async def settings(dynamodb_local: str, own_redis: OwnRedis) -> Settings:
    """Fresh tables (no streams: no consumer runs) and this test's own Redis as the cache."""
    value = make_settings(dynamodb_local, own_redis.url)
    await create_tables(value, streams=False)
    return value


async def cache_debt(serve: Child) -> tuple[float, float]:
    """(owed invalidations, breaker open) as ``serve``'s /metrics says."""
    metrics = await serve.metrics()
    owed = metrics.value("socialgraph_cache_owed_invalidations")
    breaker = metrics.value("socialgraph_cache_breaker_open")
    assert owed is not None
    assert breaker is not None
    return owed, breaker


@contextlib.asynccontextmanager
async def mixed_load(serve: Child, toggler: Toggler) -> AsyncIterator[list[asyncio.Task[int]]]:
    """Writers (each writes, then reads its write back) and readers, until the block ends; a call
    that fails fails the test when the block ends."""
    stop = asyncio.Event()

    async def write(seed: int) -> int:
        rng = random.Random(seed)
        writes = 0
        async with stub_for(serve.port) as stub:
            while not stop.is_set():
                await toggler.writer(stub, rng, 4)
                writes += 4
        return writes

    tasks = [asyncio.create_task(write(seed)) for seed in range(WRITERS)]
    tasks += [asyncio.create_task(read_storm(serve.port, PAIRS, stop, 100 + seed)) for seed in range(READERS)]
    try:
        yield tasks
    finally:
        stop.set()
        await asyncio.gather(*tasks)


@contextlib.contextmanager
def hung(redis: OwnRedis) -> Iterator[None]:
    os.kill(redis.process.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(redis.process.process.pid, signal.SIGCONT)


@contextlib.contextmanager
def killed_after_a_snapshot(redis: OwnRedis) -> Iterator[None]:
    """SAVE, then ``kill -9``: started again, Redis loads the snapshot, every entry as it was just
    before the crash (the writes made while it was down invalidated nothing in it)."""
    with redis.client() as client:
        client.save()
    redis.process.process.kill()
    redis.process.process.wait(timeout=10)
    try:
        yield
    finally:
        redis.restart()


async def outage(serve: Child, down: Callable[[], contextlib.AbstractContextManager[None]]) -> float:
    """Redis down for ``OUTAGE_SECONDS`` (the server must come to owe invalidations meanwhile), then
    back; the seconds until the server has delivered every owed invalidation and trusts the cache."""
    with down():
        await eventually(lambda: cache_debt(serve), lambda debt: debt[0] > 0, timeout=10)
        await asyncio.sleep(OUTAGE_SECONDS)  # the outage's length, under load; not a wait for anything
    back = time.monotonic()
    await eventually(lambda: cache_debt(serve), lambda debt: debt == (0, 0), timeout=20)
    return time.monotonic() - back


async def test_redis_down_under_mixed_load_fails_no_call_and_leaves_nothing_stale(
    settings: Settings, own_redis: OwnRedis, tmp_path: Path, figures: Record
) -> None:
    """Scale: 6 writers and 6 readers over the 56 pairs of 8 users; Redis hung for 2 s, then
    killed and started from its snapshot after 2 s (the issue's run: 20 s down). Every call
    succeeds and no writer misses its own write; each time Redis is back the owed invalidations
    are delivered within 20 s (the figures ``delivered_after_*_s``); then IsFollowing of every
    pair, both first list pages of every user and GetCounts agree with a server without cache,
    and every Redis entry agrees with DynamoDB."""
    serialized: list[Pair] = PAIRS[::2]
    toggler = Toggler(serialized=serialized, contended=PAIRS[1::2], stale=[])
    # The follow rate limit's ledger stays in play (it fails open while Redis is down) but never refuses.
    async with serve_process(settings, tmp_path, SG_FOLLOW_RATE_LIMIT="1000000") as serve:
        async with mixed_load(serve, toggler) as load:
            await asyncio.sleep(LOAD_SECONDS)  # the cache fills under load before the first outage
            delivered_after_hang = await outage(serve, lambda: hung(own_redis))
            await asyncio.sleep(LOAD_SECONDS)
            delivered_after_restart = await outage(serve, lambda: killed_after_a_snapshot(own_redis))
            await asyncio.sleep(LOAD_SECONDS)  # served from the cache again, under load
        calls = sum(task.result() for task in load)
        assert toggler.stale == []
        await eventually(lambda: _trusted(own_redis), bool, timeout=20)  # the restarted Redis emptied and trusted again
        async with stub_for(serve.port) as cached, truth_stub(settings) as truth:
            await check_round(cached, truth, settings, USERS, min_checked=len(USERS))
            assert await all_counts(cached, USERS) == await all_counts(truth, USERS)
            await assert_cache_used(serve, cached)
    figures("calls_under_load", calls)
    figures("delivered_after_hang_s", delivered_after_hang)
    figures("delivered_after_restart_s", delivered_after_restart)


async def assert_cache_used(serve: Child, stub: Stub) -> None:
    """The server reads the cache again: IsFollowing of a pair read a moment ago is a hit (polled:
    on a loaded machine a Redis reply slower than 0.25 s opens the breaker for a second)."""

    async def follow_state_hits() -> float:
        hits = (await serve.metrics()).value("socialgraph_cache_hits_total", kind="follow_state")
        assert hits is not None
        return hits

    before = await follow_state_hits()

    async def hits_after_reads() -> float:
        for pair in PAIRS[:4]:
            assert await is_following(stub, pair) == await is_following(stub, pair)
        return await follow_state_hits()

    await eventually(hits_after_reads, lambda hits: hits > before, timeout=10)


async def _trusted(own_redis: OwnRedis) -> bool:
    with own_redis.client() as client:
        return client.get(keys.TRUST_GENERATION) is not None
