"""The account jobs run by real `socialgraph serve` processes (SPEC §3b): a serving process killed
(SIGKILL) in the middle of an archive, and another in the middle of the restore, and the job taken
over by the next process ends exact: every edge archived once, every one restored with its time,
the counts the counters consumer keeps exact. And a deactivation through one serving process is
seen at once through another, whose near cache held the account as active."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import query_all
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.settings import Settings
from tests.support.children import Child, serve_process
from tests.support.polling import eventually
from tests.support.runtimes import running_counters
from tests.support.seeding import seed_follows

U = 7
# Several batches of each side either way (16 and 19 edges an archive batch, 9 and 10 a restore
# batch): the kill, as soon as one batch is in, always leaves most of the job to the next process.
FOLLOWERS_OF_U = range(10_000, 10_120)
FOLLOWED_BY_U = range(20_000, 20_030)
EDGES = len(FOLLOWERS_OF_U) + len(FOLLOWED_BY_U)
JOB = {"SG_ACCOUNT_JOB_LEASE_SECONDS": "2", "SG_ACCOUNT_JOBS": "1", "SG_ACCOUNT_JOB_POLL_SECONDS": "0.2"}
"""A job taken over within about two seconds of its process's death."""


@contextlib.asynccontextmanager
async def stub_of(child: Child) -> AsyncIterator[pb_grpc.SocialGraphServiceStub]:
    async with grpc.aio.insecure_channel(child.address) as channel:
        yield pb_grpc.SocialGraphServiceStub(channel)


async def state(stub: pb_grpc.SocialGraphServiceStub) -> pb.GetAccountStateResponse:
    return await stub.GetAccountState(pb.GetAccountStateRequest(user_id=U))


async def partition(settings: Settings, table: str, prefix: str) -> dict[str, int]:
    """U's items under ``prefix`` in ``table``: sort key -> ``at``."""
    dynamo = AsyncDynamo.build(settings)
    try:
        found = await query_all(
            dynamo,
            {
                "TableName": settings.table(table),
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":pk": {"N": str(U)}, ":p": {"S": prefix}},
                "ConsistentRead": True,
            },
        )
    finally:
        dynamo.close()
    return {i["sk"]["S"]: int(i["at"]["N"]) for i in found}


async def kill_mid_job(doomed: Child, stub: pb_grpc.SocialGraphServiceStub, call: str, running: int) -> None:
    """Make the call through a serving process, SIGKILL it once its job has moved some edges and not
    all of them."""
    if call == "deactivate":
        await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    else:
        await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    reply = await eventually(
        lambda: state(stub), lambda s: s.state == running and s.edges_done > 0, timeout=60, interval=0.01
    )
    await doomed.kill()
    assert reply.edges_done < EDGES, reply  # killed with the job under way


@pytest.mark.streams
async def test_a_job_killed_mid_way_is_taken_over_and_ends_exact(settings: Settings, tmp_path: Path) -> None:
    times = await seed_follows(settings, [(f, U) for f in FOLLOWERS_OF_U] + [(U, g) for g in FOLLOWED_BY_U])
    before = {**(await partition(settings, FOLLOWERS, "E#")), **(await partition(settings, FOLLOWING, "E#"))}
    assert len(before) == len(times) == EDGES
    async with running_counters(settings):
        async with serve_process(settings, tmp_path / "a", **JOB) as doomed, stub_of(doomed) as stub:
            await kill_mid_job(doomed, stub, "deactivate", pb.ACCOUNT_STATE_DEACTIVATING)
        # The process that takes the archive over is the one killed in the middle of the restore.
        async with serve_process(settings, tmp_path / "b", **JOB) as taker, stub_of(taker) as stub:
            done = await eventually(lambda: state(stub), lambda s: s.state == pb.ACCOUNT_STATE_DEACTIVATED, timeout=60)
            assert (done.edges_done, done.edges_total) == (EDGES, EDGES)  # each edge archived once
            assert await partition(settings, FOLLOWERS, "E#") == {}
            assert await partition(settings, FOLLOWING, "E#") == {}
            assert len(await partition(settings, FOLLOWERS, "X#")) == EDGES
            counted = pb.BatchGetCountsRequest(user_ids=[U, FOLLOWERS_OF_U[0], FOLLOWED_BY_U[-1]])
            # U's own counts are zero while it is away whatever the table says: its followers' count.
            await eventually(
                lambda: stub.BatchGetCounts(counted),
                lambda r: [(c.followers_count, c.following_count) for c in r.counts] == [(0, 0)] * 3,
                timeout=60,
            )
            await kill_mid_job(taker, stub, "reactivate", pb.ACCOUNT_STATE_REACTIVATING)

        async with serve_process(settings, tmp_path / "d", **JOB) as taker, stub_of(taker) as stub:
            done = await eventually(lambda: state(stub), lambda s: s.state == pb.ACCOUNT_STATE_ACTIVE, timeout=60)
            assert (done.edges_done, done.edges_total) == (EDGES, EDGES)  # each restored once
            after = {**(await partition(settings, FOLLOWERS, "E#")), **(await partition(settings, FOLLOWING, "E#"))}
            assert after == before  # every edge back, with its own time
            assert await partition(settings, FOLLOWERS, "X#") == {}
            await eventually(
                lambda: stub.GetCounts(pb.GetCountsRequest(user_id=U)),
                lambda r: (r.followers_count, r.following_count) == (len(FOLLOWERS_OF_U), len(FOLLOWED_BY_U)),
                timeout=60,
            )


async def test_a_deactivation_through_one_process_is_seen_at_once_through_another(
    settings: Settings, tmp_path: Path
) -> None:
    async with (  # the serving processes have their near caches (the tests' in-process servers have none)
        serve_process(settings, tmp_path / "writer", **JOB) as writer,
        serve_process(settings, tmp_path / "reader", **JOB) as reader,
        stub_of(writer) as writes,
        stub_of(reader) as reads,
    ):
        for user in range(100, 103):  # each account a whole round of the rule; more only repeat it
            follower = user + 1000
            await writes.Follow(pb.FollowRequest(follower_id=follower, followee_id=user))
            ask = pb.IsFollowingRequest(follower_id=follower, followee_id=user)
            relationship = pb.GetRelationshipsRequest(actor_id=follower, target_ids=[user])
            for _ in range(3):  # the reader's near cache holds the account as active
                assert (await reads.IsFollowing(ask)).following
                assert (await reads.GetRelationships(relationship)).relationships[0].following
            await writes.DeactivateAccount(pb.DeactivateAccountRequest(user_id=user))
            assert not (await reads.IsFollowing(ask)).following
            assert not (await reads.GetRelationships(relationship)).relationships[0].following
            assert (await reads.GetCounts(pb.GetCountsRequest(user_id=user))).followers_count == 0
            assert not (await reads.ListFollowers(pb.ListFollowersRequest(user_id=user))).followers
            await writes.ReactivateAccount(pb.ReactivateAccountRequest(user_id=user))
            back = pb.GetAccountStateRequest(user_id=user)
            assert (await reads.GetAccountState(back)).state in {
                pb.ACCOUNT_STATE_REACTIVATING,
                pb.ACCOUNT_STATE_ACTIVE,
            }
            await eventually(lambda a=ask: reads.IsFollowing(a), lambda r: r.following, timeout=30)


pytestmark = pytest.mark.timeout(240)
