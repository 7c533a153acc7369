"""The counters consumer under crashes, replays and large batches, against DynamoDB Local and Redis."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_devstack.processes import ManagedProcess, free_port, start_redis

from counters.applier import CounterApplier, chunk_changes
from counters.consumer import CountersConsumer
from counters.repairs import CacheRepairer
from graph_service.domain.fences import EventMarkers
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, USERS, TableNames
from graph_service.entrypoints.components import build_graph_cache
from graph_service.entrypoints.counters import build_counters
from graph_service.settings import Settings
from graph_service.store.changes import EdgeChange
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import stream_arn
from tests.support.graph_calls import cached_counts
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.seeding import seed_follows
from tests.support.tables import create_tables

pytestmark = pytest.mark.streams  # every test here reads the followers table's stream
REPO = Path(__file__).resolve().parents[3]
Expected = dict[int, tuple[int, int]]


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
async def settings(dynamodb_local: str, redis_url: str) -> Settings:
    """Fresh tables and a flushed Redis, with a Redis timeout no loaded test machine reaches.

    The crash tests here are about counting; a slow Redis must not turn them into outage tests.
    """
    value = make_settings(dynamodb_local, redis_url, redis_timeout_seconds=5.0)
    await create_tables(value, streams=True)
    return value


class Graph:
    """The test's own model of which edges exist, updated only after the service acknowledged."""

    def __init__(self) -> None:
        self.edges: set[tuple[int, int]] = set()
        self.users: set[int] = set()

    def expected(self) -> Expected:
        followers = Counter(t for _, t in self.edges)
        following = Counter(f for f, _ in self.edges)
        return {u: (followers[u], following[u]) for u in sorted(self.users)}


async def toggle_edges(
    stub: pb_grpc.SocialGraphServiceStub,
    graph: Graph,
    pairs: list[tuple[int, int]],
    rng: random.Random,
    stop: asyncio.Event,
    max_ops: int,
) -> int:
    """Follow or unfollow random pairs of this worker's own pool (so the model stays exact)."""
    done = 0
    while not stop.is_set() and done < max_ops:
        follower, followee = rng.choice(pairs)
        graph.users |= {follower, followee}
        if (follower, followee) in graph.edges:
            await stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee))
            graph.edges.discard((follower, followee))
        else:
            for _ in range(rng.choice((1, 1, 2))):  # sometimes a repeated (idempotent) follow
                await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
            graph.edges.add((follower, followee))
        done += 1
    return done


def random_pairs(rng: random.Random, users: int, count: int) -> list[tuple[int, int]]:
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < count:
        follower, followee = rng.sample(range(1, users + 1), 2)
        pairs.add((follower, followee))
    return sorted(pairs)


async def burst(
    stub: pb_grpc.SocialGraphServiceStub,
    graph: Graph,
    rng: random.Random,
    stop: asyncio.Event,
    *,
    users: int = 150,
    workers: int = 6,
    max_ops_per_worker: int = 10_000,
) -> int:
    """Concurrent follows/unfollows until ``stop`` is set; each worker owns a disjoint set of pairs."""
    pairs = random_pairs(rng, users, 80 * workers)
    pools = [pairs[i::workers] for i in range(workers)]
    done = await asyncio.gather(
        *(toggle_edges(stub, graph, pool, random.Random(rng.random()), stop, max_ops_per_worker) for pool in pools)
    )
    return sum(done)


async def service_counts(stub: pb_grpc.SocialGraphServiceStub, users: list[int]) -> Expected:
    found: Expected = {}
    for start in range(0, len(users), 100):
        reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=users[start : start + 100]))
        found.update({c.user_id: (c.followers_count, c.following_count) for c in reply.counts})
    return found


async def table_counts(settings: Settings, users: list[int]) -> Expected:
    """The counters as stored in the users table (strongly consistent read)."""
    dynamo = AsyncDynamo.build(settings)
    try:
        stored = await DynamoCounterTable(dynamo, TableNames(settings.table_prefix)).read_counts(users)
    finally:
        dynamo.close()
    return {u: (c.followers, c.following) for u, c in stored.items()}


