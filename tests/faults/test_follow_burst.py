"""Fault table, row 1: a burst of follows from 32 clients at once, against ``serve`` and
``counters`` as processes of their own: no call fails, and shortly after the last acknowledgement
the counts, both lists and IsFollowing are exact (nothing lost, nothing counted twice)."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.domain.models import Direction
from graph_service.settings import Settings
from tests.support.children import child_process, serve_process
from tests.support.figures import Record
from tests.support.graph_calls import Pair, batch_counts, counts_of, ids, is_following
from tests.support.polling import eventually

pytestmark = [pytest.mark.faults, pytest.mark.streams]

CLIENTS = 32
FOLLOWS_EACH = 3
FOLLOWERS = range(1_001, 1_001 + CLIENTS)
FOLLOWEES = range(2_001, 2_009)
"""32 clients at once on 8 followees: about 12 follows of each followee race one another (with 16
followees and 5 each it was 10); more calls per client would only make the burst longer."""


async def follow_all(address: str, follower: int, followees: list[int]) -> list[Pair]:
    """One client on a connection of its own: its follows one after another, then the first again
    (a retried follow must change nothing); the pairs the service acknowledged."""
    options = [("grpc.use_local_subchannel_pool", 1)]  # a TCP connection per client, as 32 callers have
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        acknowledged: list[Pair] = []
        for followee in [*followees, followees[0]]:
            reply = await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee), timeout=60)
            assert reply.state == pb.FOLLOW_STATE_FOLLOWING
            acknowledged.append((follower, followee))
        return acknowledged


async def test_a_burst_from_32_clients_leaves_counts_lists_and_is_following_exact(
    settings: Settings, tmp_path: Path, figures: Record
) -> None:
    """Scale: 32 clients send 4 follows each at once (3 distinct followees of 8, then the first
    again: 128 calls, 96 edges; the issue's run had 10,000). Every call succeeds; GetCounts of all
    40 users is exact within 30 s of the last acknowledgement (the figure
    ``counts_exact_after_last_ack_s``), and so are both lists of every user and IsFollowing of all
    256 follower-followee pairs."""
    rng = random.Random(12)
    plan = {follower: rng.sample(list(FOLLOWEES), FOLLOWS_EACH) for follower in FOLLOWERS}
    async with (
        serve_process(settings, tmp_path) as serve,
        child_process(settings, "counters", tmp_path),
    ):
        started = time.monotonic()
        acknowledged = await asyncio.gather(*(follow_all(serve.address, f, plan[f]) for f in FOLLOWERS))
        last_ack = time.monotonic()
        edges = {pair for pairs in acknowledged for pair in pairs}
        assert len(edges) == CLIENTS * FOLLOWS_EACH
        users = [*FOLLOWERS, *FOLLOWEES]
        expected = counts_of(edges, users)
        async with grpc.aio.insecure_channel(serve.address) as channel:
            stub = pb_grpc.SocialGraphServiceStub(channel)
            await eventually(lambda: batch_counts(stub, users), lambda got: got == expected, timeout=30, interval=0.02)
            settled = time.monotonic() - last_ack
            for followee in FOLLOWEES:
                listed = await ids(stub, Direction.FOLLOWERS, followee)
                assert sorted(listed) == sorted(f for f, t in edges if t == followee), followee
            for follower in FOLLOWERS:
                listed = await ids(stub, Direction.FOLLOWING, follower)
                assert sorted(listed) == sorted(plan[follower]), follower
            pairs = [(f, t) for f in FOLLOWERS for t in FOLLOWEES]
            answers = await asyncio.gather(*(is_following(stub, pair) for pair in pairs))
            assert {p for p, yes in zip(pairs, answers, strict=True) if yes} == edges
    figures("burst_s", last_ack - started)
    figures("counts_exact_after_last_ack_s", settled)
