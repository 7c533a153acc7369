"""Issue 22, point 2: a write acknowledged by one `serve` process while another still answers the
old state. Two `serve` processes on one DynamoDB Local and one Redis of this test's own: A (the
writer) reaches Redis through a freezable TCP proxy (``tests/support/tcp_freeze.py``), B (the
reader) directly. SPEC §3: after ``Follow``/``Unfollow`` returns on any replica, every reader sees
the new state; SPEC §6: with Redis down, reads fall back to DynamoDB and writes still succeed
(slower is fine, wrong is not).

1. The issue's steps: B answers ``false`` (its Redis entries and near cache warm), A's link
   freezes both ways, ``Follow`` on A returns FOLLOWING (after the lease wait), and B answers
   ``true`` from the first read after the acknowledgement on, while the link stays frozen.
2. The same with Redis → A only frozen.
3. Load: A toggles several pairs (and follows a few more once) while B reads each of them
   (``IsFollowing``, ``GetRelationships`` from the followee's side, ``ListFollowing``'s first
   page) in loops: once while A's link is frozen both ways, until B has reset the cache and A has
   written again after that (a replica cut off alone for longer than a lease), once while Redis
   is killed (``kill -9``) and started again empty on the same port, once while Redis is stopped
   (SIGSTOP) for 2 s. A read that started after the acknowledgement of write k must show write
   k's state, unless a later write of that pair was sent before the read returned (then either
   state is right, and the read is not counted). A write that fails is tried again, as a client
   would, until it is acknowledged.

In every phase no read is stale and every write succeeds at its first try. Every phase runs
whatever an earlier one found; the test fails at the end with all of it. The figures (checked
reads, write latencies) are printed (``-s``) and kept in the report's ``user_properties``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import math
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import grpc
import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.cache.keys import TRUST_GENERATION, TRUST_LEASES
from graph_service.cache.lease import lease_seconds_for
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS
from graph_service.settings import Settings
from graph_service.store.cache_leases import DynamoLeaseRegistry
from tests.e2e.test_near_cache import near_hits, tracking
from tests.support.children import Child, serve_process
from tests.support.figures import PREFIX
from tests.support.polling import eventually
from tests.support.runtimes import make_settings
from tests.support.servers import OwnRedis
from tests.support.tables import create_tables, drop_tables
from tests.support.tcp_freeze import Direction, TcpFreeze, tcp_freeze

if TYPE_CHECKING:
    # The async stub type exists only for type checkers; at run time the stub is the generated class.
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

REDIS_TIMEOUT = 0.25  # the children's SG_REDIS_TIMEOUT_SECONDS (the default)
LEASE = lease_seconds_for(REDIS_TIMEOUT)
WRITE_DEADLINE = 20.0  # each write's gRPC deadline: far past the longest lease wait (two leases)
READ_DEADLINE = 10.0
RETRY_FOR = 30.0  # how long a write that failed is tried again (it must end acknowledged)
SETTLE_TIMEOUT = 20.0

TOGGLED = 6
"""Pairs A toggles all along (each read by READERS_PER_PAIR loops of B)."""
QUIET = 6
"""Pairs A follows once before the fault and leaves alone (each read by one loop of B): every read
of them is checked, during the fault too."""
READERS_PER_PAIR = 2
READS_PER_WRITE = 8
"""A pair's next write waits for this many reads started after the last one's acknowledgement (so
most reads are checked, not overlapped by the next write)."""
WRITES_BEFORE = 2  # acknowledged writes of every pair before the fault
WRITES_AFTER = 1  # and after the cache has settled again, of each toggled pair
FREEZE_DEADLINE = 20.0  # the freeze of the load phase lasts until what it waits for, at most this
REDIS_DOWN_SECONDS = 1.0
REDIS_STOPPED_SECONDS = 2.0
OBSERVE_SECONDS = 1.0  # phases 1 and 2: how long B is read after the acknowledgement, link still frozen
MIN_CHECKED = 1000
SLOW_WRITE = 1.0  # a write slower than this is listed in the figures' output
EVENTS = (
    "cache_reset",
    "cache_unsettled_write_waits",
    "cache_lease_failing",
    "cache_lease_renewed",
    "redis_unavailable",
    "redis_invalidations_delivered",
    "store_unavailable",
)


@pytest.fixture
async def settings(dynamodb_local: str, own_redis: OwnRedis) -> AsyncIterator[Settings]:
    """Fresh tables (no streams: no consumer repairs the cache behind the servers' backs) and this
    test's own Redis, which it kills, restarts and stops."""
    value = make_settings(dynamodb_local, own_redis.url)
    await create_tables(value, streams=False)
    yield value
    await drop_tables(value)


# -- what the processes logged ---------------------------------------------------------------------


def events(child: Child) -> list[dict[str, object]]:
    found = []
    for line in child.log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                found.append(entry)
    return found


def counted(child: Child) -> dict[str, int]:
    logged = [str(entry.get("event")) for entry in events(child)]
    return {name: logged.count(name) for name in EVENTS}


def log_lines(child: Child, names: tuple[str, ...] = EVENTS, last: int = 40) -> str:
    """The child's log lines of ``names`` (its last ``last``), for failure messages."""
    lines = [json.dumps(entry) for entry in events(child) if entry.get("event") in names]
    return "\n".join(lines[-last:])


def utc_now() -> str:
    """The wall clock as the children's log lines stamp it."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


# -- the cache settled: both processes hold live leases, nothing owed --------------------------------


@dataclass
class World:
    a: Child
    b: Child
    writes: Stub
    reads: Stub
    link: TcpFreeze
    redis: OwnRedis
    direct: aioredis.Redis
    registry: DynamoLeaseRegistry
    started: float = field(default_factory=time.monotonic)
    problems: list[str] = field(default_factory=list)
    """What went wrong (a stale read, a failed write), in every phase: all are reported at the end."""
    record: Callable[[str, float], None] = lambda name, value: None

    def since(self) -> float:
        return round(time.monotonic() - self.started, 3)

    async def unsettled(self) -> tuple[str, str]:
        """Why the cache is not settled for the next phase yet ('' once it is): Redis holds a
        generation and no expired lease, A and B hold exactly one lease each, A owes nothing and
        its breaker is closed, B's near cache tracks. With the lease A holds."""
        try:
            generation = await self.direct.get(TRUST_GENERATION)
            seconds, micros = await self.direct.time()
            leases = cast("list[tuple[str, float]]", await self.direct.zrange(TRUST_LEASES, 0, -1, withscores=True))
        except (RedisError, OSError) as exc:
            return f"Redis: {exc!r}", ""
        now_ms = seconds * 1000 + micros // 1000
        if generation is None:
            return "no generation", ""
        if expired := [lease for lease, expiry in leases if expiry <= now_ms]:
            return f"expired leases {expired}", ""

        def held_by(child: Child) -> list[str]:
            return [lease for lease, _ in leases if lease.split(":")[-2] == str(child.process.pid)]

        a_leases, b_leases = held_by(self.a), held_by(self.b)
        if len(a_leases) != 1 or len(b_leases) != 1:
            return f"leases A {a_leases}, B {b_leases}", ""
        metrics = await self.a.metrics()
        owed = metrics.value("socialgraph_cache_owed_invalidations")
        breaker = metrics.value("socialgraph_cache_breaker_open")
        if (owed, breaker) != (0, 0):
            return f"A owes {owed}, breaker {breaker}", ""
        if not await tracking(self.b):
            return "B's near cache does not track", ""
        return "", a_leases[0]

    async def settle(self) -> float:
        """Wait until the cache is settled, A's lease live in the store too (else its next unsettled
        write would be refused); how long it took. On a loaded machine the others may revoke a
        lease of A's whose beats they did not see for three leases: A learns it at its next beat and
        takes a new one, which is what this waits for; never getting one fails the test."""
        began = time.monotonic()

        async def settled() -> tuple[str, str]:
            problem, held = await self.unsettled()
            if not problem and not await self.registry.is_live(held):
                return f"A holds and renews cache lease {held}, which the store says is revoked", held
            return problem, held

        await eventually(settled, lambda found: found[0] == "", timeout=SETTLE_TIMEOUT, interval=0.1)
        return time.monotonic() - began


# -- calls -------------------------------------------------------------------------------------------


async def write(stub: Stub, follower: int, followee: int, *, following: bool) -> None:
    if following:
        reply = await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee), timeout=WRITE_DEADLINE)
        assert reply.state == pb.FOLLOW_STATE_FOLLOWING, reply
    else:
        await stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee), timeout=WRITE_DEADLINE)


