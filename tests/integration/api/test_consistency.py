"""Consistency of cached reads under concurrency: read-your-writes, exact counts, and cache-fill races."""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import (
    Pair,
    Toggler,
    all_counts,
    assert_cache_agrees,
    batch_counts,
    check_round,
    counts_of,
    is_following,
    storm,
    truth_edges,
    truth_stub,
    write,
)
from tests.support.polling import eventually
from tests.support.runtimes import running_counters, stub_for


async def test_is_following_reads_your_writes_across_concurrent_clients(
    server: ServerRuntime, settings: Settings
) -> None:
    """Six concurrent clients each read back exactly what they just wrote, and a fresh client sees every last write."""
    users = list(range(1, 5))
    pairs = [(a, b) for a in users for b in users if a != b]
    clients = 6
    # 96 writes (16 per client, about 8 per pair) with 4 readers and the evictor racing them: every pair is
    # toggled many times under cache fills; more writes or readers only repeat the same races.
    writes = 96
    rng = random.Random(1234)
    plans: list[list[tuple[Pair, bool]]] = []
    for c in range(clients):
        owned = pairs[c::clients]  # each pair has exactly one writer
        size = writes // clients + (1 if c < writes % clients else 0)
        plans.append([(rng.choice(owned), rng.random() < 0.55) for _ in range(size)])
    assert sum(len(p) for p in plans) == writes
    last: dict[Pair, bool] = {}
    mismatches: list[tuple[Pair, bool, bool]] = []

    async def client(plan: list[tuple[Pair, bool]]) -> None:
        async with stub_for(server.port) as stub:
            for pair, follow in plan:
                await write(stub, pair, follow)
                seen = await is_following(stub, pair)
                if seen != follow:
                    mismatches.append((pair, follow, seen))
                last[pair] = follow

    writers = (client(plan) for plan in plans)
    reads, evicted = await storm(settings, server.port, pairs, writers, reader_seeds=range(4), evict_seed=7)
    assert mismatches == []
    assert sum(reads) > 0
    assert evicted > 0

    async with stub_for(server.port) as fresh:
        assert {p: await is_following(fresh, p) for p in last} == last
    async with truth_stub(settings) as truth:
        assert {p: await is_following(truth, p) for p in last} == last


async def test_counts_are_exact_after_a_random_burst_with_duplicates(
    server: ServerRuntime, settings: Settings, counters: asyncio.Task[None]
) -> None:
    """After 120 random follows and unfollows (many repeated), every user's counts equal the true edge counts."""
    # 24 users, 75 pairs, 120 writes over 16 lanes: pairs repeat and users share many edges, which is
    # all the rule needs; larger sizes only make the burst and the checks longer.
    users = list(range(101, 125))
    rng = random.Random(2024)
    pool = rng.sample([(a, b) for a in users for b in users if a != b], 75)
    ops = [(rng.choice(pool), rng.random() < 0.6) for _ in range(120)]
    lanes: list[list[tuple[Pair, bool]]] = [[] for _ in range(16)]
    for pair, follow in ops:
        lanes[pool.index(pair) % 16].append((pair, follow))  # one lane per pair: the final state is known
    model: dict[Pair, bool] = {}
    for pair, follow in ops:
        model[pair] = follow
    model_edges = {p for p, following in model.items() if following}
    assert len(model) < len(ops)  # the burst repeats pairs

    async def lane(plan: list[tuple[Pair, bool]]) -> None:
        async with stub_for(server.port) as stub:
            for pair, follow in plan:
                await write(stub, pair, follow)

    await asyncio.gather(*(lane(plan) for plan in lanes))

    async with truth_stub(settings) as truth:
        edges = await truth_edges(truth, users)
        assert set(edges) == model_edges
        assert {p: await is_following(truth, p) for p in pool} == {p: p in model_edges for p in pool}
    expected = counts_of(model_edges, users)
    assert expected == counts_of(set(edges), users)

    async with stub_for(server.port) as stub:
        await eventually(lambda: all_counts(stub, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(stub, users) == expected
        async with truth_stub(settings) as truth:
            assert await batch_counts(truth, users) == expected


@pytest.mark.streams
async def test_cache_fill_races_leave_no_stale_entry(server: ServerRuntime, settings: Settings) -> None:
    """Readers filling the cache while writers toggle the same edges leave every cached answer equal to DynamoDB."""
    users = [1, 2, 3, 4]
    serialized = [(1, 2), (3, 2), (4, 1)]  # several writers, one at a time, each checking its own write
    contended = [(2, 1), (1, 3), (2, 4)]  # several writers at once
    # Two rounds (the second starts from the cache the first round's checks filled) of 4 writers making
    # 8 writes each against 4 readers: more writes or readers only repeat the same races for better odds.
    writers, rounds, writes_each, readers = 4, 2, 8, 4
    stale: list[str] = []
    toggler = Toggler(serialized, contended, stale)

    rngs = [random.Random(seed) for seed in range(writers)]
    async with contextlib.AsyncExitStack() as stack:
        stubs = [await stack.enter_async_context(stub_for(server.port)) for _ in range(writers)]
        cached = await stack.enter_async_context(stub_for(server.port))
        truth = await stack.enter_async_context(truth_stub(settings))
        for round_no in range(rounds):
            reads, evicted = await storm(
                settings,
                server.port,
                serialized + contended,
                (toggler.writer(stub, rng, writes_each) for stub, rng in zip(stubs, rngs, strict=True)),
                reader_seeds=range(100 * round_no, 100 * round_no + readers),
                evict_seed=round_no,
            )
            assert sum(reads) > 0
            assert evicted > 0
            assert stale == []
            # No counters consumer runs yet, so nothing repairs what the service itself may have left stale.
            edges = await check_round(cached, truth, settings, users)

        # Counters follow the stream: within a deadline, cached counts equal the true edge counts.
        expected = counts_of(set(edges), users)
        async with running_counters(settings):
            await eventually(lambda: all_counts(cached, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(cached, users) == expected
        assert await check_round(cached, truth, settings, users) == edges
        assert await assert_cache_agrees(settings, edges, users, with_counts=True) > 0