async def assert_counts_exact(stub: pb_grpc.SocialGraphServiceStub, settings: Settings, graph: Graph) -> None:
    """GetCounts converges to the true edge counts; DynamoDB and the Redis count hashes agree."""
    expected = graph.expected()
    users = sorted(expected)

    def wrong(got: Mapping[int, tuple[int, int] | None]) -> dict[int, tuple[object, tuple[int, int]]]:
        return {u: (got.get(u), want) for u, want in expected.items() if got.get(u) != want}

    async def table_wrong() -> dict[int, tuple[object, tuple[int, int]]]:
        return wrong(await table_counts(settings, users))

    async def cache_wrong() -> dict[int, tuple[object, tuple[int, int]]]:
        return wrong(await cached_counts(settings, users))

    # Every 0.2 s (a stream poll): each probe reads every user's counters, and the wait covers a consumer's start.
    await eventually(table_wrong, lambda diff: not diff, timeout=30, interval=0.2)
    # The consumer itself puts the absolute values into Redis (before any GetCounts could fill them).
    await eventually(cache_wrong, lambda diff: not diff, timeout=10)
    assert wrong(await service_counts(stub, users)) == {}
    # The edge table agrees with the model too (the model is not fooling itself).
    for user in rng_sample(users, 10):
        listed = await stub.ListFollowers(pb.ListFollowersRequest(user_id=user, page_size=1000))
        assert len(listed.followers) == expected[user][0]


def rng_sample(values: list[int], k: int) -> list[int]:
    return random.Random(len(values)).sample(values, min(k, len(values)))


async def read_stream(settings: Settings, min_edge_records: int) -> tuple[str, list[dict[str, Any]]]:
    """Every record of the followers table's (single) stream shard, once ``min_edge_records`` are there."""
    dynamo = AsyncDynamo.build(settings)
    streams = AsyncDynamo.build(settings, "dynamodbstreams")
    try:
        arn = await stream_arn(dynamo, TableNames(settings.table_prefix), FOLLOWERS)
        shards = (await streams.call("describe_stream", StreamArn=arn))["StreamDescription"]["Shards"]
        assert len(shards) == 1
        shard_id = shards[0]["ShardId"]

        async def read_all() -> list[dict[str, Any]]:
            iterator = (
                await streams.call(
                    "get_shard_iterator", StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )
            )["ShardIterator"]
            records: list[dict[str, Any]] = []
            while iterator:
                response = await streams.call("get_records", ShardIterator=iterator, Limit=1000)
                if not response["Records"]:
                    break
                records += response["Records"]
                iterator = response.get("NextShardIterator")
            return records

        def edge_records(records: list[dict[str, Any]]) -> int:
            return sum(r["dynamodb"]["Keys"]["sk"]["S"].startswith("E#") for r in records)

        records = await eventually(read_all, lambda r: edge_records(r) >= min_edge_records)
        return shard_id, records
    finally:
        dynamo.close()
        streams.close()


@contextlib.asynccontextmanager
async def counters_consumer(settings: Settings) -> AsyncIterator[CountersConsumer]:
    """The stream handler of the counters consumer, wired as ``build_counters`` wires it."""
    dynamo = AsyncDynamo.build(settings)
    tables = TableNames(settings.table_prefix)
    applier = CounterApplier(DynamoCounterTable(dynamo, tables))
    cache = build_graph_cache(settings)
    repairer = CacheRepairer(cache, applier)
    try:
        yield CountersConsumer(applier, CheckpointStore(dynamo, tables, settings.counters_consumer_name), repairer)
    finally:
        await repairer.aclose()
        if cache is not None:
            await cache.aclose()
        dynamo.close()


async def follow_all(stub: pb_grpc.SocialGraphServiceStub, graph: Graph, pairs: list[tuple[int, int]]) -> None:
    semaphore = asyncio.Semaphore(16)

    async def follow(follower: int, followee: int) -> None:
        async with semaphore:
            await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
        graph.edges.add((follower, followee))
        graph.users |= {follower, followee}

    await asyncio.gather(*(follow(f, t) for f, t in pairs))