KINDS = ("IsFollowing", "GetRelationships", "IsFollowing", "ListFollowing")


async def read(stub: Stub, kind: str, follower: int, followee: int) -> bool:
    """Whether ``follower`` follows ``followee``, as ``kind`` answers it."""
    if kind == "IsFollowing":
        reply = await stub.IsFollowing(
            pb.IsFollowingRequest(follower_id=follower, followee_id=followee), timeout=READ_DEADLINE
        )
        return bool(reply.following)
    if kind == "GetRelationships":  # the followee's side, among other targets
        request = pb.GetRelationshipsRequest(actor_id=followee, target_ids=[follower, followee + 7])
        relationships = (await stub.GetRelationships(request, timeout=READ_DEADLINE)).relationships
        (entry,) = [r for r in relationships if r.target_id == follower]
        return bool(entry.followed_by)
    page = await stub.ListFollowing(pb.ListFollowingRequest(user_id=follower), timeout=READ_DEADLINE)
    return followee in {entry.user_id for entry in page.following}


# -- phases 1 and 2: the steps ---------------------------------------------------------------


async def single_write_while_frozen(world: World, direction: Direction, follower: int, followee: int) -> int:
    """The issue's steps with A's link frozen ``direction``; how many reads of B were checked. A
    write that fails is a problem of the run; it is tried again once the link is back, so that the
    rest can still be looked at."""
    await world.settle()

    async def near_answered() -> float:
        before = await near_hits(world.b)
        assert not await read(world.reads, "IsFollowing", follower, followee)
        return await near_hits(world.b) - before

    await eventually(near_answered, lambda hits: hits >= 1, timeout=15)  # B's Redis and near cache hold "false"
    assert not await read(world.reads, "GetRelationships", follower, followee)
    assert not await read(world.reads, "ListFollowing", follower, followee)

    name = f"single_{direction.name}".lower()
    answers: list[tuple[str, float, bool]] = []
    world.link.freeze(direction)
    frozen_at = utc_now()
    try:
        began = time.monotonic()
        try:
            await write(world.writes, follower, followee, following=True)
        except grpc.aio.AioRpcError as exc:
            world.problems.append(
                f"{name}: Follow({follower}->{followee}) on A, its link frozen at {frozen_at}, failed after "
                f"{time.monotonic() - began:.3f}s: {exc.code().name} {exc.details()}"
                f"\nA:\n{log_lines(world.a)}\nB:\n{log_lines(world.b)}"
            )
            world.link.thaw()
            await eventually(lambda: tried(world.writes, follower, followee), bool, timeout=RETRY_FOR, interval=0.1)
        acked = time.monotonic()
        world.record(f"{name}_write_s", acked - began)
        first = await read(world.reads, "IsFollowing", follower, followee)  # the first read after the ack
        answers.append(("IsFollowing", round(time.monotonic() - acked, 3), first))
        index = 0
        while time.monotonic() - acked < OBSERVE_SECONDS:  # B is watched for a while, the link still frozen
            kind = KINDS[index % len(KINDS)]
            index += 1
            answer = await read(world.reads, kind, follower, followee)
            answers.append((kind, round(time.monotonic() - acked, 3), answer))
        on_a = await read(world.writes, "IsFollowing", follower, followee)
    finally:
        world.link.thaw()
    after_thaw = await asyncio.gather(*(read(world.reads, kind, follower, followee) for kind in KINDS))
    answers += [
        (kind, round(time.monotonic() - acked, 3), answer) for kind, answer in zip(KINDS, after_thaw, strict=True)
    ]
    if stale := [answer for answer in answers if not answer[2]]:
        world.problems.append(
            f"{name}: {len(stale)} of {len(answers)} reads of B after A acknowledged the follow "
            f"({acked - began:.3f}s; link frozen at {frozen_at}) said 'not following' (kind, seconds after "
            f"the ack, answer): {stale[:10]}\nA:\n{log_lines(world.a)}\nB:\n{log_lines(world.b)}"
        )
    if not on_a:
        world.problems.append(f"{name}: A itself says 'not following' after its own follow")
    print(f"{name}: B read {len(answers)} times after the ack, {len(stale)} stale")
    return len(answers)


