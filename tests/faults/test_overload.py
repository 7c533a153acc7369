"""Fault table, row 6: many connections and streams at once, plus requests larger than the server
takes: ``serve`` (a process of its own) stays up, refuses only the oversized requests, and keeps
serving a caller that was there before the flood.

Scaled to 800 calls in flight at a time: above about 1,000 calls waiting on one server, gRPC core
itself starts shedding new calls with ``CANCELLED`` before any handler sees them (measured here:
4 of 1,200, 220 of 2,000; ``grpc_server_started_total`` never counts them), and a caller connected
before the flood could then be shed as well. Below that, every call must succeed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.settings import Settings
from tests.support.children import SERVING, Child, health_status, serve_process
from tests.support.figures import Record
from tests.support.graph_calls import follow, is_following

pytestmark = pytest.mark.faults

CONNECTIONS = 40
STREAMS_EACH = 20
ROUNDS = 3
OVERSIZED = 4
FIVE_MB = 5 * 1024 * 1024
PAIRS = [(a, b) for a in range(1, 6) for b in range(1, 6) if a != b]


def connection(address: str) -> grpc.aio.Channel:
    """A channel with a TCP connection of its own (channels to one target share one by default)."""
    return grpc.aio.insecure_channel(
        address,
        options=[
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.max_send_message_length", 2 * FIVE_MB),  # the client sends it; the server decides
        ],
    )


async def flood(address: str, index: int) -> int:
    """``ROUNDS`` times, ``STREAMS_EACH`` calls at once on one connection; the calls that succeeded."""
    async with connection(address) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        done = 0
        for _ in range(ROUNDS):
            pairs = [PAIRS[(index + n) % len(PAIRS)] for n in range(STREAMS_EACH)]
            await asyncio.gather(*(is_following_with_deadline(stub, pair) for pair in pairs))
            done += len(pairs)
        return done


async def is_following_with_deadline(stub: pb_grpc.SocialGraphServiceAsyncStub, pair: tuple[int, int]) -> bool:
    reply = await stub.IsFollowing(pb.IsFollowingRequest(follower_id=pair[0], followee_id=pair[1]), timeout=60)
    return bool(reply.following)


async def oversized(address: str) -> grpc.StatusCode:
    """A 5 MB ListFollowers request (its page token); the code it got."""
    async with connection(address) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        try:
            await stub.ListFollowers(pb.ListFollowersRequest(user_id=1, page_token="x" * FIVE_MB), timeout=60)
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK


async def bystander(serve: Child, stop: asyncio.Event) -> list[float]:
    """A caller connected before the flood: IsFollowing and GetCounts, one after another, each with
    a 10 s deadline, until stopped; the seconds each took."""
    took: list[float] = []
    async with connection(serve.address) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        await is_following(stub, (1, 2))
        while not stop.is_set():
            started = time.monotonic()
            reply = await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2), timeout=10)
            assert reply.following
            await stub.GetCounts(pb.GetCountsRequest(user_id=2), timeout=10)
            took.append(time.monotonic() - started)
    return took


async def test_a_flood_of_connections_and_streams_and_5_mb_requests_leaves_the_server_serving(
    settings: Settings, tmp_path: Path, figures: Record
) -> None:
    """Scale: 40 connections with 20 calls at once each, three times (2,400 calls, 800 in flight at
    a time; the issue's run: 10,000 streams on 500 connections), and 4 requests of 5 MB among them.
    Every flood call succeeds, every 5 MB request is refused with RESOURCE_EXHAUSTED (past gRPC's
    4 MB limit), a caller connected before keeps being answered (each call within 10 s; the
    slowest is the figure ``bystander_slowest_s``), and afterwards ``serve`` still runs, says
    SERVING and takes writes."""
    async with serve_process(settings, tmp_path) as serve:
        async with connection(serve.address) as channel:
            stub = pb_grpc.SocialGraphServiceStub(channel)
            for a, b in PAIRS[::3]:
                await follow(stub, a, b)
        stop = asyncio.Event()
        watcher = asyncio.create_task(bystander(serve, stop))
        started = time.monotonic()
        try:
            done, refused = await asyncio.gather(
                asyncio.gather(*(flood(serve.address, i) for i in range(CONNECTIONS))),
                asyncio.gather(*(oversized(serve.address) for _ in range(OVERSIZED))),
            )
        finally:
            stop.set()
            took = await watcher
        flood_seconds = time.monotonic() - started
        assert sum(done) == CONNECTIONS * STREAMS_EACH * ROUNDS
        assert refused == [grpc.StatusCode.RESOURCE_EXHAUSTED] * OVERSIZED
        assert took, "the bystander was never answered during the flood"
        assert serve.running(), serve.log()
        assert await health_status(serve.address) == SERVING
        async with connection(serve.address) as channel:
            stub = pb_grpc.SocialGraphServiceStub(channel)
            await follow(stub, 7, 8)
            assert await is_following(stub, (7, 8))
    figures("flood_s", flood_seconds)
    figures("bystander_calls", len(took))
    figures("bystander_slowest_s", max(took))
