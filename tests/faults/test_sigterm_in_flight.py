"""Fault table, row 4: SIGTERM to ``serve`` with 32 calls in flight: all 32 succeed, new calls are
refused, and the process exits 0 promptly.

The 32 calls are held in flight for certain, not by luck: the test's own DynamoDB Local is paused
(SIGSTOP) before they are sent, so every one of them waits inside the server on its store read
until the test lets the store go on, after the SIGTERM. (The e2e test
``tests/e2e/test_grpcurl.py::test_sigterm_lets_in_flight_calls_finish_and_exits_zero`` covers a
SIGTERM that lands among calls of a steady load.)"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.domain.models import Direction
from graph_service.settings import Settings
from tests.support.children import SERVING, Child, health_status, serve_process
from tests.support.figures import Record
from tests.support.graph_calls import ids, is_following, truth_stub
from tests.support.own_dynamodb import OwnDynamoDB
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, stub_for
from tests.support.tables import create_tables

pytestmark = pytest.mark.faults

SERVICE = "socialgraph.v1.SocialGraphService"
IN_FLIGHT = 32
FOLLOWEE = 9_000
GRACE = 30.0
"""Long enough for the 32 calls on a loaded machine: the test is that the process exits as soon as
they are answered, not when the grace period ends."""


@pytest.fixture
async def settings(own_dynamodb: OwnDynamoDB, redis_url: str) -> Settings:
    value = make_settings(own_dynamodb.endpoint, redis_url)
    await create_tables(value, streams=False)
    return value


async def follow(address: str, follower: int) -> int:
    """One caller on a connection of its own; the FollowState answered (a failure fails the test)."""
    async with grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        reply = await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=FOLLOWEE), timeout=60)
        return int(reply.state)


async def follows_started(serve: Child) -> float:
    metrics = await serve.metrics()
    return sum(metrics.values("grpc_server_started_total", grpc_service=SERVICE, grpc_method="Follow").values())


async def new_call_code(address: str) -> grpc.StatusCode:
    """The code of a health check on a new connection: OK while the server still takes calls.
    (Not a graph call: one of those could wait on the paused store and be in flight itself.)"""
    async with grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK


async def test_sigterm_with_32_calls_in_flight_lets_all_32_succeed_and_exits_0_promptly(
    settings: Settings, own_dynamodb: OwnDynamoDB, tmp_path: Path, figures: Record
) -> None:
    """32 Follow calls (32 connections) wait in the server on a paused DynamoDB Local; SIGTERM; the
    health service stops saying SERVING and a new call is refused with UNAVAILABLE; the store goes
    on: all 32 calls answer FOLLOWING, ``serve`` exits 0 long before the grace period ends, and the
    followee has exactly the 32 followers (nothing lost, nothing written twice).
    Scale: 32 calls in flight, as the issue's run."""
    followers = list(range(1, IN_FLIGHT + 1))
    async with serve_process(settings, tmp_path, SG_SHUTDOWN_GRACE_SECONDS=str(GRACE)) as serve:
        async with stub_for(serve.port) as stub:  # the server has connected to the store once
            await is_following(stub, (1, 2))
        with own_dynamodb.pausing():
            calls = [asyncio.create_task(follow(serve.address, f)) for f in followers]
            await eventually(lambda: follows_started(serve), lambda n: n == IN_FLIGHT, timeout=30)
            assert not any(c.done() for c in calls), "a call finished while the store was paused"
            terminated_at = time.monotonic()
            serve.send(signal.SIGTERM)
            await eventually(lambda: health_status(serve.address), lambda s: s != SERVING, timeout=10)
            refused = await eventually(
                lambda: new_call_code(serve.address), lambda c: c != grpc.StatusCode.OK, timeout=10
            )
            assert not any(c.done() for c in calls)
            resumed_at = time.monotonic()
        states = await asyncio.wait_for(asyncio.gather(*calls), timeout=GRACE)
        answered_at = time.monotonic()
        code = await serve.exit_code(timeout=GRACE)
        exited_at = time.monotonic()
        assert code == 0, serve.log()
    assert refused == grpc.StatusCode.UNAVAILABLE
    assert states == [pb.FOLLOW_STATE_FOLLOWING] * IN_FLIGHT
    # Drained, closed and gone, not waiting out the grace period (the exit itself takes a second or
    # two on a loaded machine: the lease given back, connections closed, the interpreter ending).
    assert exited_at - answered_at < GRACE / 3
    async with truth_stub(settings) as stub:
        assert sorted(await ids(stub, Direction.FOLLOWERS, FOLLOWEE)) == followers
    figures("answered_after_store_back_s", answered_at - resumed_at)
    figures("exit_after_last_answer_s", exited_at - answered_at)
    figures("exit_after_sigterm_s", exited_at - terminated_at)