async def tried(stub: Stub, follower: int, followee: int) -> bool:
    """The follow tried once more: whether it was acknowledged."""
    try:
        await write(stub, follower, followee, following=True)
    except grpc.aio.AioRpcError:
        return False
    return True


# -- phase 3: load -----------------------------------------------------------------------------------


@dataclass
class Write:
    following: bool
    sent: float
    acked: float = math.inf


@dataclass
class Pair:
    follower: int
    followee: int
    limit: int | None = None
    """How many writes A makes of it (None: until the load stops)."""
    writes: list[Write] = field(default_factory=list)
    fresh_reads: int = 0
    """Reads started after the last acknowledgement and returned."""
    checked: int = 0
    answered: list[float] = field(default_factory=list)
    """When each write call A answered (acknowledged or refused) had been sent."""
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def expected(self, started: float, returned: float) -> bool | None:
        """The state a read that ran from ``started`` to ``returned`` must show; None if either may
        (a write not acknowledged before it started was sent before it returned)."""
        state, index = False, 0
        for index, one in enumerate(self.writes):  # noqa: B007 - the index is read after the loop
            if one.acked >= started:
                break
            state = one.following
        else:
            index = len(self.writes)
        if any(one.sent < returned for one in self.writes[index:]):
            return None
        return state