async def seed_all(settings: Settings, graph: Graph, pairs: list[tuple[int, int]]) -> None:
    """The follows written straight into the tables (``tests/support/seeding.py``), as a backlog for
    the consumer: the same items, so the same stream records, as ``Follow`` writes, at a fraction of
    the cost of 150 transactions through the server."""
    await seed_follows(settings, pairs)
    graph.edges |= set(pairs)
    graph.users |= {u for pair in pairs for u in pair}


# -- crash and restart -----------------------------------------------------------------------


KILLS = 3
"""Incarnations of the consumer cancelled, each at a random moment after its first commit."""


async def test_consumer_cancelled_at_random_moments_counts_every_edge_exactly_once(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling the consumer task between and inside batches while writes go on never double counts."""
    # Small transactions (3 edges each), so every batch commits in several steps a cancellation can split.
    monkeypatch.setattr("counters.consumer.chunk_changes", functools.partial(chunk_changes, max_users=6))
    rng = random.Random(20240611)
    graph = Graph()
    stop_writes = asyncio.Event()
    # A backlog of 90 follows (seeded: the same stream records as Follow, at a fraction of the cost):
    # the first batch is big.
    await seed_all(settings, graph, random_pairs(rng, 150, 90))
    # Two writers go on through every kill (6 only made more of the same writes); 200 each outlast them.
    writer = asyncio.create_task(burst(stub, graph, rng, stop_writes, workers=2, max_ops_per_worker=200))
    kills = 0
    try:
        while kills < KILLS and not writer.done():
            before = await checkpoints(settings)
            stop = asyncio.Event()
            runtime = await build_counters(settings)
            task = asyncio.create_task(runtime.run(stop))

            async def progress(task: asyncio.Task[None] = task) -> dict[str, str | None]:
                if task.done():
                    task.result()  # a consumer that died by itself fails the test
                return await checkpoints(settings)

            try:
                # Once this incarnation has committed something, kill it a random moment later.
                await eventually(progress, lambda now, before=before: now != before or writer.done(), timeout=30)
                await asyncio.sleep(rng.uniform(0.0, 0.25))  # fault injection
            finally:
                task.cancel()
                stop.set()  # a backstop only: the cancellation is what lands mid-batch
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=30)
                await runtime.aclose()
            kills += 1
    finally:
        stop_writes.set()
        await writer
    assert kills == KILLS  # the writes outlasted every kill
    assert graph.edges
    async with running_counters(settings):
        await assert_counts_exact(stub, settings, graph)


def consumer_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "SG_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_REDIS_URL": settings.redis_url,
        "SG_REDIS_TIMEOUT_SECONDS": str(settings.redis_timeout_seconds),
        "SG_STREAM_POLL_SECONDS": str(settings.stream_poll_seconds),
        "SG_SHARD_REFRESH_SECONDS": str(settings.shard_refresh_seconds),
        "SG_LEASE_SECONDS": str(settings.lease_seconds),  # a restarted consumer waits for its old leases
        "SG_LOG_LEVEL": "warning",
    }


async def start_consumer_process(settings: Settings, log_path: Path) -> asyncio.subprocess.Process:
    with log_path.open("ab") as log_file:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "graph_service",
            "counters",
            env=consumer_env(settings),
            cwd=REPO,
            stdout=log_file,
            stderr=log_file,
        )


async def checkpoints(settings: Settings) -> dict[str, str | None]:
    dynamo = AsyncDynamo.build(settings)
    try:
        store = CheckpointStore(dynamo, TableNames(settings.table_prefix), settings.counters_consumer_name)
        return {shard: c.sequence for shard, c in (await store.load_all()).items()}
    finally:
        dynamo.close()


SIGNALS = (signal.SIGKILL, signal.SIGTERM)
"""One incarnation killed, the next stopped (each a random moment after its first commit), and a
third counts what is left: the in-process test above covers many cancellations at random points."""


async def test_consumer_process_killed_during_a_burst_counts_every_edge_exactly_once(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings, tmp_path: Path
) -> None:
    """SIGKILL or SIGTERM to `graph_service counters` mid-burst, then a restart, leaves the counts exact."""
    rng = random.Random(777)
    graph = Graph()
    log_path = tmp_path / "counters.log"
    stop_writes = asyncio.Event()
    # A backlog of 90 follows (seeded: the same stream records as Follow, at a fraction of the cost):
    # the first batch is big.
    await seed_all(settings, graph, random_pairs(rng, 150, 90))
    # A writer goes on through both signals (6 only made more of the same writes); 200 writes outlast them.
    writer = asyncio.create_task(burst(stub, graph, rng, stop_writes, workers=1, max_ops_per_worker=200))
    outcomes: list[tuple[str, int | None]] = []
    try:
        for sig in SIGNALS:
            if writer.done():
                break
            before = await checkpoints(settings)
            process = await start_consumer_process(settings, log_path)
            try:
                # Signal only once this incarnation has committed something, at a random moment after.
                # Polled every 0.1 s (not 0.05): the wait covers a process start, and the kill is random anyway.
                await eventually(
                    lambda: checkpoints(settings),
                    lambda now, b=before: now != b or writer.done(),
                    timeout=30,
                    interval=0.1,
                )
                await asyncio.sleep(rng.uniform(0.0, 0.3))  # fault injection
                process.send_signal(sig)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), timeout=20)
                outcomes.append((sig.name, process.returncode))
            finally:
                if process.returncode is None:  # it ignored SIGTERM: the test fails below
                    process.kill()
                    await process.wait()
    finally:
        stop_writes.set()
        await writer
    # SIGKILL kills; SIGTERM stops cleanly even in the middle of a batch (exit 0 within the timeout).
    expected = [("SIGKILL", -signal.SIGKILL), ("SIGTERM", 0)]
    assert outcomes == expected, log_path.read_text()[-3000:]
    process = await start_consumer_process(settings, log_path)
    try:
        await assert_counts_exact(stub, settings, graph)
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), timeout=20)
    assert code == 0, log_path.read_text()[-3000:]


# -- replays and large batches ---------------------------------------------------------------


async def test_replayed_batch_with_stale_committed_position_is_counted_once(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings
) -> None:
    """Handling the same records again from a stale position (crash after commit) changes nothing."""
    graph = Graph()
    pairs = [(f, t) for f in range(1, 8) for t in range(1, 8) if f != t and (f + t) % 3]
    await follow_all(stub, graph, pairs)
    for follower, followee in pairs[::4]:
        await stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee))
        graph.edges.discard((follower, followee))
    shard_id, records = await read_stream(settings, len(pairs) + len(pairs[::4]))
    async with counters_consumer(settings) as consumer:
        committed = await consumer.handle(shard_id, records, None)
        assert committed == records[-1]["dynamodb"]["SequenceNumber"]
        assert await consumer.handle(shard_id, records, None) == committed
        assert await consumer.handle(shard_id, records[: len(records) // 2], None) == committed
        assert consumer.applied_changes == len(pairs) + len(pairs[::4])
    assert await table_counts(settings, sorted(graph.users)) == graph.expected()
    assert await service_counts(stub, sorted(graph.users)) == graph.expected()


async def test_batch_of_many_distinct_users_replayed_after_partial_commit_is_counted_exactly(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings
) -> None:
    """150 follows of 300 distinct users in one batch span several transactions; a replay after a crash adds nothing."""
    graph = Graph()
    pairs = [(10_000 + i, 20_000 + i) for i in range(150)] + [(10_000 + i, 30_000) for i in range(0, 150, 3)]
    await seed_all(settings, graph, pairs)
    shard_id, records = await read_stream(settings, len(pairs))
    async with counters_consumer(settings) as consumer:
        # A crash after the first chunks committed: the process restarts from the stale position.
        partial = await consumer.handle(shard_id, records[: len(records) // 3], None)
        assert partial is not None
        committed = await consumer.handle(shard_id, records, None)
        assert committed == records[-1]["dynamodb"]["SequenceNumber"]
        assert await consumer.handle(shard_id, records, partial) == committed
        assert consumer.applied_changes == len(pairs)
    assert await table_counts(settings, sorted(graph.users)) == graph.expected()
    assert await service_counts(stub, [30_000, 10_000, 20_149]) == {30_000: (50, 0), 10_000: (0, 2), 20_149: (1, 0)}


async def test_backlog_of_many_distinct_users_is_counted_exactly_by_the_running_consumer(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings
) -> None:
    """A stream backlog of 150 follows between distinct users, read in one batch, is counted exactly."""
    graph = Graph()
    await seed_all(settings, graph, [(40_000 + i, 50_000 + i) for i in range(150)])
    async with running_counters(settings):
        await assert_counts_exact(stub, settings, graph)


# -- never negative --------------------------------------------------------------------------


async def test_removal_of_an_edge_never_counted_leaves_counts_at_zero(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings
) -> None:
    """Applying a REMOVE for an edge that was never counted clamps at zero; a later INSERT counts one."""
    removed = EdgeChange(follower_id=61, followee_id=62, at_us=1, added=False, sequence="1", event_id="r1")
    dynamo = AsyncDynamo.build(settings)
    try:
        applier = CounterApplier(DynamoCounterTable(dynamo, TableNames(settings.table_prefix)))
        no_fence = EventMarkers("test", (), 0)
        new = await applier.apply([removed, removed], no_fence)
        assert {u: (c.followers, c.following) for u, c in new.items()} == {61: (0, 0), 62: (0, 0)}
        assert await table_counts(settings, [61, 62]) == {61: (0, 0), 62: (0, 0)}
        assert await service_counts(stub, [61, 62]) == {61: (0, 0), 62: (0, 0)}
        added = EdgeChange(follower_id=61, followee_id=62, at_us=2, added=True, sequence="2", event_id="a1")
        await applier.apply([added], no_fence)
        stored = await dynamo.call(
            "get_item", TableName=settings.table(USERS), Key={"user_id": {"N": "62"}}, ConsistentRead=True
        )
    finally:
        dynamo.close()
    assert stored["Item"]["followers_count"] == {"N": "1"}  # not -1 + 1 = 0: the removal was clamped
    assert await table_counts(settings, [61, 62]) == {61: (0, 1), 62: (1, 0)}


async def test_stream_removals_without_their_inserts_never_drive_counts_negative(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings
) -> None:
    """A consumer that only ever sees the REMOVE records of a follow/unfollow keeps every count at zero."""
    graph = Graph()
    await follow_all(stub, graph, [(71, 72), (73, 72), (72, 71)])
    for follower, followee in sorted(graph.edges):
        await stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee))
    shard_id, records = await read_stream(settings, 6)
    removals = [r for r in records if r["eventName"] == "REMOVE"]
    assert len(removals) == 6  # the membership and the ordering item of each edge
    async with counters_consumer(settings) as consumer:
        await consumer.handle(shard_id, removals, None)
    zero = {71: (0, 0), 72: (0, 0), 73: (0, 0)}
    assert await table_counts(settings, [71, 72, 73]) == zero
    assert await service_counts(stub, [71, 72, 73]) == zero


# -- the Redis count cache after an outage ---------------------------------------------------


@pytest.fixture
async def paused_redis_settings(dynamodb_local: str, tmp_path: Path) -> AsyncIterator[tuple[Settings, int]]:
    """Fresh tables and a Redis of this test's own (so it can be paused with SIGSTOP)."""
    proc = start_redis(free_port(), tmp_path / "logs", tmp_path / "redis")
    try:
        value = make_settings(dynamodb_local, f"redis://127.0.0.1:{proc.port}/0")
        await create_tables(value, streams=True)
        yield value, proc.process.pid
    finally:
        os.kill(proc.process.pid, signal.SIGCONT)
        proc.stop()


async def test_count_cache_is_repaired_with_absolute_values_after_a_redis_outage(
    paused_redis_settings: tuple[Settings, int],
) -> None:
    """Counts committed while Redis was unreachable reach the Redis count hashes of all 120 users once it is back."""
    settings, redis_pid = paused_redis_settings
    graph = Graph()
    async with running_server(settings) as server, stub_for(server.port) as stub:
        # 60 follows of 120 distinct users: two chunks (at most 90 users each), each repaired once Redis is back.
        await seed_all(settings, graph, [(80_000 + i, 90_000 + i) for i in range(60)])
        users = sorted(graph.users)
        assert set((await service_counts(stub, users)).values()) == {(0, 0)}  # cached, before counting
        os.kill(redis_pid, signal.SIGSTOP)
        try:
            async with running_counters(settings):
                expected = graph.expected()
                await eventually(lambda: table_counts(settings, users), lambda got: got == expected, timeout=30)
                os.kill(redis_pid, signal.SIGCONT)
                await eventually(lambda: cached_counts(settings, users), lambda got: got == expected, timeout=20)
                assert await service_counts(stub, users) == expected
        finally:
            os.kill(redis_pid, signal.SIGCONT)


class CuttableLink:
    """A TCP proxy in front of Redis whose link can be cut: connections reset, new ones refused."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> CuttableLink:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()

    def cut(self) -> None:
        self._cut = True
        for writer in list(self._writers):
            writer.transport.abort()

    def restore(self) -> None:
        self._cut = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}
            for end in (writer, up_writer):
                end.transport.abort()

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.transport.abort()


async def test_counts_committed_while_redis_was_unreachable_reach_the_cache_across_a_consumer_restart(
    stub: pb_grpc.SocialGraphServiceStub, settings: Settings, redis_node: ManagedProcess
) -> None:
    """Counts committed while the consumer could not reach Redis are right in GetCounts after a consumer restart."""
    users = [1, 2, 3, 4]
    assert await service_counts(stub, users) == dict.fromkeys(users, (0, 0))  # now cached
    async with CuttableLink(redis_node.port) as link:
        consumer_settings = replace(settings, redis_url=f"redis://127.0.0.1:{link.port}/0")
        link.cut()
        async with running_counters(consumer_settings):
            for follower, followee in ((1, 2), (3, 4)):  # two batches, so two chunks and two notes
                await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
                await eventually(
                    lambda f=follower, t=followee: table_counts(settings, [f, t]),
                    lambda got, f=follower, t=followee: got == {f: (0, 1), t: (1, 0)},
                )
        link.restore()
        expected = {1: (0, 1), 2: (1, 0), 3: (0, 1), 4: (1, 0)}
        async with running_counters(consumer_settings):
            await eventually(lambda: service_counts(stub, users), lambda got: got == expected, timeout=5)


async def test_consumer_drops_relationship_and_privacy_entries_a_write_left_stale(settings: Settings) -> None:
    """Block, request and privacy writes that bypassed the cache (another replica whose Redis
    write-through failed) are repaired from the stream: the cached server then answers afresh."""
    plain = replace(settings, redis_url="")
    async with (
        running_server(settings) as cached_server,
        stub_for(cached_server.port) as cached,
        running_server(plain) as plain_server,
        stub_for(plain_server.port) as uncached,
    ):

        async def relationship(actor: int, target: int) -> pb.Relationship:
            reply = await cached.GetRelationships(pb.GetRelationshipsRequest(actor_id=actor, target_ids=[target]))
            return reply.relationships[0]

        await relationship(1, 2)  # cached: no relationship at all
        await relationship(3, 4)
        assert (await cached.Follow(pb.FollowRequest(follower_id=5, followee_id=6))).state == (
            pb.FOLLOW_STATE_FOLLOWING
        )  # caches 6 as public
        await uncached.Block(pb.BlockRequest(blocker_id=1, blocked_id=2))
        await uncached.SetPrivacy(pb.SetPrivacyRequest(user_id=4, private=True))
        await uncached.Follow(pb.FollowRequest(follower_id=3, followee_id=4))  # a request
        await uncached.SetPrivacy(pb.SetPrivacyRequest(user_id=6, private=True))
        assert not (await relationship(1, 2)).blocking  # stale until the consumer runs

        async with running_counters(settings):
            await eventually(lambda: relationship(1, 2), lambda r: r.blocking)
            await eventually(lambda: relationship(3, 4), lambda r: r.requested)

            async def follow_six() -> int:
                reply = await cached.Follow(pb.FollowRequest(follower_id=7, followee_id=6))
                await uncached.Unfollow(pb.UnfollowRequest(follower_id=7, followee_id=6))
                return reply.state

            await eventually(follow_six, lambda state: state == pb.FOLLOW_STATE_REQUESTED)
