"""Fault table, row 5: DynamoDB down under writes. The way to DynamoDB Local is cut (a forwarder
in front of it, ``tests/support/tcp_cut.py``: every open connection aborted, new ones refused) while
writers toggle follows through ``serve``, with the counters consumer running, both as processes of
their own; it is mended once a call has been refused.

Cut rather than paused (SIGSTOP): a hung store accepts connections and answers nothing, so a call
waits out boto3's read timeout and retries (10 s each) and the caller's own deadline ends it first;
a refused connection is what lets the server answer ``UNAVAILABLE`` itself, which is the behaviour
in the table. Cut rather than killed (``kill -9``): a killed DynamoDB Local may lose a write it
acknowledged tens of milliseconds before (one run in about thirty lost one), which would fail the
"every acknowledged state is there" check for a reason that is DynamoDB Local's, not the
service's; real DynamoDB loses no acknowledged write. Requests in flight at the cut may have been
applied with their answer lost, as on a real network failure: their pair's state is unknown.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.settings import Settings
from tests.support.children import Child, child_process, serve_process
from tests.support.figures import Record
from tests.support.graph_calls import Pair, all_counts, check_round, counts_of, error_info, truth_edges, truth_stub
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, stub_for
from tests.support.tables import create_tables
from tests.support.tcp_cut import TcpCut, tcp_cut

pytestmark = [pytest.mark.faults, pytest.mark.streams]

USERS = list(range(1, 9))
WRITERS = 8
WRITES_EACH_WAY = 16
"""Acknowledged writes before the store goes down, and again after it is back."""
REFUSALS = 2 * WRITERS
"""Calls refused before the store comes back: down long enough for each writer to meet it."""


@pytest.fixture
async def store_link(dynamodb_local: str) -> AsyncIterator[TcpCut]:
    """The way to DynamoDB Local, which the test cuts and mends."""
    async with tcp_cut(int(dynamodb_local.rsplit(":", 1)[1])) as link:
        yield link


@pytest.fixture
async def settings(store_link: TcpCut, redis_url: str) -> Settings:
    """Tables with streams (the counters consumer runs), reached through the link only."""
    value = make_settings(f"http://127.0.0.1:{store_link.port}", redis_url)
    await create_tables(value, streams=True)
    return value


@dataclass
class Writes:
    """What the writers saw: the last acknowledged state of each pair (None: its last write failed,
    so it may or may not have been made), and every failure by code and reason."""

    known: dict[Pair, bool | None] = field(default_factory=dict)
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    messages: set[str] = field(default_factory=set)
    acknowledged_at: list[float] = field(default_factory=list)


async def toggle(address: str, pairs: list[Pair], writes: Writes, stop: asyncio.Event, seed: int) -> None:
    """Follow or unfollow random pairs of this writer's own until stopped; a failed write is
    recorded, and the writer goes on."""
    rng = random.Random(seed)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        while not stop.is_set():
            pair = rng.choice(pairs)
            following = rng.random() < 0.6
            try:
                if following:
                    await stub.Follow(pb.FollowRequest(follower_id=pair[0], followee_id=pair[1]), timeout=60)
                else:
                    await stub.Unfollow(pb.UnfollowRequest(follower_id=pair[0], followee_id=pair[1]), timeout=60)
            except grpc.aio.AioRpcError as error:
                writes.known[pair] = None
                reason = error_info(error).reason if error.code() == grpc.StatusCode.UNAVAILABLE else ""
                writes.failures[(error.code().name, reason)] += 1
                writes.messages.add(error.details() or "")
                continue
            writes.known[pair] = following
            writes.acknowledged_at.append(time.monotonic())


async def test_dynamodb_down_is_unavailable_half_writes_nothing_and_heals_unaided(
    settings: Settings, store_link: TcpCut, dynamodb_local: str, tmp_path: Path, figures: Record
) -> None:
    """Scale: 8 writers over the 56 pairs of 8 users, 16 acknowledged writes before the outage
    and 16 after; the way to DynamoDB Local cut until 16 calls have been refused, then mended (down
    for a few seconds, most of it boto3's retries of the calls in flight; the issue's run: 15 s).

    Every failed call is UNAVAILABLE with reason STORE_UNAVAILABLE and a message without the
    store's address; the same ``serve`` and ``counters`` processes, never restarted, go on once the
    store is back (the figure ``writes_again_after_s``); both tables hold every edge or neither
    (nothing half-written), every acknowledged state is there, counts are exact, and every cached
    answer and Redis entry agrees with DynamoDB."""
    pairs = [(a, b) for a in USERS for b in USERS if a != b]
    own = [pairs[i::WRITERS] for i in range(WRITERS)]
    writes = Writes()
    stop = asyncio.Event()
    async with (
        serve_process(settings, tmp_path) as serve,
        child_process(settings, "counters", tmp_path) as counters,
    ):
        writers = [asyncio.create_task(toggle(serve.address, own[i], writes, stop, i)) for i in range(WRITERS)]
        try:
            await eventually(acknowledged_since(writes, 0), lambda n: n >= WRITES_EACH_WAY, timeout=60)
            await store_link.cut()
            cut_at = time.monotonic()

            async def refusals() -> int:
                assert not any(w.done() for w in writers)
                return sum(writes.failures.values())

            await eventually(refusals, lambda n: n >= REFUSALS, timeout=60)
            refused_after = time.monotonic() - cut_at
            await store_link.mend()
            back_at = time.monotonic()
            await eventually(acknowledged_since(writes, back_at), lambda n: n >= WRITES_EACH_WAY, timeout=60)
            writes_again_after = min(t for t in writes.acknowledged_at if t > back_at) - back_at
        finally:
            stop.set()
            await asyncio.gather(*writers)
        assert_still_running(serve, counters)
        assert set(writes.failures) == {("UNAVAILABLE", "STORE_UNAVAILABLE")}, writes.failures
        # Callers are told the store is unavailable, never where it is (the details go to the log).
        ports = (str(store_link.port), dynamodb_local.rsplit(":", 1)[1])
        assert not [m for m in writes.messages if "http" in m or any(p in m for p in ports)], writes.messages
        async with truth_stub(settings) as truth:
            edges = await truth_edges(truth, USERS)  # the followers and following tables agree
            settled = {pair: state for pair, state in writes.known.items() if state is not None}
            assert {pair: pair in edges for pair in settled} == settled
            async with stub_for(serve.port) as cached:
                expected = counts_of(set(edges), USERS)
                await eventually(lambda: all_counts(cached, USERS), lambda got: got == expected, timeout=30)
                await check_round(cached, truth, settings, USERS)
    figures("refused_after_cut_s", refused_after)
    figures("writes_again_after_s", writes_again_after)
    figures("refused_calls", sum(writes.failures.values()))
    figures("acknowledged_writes", len(writes.acknowledged_at))


def acknowledged_since(writes: Writes, since: float) -> Callable[[], Awaitable[int]]:
    """A probe for ``eventually``: how many writes were acknowledged after ``since``."""

    async def probe() -> int:
        return sum(t > since for t in writes.acknowledged_at)

    return probe


def assert_still_running(*children: Child) -> None:
    for child in children:
        assert child.running(), f"{child.command} exited with {child.process.returncode}: {child.log()}"