@dataclass
class Load:
    name: str
    pairs: list[Pair]
    started: float = field(default_factory=time.monotonic)
    checked: int = 0
    unchecked: int = 0
    stale: list[str] = field(default_factory=list)
    read_errors: list[str] = field(default_factory=list)
    write_errors: list[str] = field(default_factory=list)
    write_latencies: list[float] = field(default_factory=list)
    """Of each write call that succeeded."""
    acked_after: list[float] = field(default_factory=list)
    """Of each write, from its first try to its acknowledgement (with the tries that failed)."""
    marks: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    """Writes that took longer than SLOW_WRITE."""

    def at(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def mark(self, what: str) -> None:
        self.marks.append(f"{self.at()}s {what}")

    def acked(self, count: int) -> bool:
        """Whether each pair has ``count`` writes acknowledged (or all it will have)."""
        return all(
            sum(one.acked < math.inf for one in pair.writes) >= min(count, pair.limit or count) for pair in self.pairs
        )


async def writer(world: World, load: Load, pair: Pair, stop: asyncio.Event) -> None:
    """Toggle the pair through A until ``stop``; each write is tried until it is acknowledged, and
    the next waits for READS_PER_WRITE reads after it."""
    state = False
    while not stop.is_set() and (pair.limit is None or len(pair.writes) < pair.limit):
        one = Write(not state, time.monotonic())
        pair.writes.append(one)
        while True:
            began = time.monotonic()
            try:
                await write(world.writes, pair.follower, pair.followee, following=one.following)
            except grpc.aio.AioRpcError as exc:
                pair.answered.append(began)
                load.write_errors.append(
                    f"{load.at()}s {'Follow' if one.following else 'Unfollow'}({pair.follower}->{pair.followee}) "
                    f"{exc.code().name} after {time.monotonic() - began:.3f}s: {exc.details()}"
                )
                assert time.monotonic() - one.sent < RETRY_FOR, load.write_errors[-5:]
                await asyncio.sleep(0.05)  # a client's pause before it tries again
                continue
            break
        pair.answered.append(began)
        one.acked = time.monotonic()
        load.write_latencies.append(one.acked - began)
        if one.acked - began > SLOW_WRITE:
            load.slow.append(
                f"{load.at()}s {'Follow' if one.following else 'Unfollow'}({pair.follower}->{pair.followee}) "
                f"took {one.acked - began:.3f}s, until {utc_now()}"
            )
        load.acked_after.append(one.acked - one.sent)
        state = one.following
        async with pair.changed:
            pair.fresh_reads = 0
            await pair.changed.wait_for(lambda: pair.fresh_reads >= READS_PER_WRITE or stop.is_set())


async def reader(world: World, load: Load, pair: Pair, stop: asyncio.Event, offset: int) -> None:
    index = offset
    while not stop.is_set():
        kind = KINDS[index % len(KINDS)]
        index += 1
        started = time.monotonic()
        try:
            answer = await read(world.reads, kind, pair.follower, pair.followee)
        except grpc.aio.AioRpcError as exc:
            load.read_errors.append(f"{load.at()}s {kind} {exc.code().name}: {exc.details()}")
            await asyncio.sleep(0.05)  # a client's pause before it tries again
            continue
        returned = time.monotonic()
        expected = pair.expected(started, returned)
        if expected is None:
            load.unchecked += 1
        elif answer == expected:
            load.checked += 1
            pair.checked += 1
        else:
            acked = [round(one.acked - load.started, 3) for one in pair.writes if one.acked < started]
            load.stale.append(
                f"{kind}({pair.follower}->{pair.followee}) from {started - load.started:.3f}s "
                f"to {returned - load.started:.3f}s said {answer}, write {len(acked)} (acked at "
                f"{acked[-1] if acked else '-'}s) made it {expected}"
            )
        async with pair.changed:
            if pair.writes and pair.writes[-1].acked < started:
                pair.fresh_reads += 1
            pair.changed.notify_all()


async def under_load(world: World, name: str, first_user: int, fault: Callable[[Load], Awaitable[None]]) -> Load:
    """Writers and readers over TOGGLED + QUIET pairs: WRITES_BEFORE acknowledged writes of each
    toggled pair (the quiet ones' one write), the fault, then until the cache has settled and each
    toggled pair has WRITES_AFTER more."""
    await world.settle()
    pairs = [Pair(first_user + i, first_user + 500 + i, None if i < TOGGLED else 1) for i in range(TOGGLED + QUIET)]
    load = Load(name, pairs)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(writer(world, load, pair, stop)) for pair in pairs]
    tasks += [
        asyncio.create_task(reader(world, load, pair, stop, offset))
        for pair in pairs
        for offset in range(READERS_PER_PAIR if pair.limit is None else 1)
    ]

    async def acknowledged(count: int) -> None:
        async def done() -> bool:
            return load.acked(count)

        await eventually(done, bool, timeout=30, interval=0.05)

    def writes_so_far() -> int:
        return min(sum(one.acked < math.inf for one in pair.writes) for pair in pairs if pair.limit is None)

    try:
        await acknowledged(WRITES_BEFORE)
        load.mark("fault")
        await fault(load)
        load.mark("fault over")
        settled_after = await world.settle()
        load.mark(f"settled ({settled_after:.3f}s)")
        await acknowledged(writes_so_far() + WRITES_AFTER)
    finally:
        stop.set()
        for pair in load.pairs:
            async with pair.changed:
                pair.changed.notify_all()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:  # a writer that never got its write acknowledged
        if task.exception() is not None:
            load.write_errors.append(f"writer failed: {task.exception()!r}")
    return load


def freeze_link(world: World) -> Callable[[Load], Awaitable[None]]:
    """A's link frozen both ways until A's lease has lapsed in Redis (a write of A could not settle
    the cache: from then on no replica trusts it) and every toggled pair has had a write answered
    after that, then thawed: A goes on writing, cut off alone for longer than a lease (the issue
    watched B for 5.6 s), and B goes on reading."""

    async def fault(load: Load) -> None:
        world.link.freeze(Direction.BOTH)
        try:

            async def lapsed() -> bool:
                seconds, micros = await world.direct.time()
                now_ms = seconds * 1000 + micros // 1000
                leases = cast(
                    "list[tuple[str, float]]", await world.direct.zrange(TRUST_LEASES, 0, -1, withscores=True)
                )
                return any(expiry <= now_ms for _, expiry in leases)

            await eventually(lapsed, bool, timeout=FREEZE_DEADLINE)
            lapsed_at = time.monotonic()
            load.mark("A's lease lapsed")

            async def answered_after_lapse() -> list[int]:
                return [sum(sent > lapsed_at for sent in pair.answered) for pair in load.pairs if pair.limit is None]

            await eventually(answered_after_lapse, lambda counts: min(counts) >= 1, timeout=FREEZE_DEADLINE)
        finally:
            world.link.thaw()

    return fault


def kill_redis(world: World) -> Callable[[Load], Awaitable[None]]:
    async def fault(load: Load) -> None:
        process = world.redis.process.process
        process.kill()
        await asyncio.to_thread(process.wait, 10)
        for leftover in ("dump.rdb", "appendonly.aof"):  # started again empty
            (world.redis.data_dir / leftover).unlink(missing_ok=True)
        try:
            await asyncio.sleep(REDIS_DOWN_SECONDS)  # the outage's length, under load
        finally:
            await asyncio.to_thread(world.redis.restart)
        load.mark("redis restarted")

    return fault


def stop_redis(world: World) -> Callable[[Load], Awaitable[None]]:
    async def fault(load: Load) -> None:
        pid = world.redis.process.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(REDIS_STOPPED_SECONDS)  # the hang's length, under load
        finally:
            os.kill(pid, signal.SIGCONT)

    return fault


def report(world: World, load: Load) -> int:
    """Print and record the load's figures, then check it; its checked reads."""
    world.record(f"{load.name}_checked_reads", load.checked)
    world.record(f"{load.name}_unchecked_reads", load.unchecked)
    world.record(f"{load.name}_writes", len(load.acked_after))
    world.record(f"{load.name}_write_max_s", max(load.write_latencies, default=0.0))
    world.record(f"{load.name}_acked_after_max_s", max(load.acked_after, default=0.0))
    world.record(f"{load.name}_write_errors", len(load.write_errors))
    world.record(f"{load.name}_read_errors", len(load.read_errors))
    print(f"{load.name}: {' | '.join(load.marks)}; checked by pair {[pair.checked for pair in load.pairs]}")
    for line in load.slow:
        print(f"  slow write: {line}")
    evidence = (
        f"\nmarks: {load.marks}\nwrite errors ({len(load.write_errors)}): {load.write_errors[:10]}"
        f"\nread errors ({len(load.read_errors)}): {load.read_errors[:10]}"
        f"\nA:\n{log_lines(world.a)}\nB:\n{log_lines(world.b)}"
    )
    if load.stale:
        world.problems.append(f"{load.name}: {len(load.stale)} stale reads: {load.stale[:10]}{evidence}")
    if load.write_errors:
        world.problems.append(f"{load.name}: {len(load.write_errors)} writes failed{evidence}")
    for line in load.read_errors[:10]:  # not an answer, so not stale; shown, not failed on
        print(f"  read error: {line}")
    return load.checked


# -- the test ----------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def world_of(
    settings: Settings, own_redis: OwnRedis, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[World]:
    rates = {
        "SG_FOLLOW_RATE_LIMIT": "1000000",
        "SG_REDIS_TIMEOUT_SECONDS": str(REDIS_TIMEOUT),
        "SG_LOG_LEVEL": "info",  # the lease's rounds and the calls refused, for the failure messages
    }
    dynamo = AsyncDynamo.build(settings)
    direct = aioredis.Redis(port=own_redis.port, decode_responses=True, socket_timeout=1.0)
    try:
        async with (
            tcp_freeze(own_redis.port) as link,
            serve_process(settings, tmp_path / "a", SG_REDIS_URL=f"redis://127.0.0.1:{link.port}/0", **rates) as a,
            serve_process(settings, tmp_path / "b", **rates) as b,
            grpc.aio.insecure_channel(a.address) as write_channel,
            grpc.aio.insecure_channel(b.address) as read_channel,
        ):

            def record(name: str, value: float) -> None:
                request.node.user_properties.append((PREFIX + name, round(value, 3)))
                print(f"figure: {name} = {round(value, 3)}")

            yield World(
                a,
                b,
                pb_grpc.SocialGraphServiceStub(write_channel),
                pb_grpc.SocialGraphServiceStub(read_channel),
                link,
                own_redis,
                direct,
                DynamoLeaseRegistry(dynamo, settings.table(CHECKPOINTS)),
                record=record,
            )
    finally:
        await direct.aclose()
        dynamo.close()


async def test_a_write_acknowledged_during_a_partial_partition_is_never_read_stale_elsewhere(
    settings: Settings, own_redis: OwnRedis, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with world_of(settings, own_redis, tmp_path, request) as world:
        checked: dict[str, int] = {}
        checked["single_both"] = await single_write_while_frozen(world, Direction.BOTH, 50000, 50001)
        checked["single_to_client"] = await single_write_while_frozen(world, Direction.TO_CLIENT, 50002, 50003)
        for name, first_user, fault in (
            ("load_frozen_link", 60000, freeze_link(world)),
            ("load_redis_killed", 61000, kill_redis(world)),
            ("load_redis_stopped", 62000, stop_redis(world)),
        ):
            load = await under_load(world, name, first_user, fault)
            checked[name] = report(world, load)
        for child, role in ((world.a, "A"), (world.b, "B")):
            print(f"{role} logged: {counted(child)}")
        print(f"checked reads: {checked}, total {sum(checked.values())}, wall {world.since()}s")
        world.record("checked_reads_total", sum(checked.values()))
        assert not world.problems, "\n\n".join(world.problems)
        assert sum(checked.values()) >= MIN_CHECKED, checked


pytestmark = pytest.mark.timeout(180)
