"""The account lifecycle through the server (SPEC §3b), on DynamoDB Local and Redis, with the
counters consumer running and the jobs run by the server itself: the immediate effects of each
call, the job's end state (archived, restored intact, deleted), counts exact afterwards, and the
bad input of the issue.

The tests share the module's tables and servers (``tests/support/shared_service.py``), each on user
IDs of its own: those with the counters consumer on tables with streams, the others on tables
without (where no consumer runs).
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.domain.models import Direction
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_timelines
from graph_service.store.account_store import DynamoAccounts
from tests.support.graph_calls import (
    Stub,
    all_counts,
    block,
    follow,
    rejected,
    relationships,
    requests_of,
    set_private,
    whole_list,
)
from tests.support.polling import eventually
from tests.support.shared_service import SharedService, UserIds, module_fixtures, shared_service
from tests.support.table_items import partition_items
from tests.support.timeline_calls import timeline_stub_for, whole_timeline

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the loop of the module's servers

INVALID, FAILED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION


class People(NamedTuple):
    """U is the account that leaves; A, B and C follow it, it follows A and D, and it asked P (private)."""

    U: int
    A: int
    B: int
    C: int
    D: int
    P: int
    E: int


# -- the module's servers -------------------------------------------------------------------------


module_redis, streamed, plain, service, user_ids, settings, counters = module_fixtures(
    shared_service, lambda service: service.settings
)
"""The module's services (``tests/support/shared_service.py``): ``streamed`` for the tests that run
the counters consumer (``counted``), ``plain`` for the others."""


@pytest.fixture
def counted(streamed: SharedService, counters: asyncio.Task[None]) -> SharedService:
    """The streamed tables' service with the counters consumer running for this test."""
    return streamed


@pytest.fixture
def people(user_ids: UserIds) -> People:
    """This test's U, A, B, C, D, P and E: IDs no other test of the module uses."""
    base = user_ids.next_block()
    return People(*(base + offset for offset in range(10, 17)))


async def state_of(stub: Stub, user: int) -> pb.GetAccountStateResponse:
    return await stub.GetAccountState(pb.GetAccountStateRequest(user_id=user))


async def settled(stub: Stub, user: int, state: int) -> pb.GetAccountStateResponse:
    """Wait for the account's job to end in ``state``."""
    return await eventually(lambda: state_of(stub, user), lambda s: s.state == state, timeout=30)


async def seed(stub: Stub, people: People) -> dict[str, list[tuple[int, int]]]:
    """The graph around U; returns the lists as they are before U leaves."""
    U, A, B, C, D, P, _ = people
    for follower in (A, B, C):
        await follow(stub, follower, U)
    await follow(stub, U, A)
    await follow(stub, U, D)
    await set_private(stub, P, True)
    assert await follow(stub, U, P) == pb.FOLLOW_STATE_REQUESTED
    return {
        "followers": await whole_list(stub, Direction.FOLLOWERS, U),
        "following": await whole_list(stub, Direction.FOLLOWING, U),
        "a_followers": await whole_list(stub, Direction.FOLLOWERS, A),
    }


async def test_deactivate_hides_at_once_archives_then_reactivate_restores_everything_intact(
    counted: SharedService, people: People
) -> None:
    stub, (U, A, B, _, D, P, _) = counted.stub, people
    before = await seed(stub, people)
    await eventually(lambda: all_counts(stub, [U, A]), lambda c: c == {U: (3, 2), A: (1, 1)})

    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    # At once, whatever the job has done: no edge or request touches U in any answer.
    assert not (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=A, followee_id=U))).following
    assert await relationships(stub, A, [U]) == [(U, frozenset())]
    assert await relationships(stub, U, [A, P]) == [(A, frozenset()), (P, frozenset())]
    assert (await stub.GetCounts(pb.GetCountsRequest(user_id=U))).followers_count == 0
    assert await whole_list(stub, Direction.FOLLOWERS, U) == []
    await rejected(stub.Follow(pb.FollowRequest(follower_id=B, followee_id=U)), FAILED, "ACCOUNT_DEACTIVATED")
    await rejected(stub.Follow(pb.FollowRequest(follower_id=U, followee_id=B)), FAILED, "ACCOUNT_DEACTIVATED")
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))  # idempotent

    done = await settled(stub, U, pb.ACCOUNT_STATE_DEACTIVATED)
    assert (done.edges_done, done.edges_total) == (6, 6)  # 3 followers, 2 followees, 1 request
    # Gone from everyone else's lists and counts, counted out exactly by the consumer.
    assert await whole_list(stub, Direction.FOLLOWERS, A) == []
    assert await requests_of(stub, P) == []
    await eventually(lambda: all_counts(stub, [A, B, D]), lambda c: c == {A: (0, 0), B: (0, 0), D: (0, 0)})

    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    assert (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=U, followee_id=A))).following is False
    back = await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
    assert (back.edges_done, back.edges_total) == (6, 6)
    # The same followed_at, so the same places in every list; the request pending again.
    assert await whole_list(stub, Direction.FOLLOWERS, U) == before["followers"]
    assert await whole_list(stub, Direction.FOLLOWING, U) == before["following"]
    assert await whole_list(stub, Direction.FOLLOWERS, A) == before["a_followers"]
    assert await requests_of(stub, P) == [U]
    await eventually(lambda: all_counts(stub, [U, A, B]), lambda c: c == {U: (3, 2), A: (1, 1), B: (0, 1)})
    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))  # idempotent on an active account


async def test_what_cannot_come_back_stays_out_and_an_away_account_gets_its_edge_back_later(
    counted: SharedService, people: People
) -> None:
    stub, (U, A, B, C, D, P, _) = counted.stub, people
    await seed(stub, people)
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_DEACTIVATED)
    await block(stub, B, U)  # B blocks U meanwhile: B's follow of U does not come back
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=C))  # C is away when U returns
    await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=D))  # D is gone for good
    await settled(stub, D, pb.ACCOUNT_STATE_DELETED)

    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWERS, U)] == [A]
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWING, U)] == [A]
    assert await requests_of(stub, P) == [U]

    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=C))  # C's follow of U comes back with C
    await settled(stub, C, pb.ACCOUNT_STATE_ACTIVE)
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWERS, U)] == [C, A]
    await eventually(lambda: all_counts(stub, [U, C, D]), lambda c: c == {U: (2, 1), C: (0, 1), D: (0, 0)})


async def test_delete_removes_everything_about_the_account_and_is_final(counted: SharedService, people: People) -> None:
    stub, settings, (U, A, B, C, D, P, E) = counted.stub, counted.settings, people
    await seed(stub, people)
    await block(stub, U, B)
    await stub.Mute(pb.MuteRequest(muter_id=U, muted_id=C))
    await block(stub, E, U)  # others' blocks and mutes of U go too
    await stub.Mute(pb.MuteRequest(muter_id=A, muted_id=U))
    assert await relationships(stub, E, [U]) == [(U, frozenset({"blocking"}))]  # now cached
    assert await relationships(stub, U, [C, B]) == [
        (C, frozenset({"muting", "followed_by"})),
        (B, frozenset({"blocking"})),
    ]
    await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=U))
    await rejected(stub.Follow(pb.FollowRequest(follower_id=A, followee_id=U)), FAILED, "ACCOUNT_DELETED")
    await rejected(stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U)), FAILED, "ACCOUNT_DELETED")
    await rejected(stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U)), FAILED, "ACCOUNT_DELETED")
    await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=U))  # idempotent

    done = await settled(stub, U, pb.ACCOUNT_STATE_DELETED)
    assert (done.edges_done, done.edges_total) == (5, 5)  # the block took B's follow: A, C; A, D; P
    await rejected(stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U)), FAILED, "ACCOUNT_DELETED")
    await eventually(lambda: all_counts(stub, [A, B, C, D]), lambda c: all(v == (0, 0) for v in c.values()))
    assert await relationships(stub, E, [U]) == [(U, frozenset())]  # E's block of U is gone, cache included
    assert await relationships(stub, U, [C, B]) == [(C, frozenset()), (B, frozenset())]  # and U's own
    assert not (await stub.ListMutes(pb.ListMutesRequest(user_id=A))).mutes
    assert await requests_of(stub, P) == []
    dynamo = AsyncDynamo.build(settings)
    try:
        left = await dynamo.call(
            "query",
            TableName=settings.table("followers"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"N": str(U)}},
            ConsistentRead=True,
        )
        assert [i["sk"]["S"] for i in left["Items"]] == ["A"]  # only the state: nothing else about U
        status = await DynamoAccounts(dynamo, TableNames(settings.table_prefix)).status(U)
        assert status.state.deleted
        assert await partition_items(dynamo, settings.table("following"), U) == {}  # no O, no mirror
        for other in (B, C, E, A):  # the reverses of U's own block and mute, and of others' of U
            left_about_u = [
                sk for sk in await partition_items(dynamo, settings.table("followers"), other) if str(U) in sk
            ]
            assert left_about_u == [], other
        counters = await dynamo.call(
            "get_item", TableName=settings.table("users"), Key={"user_id": {"N": str(U)}}, ConsistentRead=True
        )
        assert "Item" not in counters  # the consumer counted its edges out before the row went
    finally:
        dynamo.close()


async def test_a_reactivation_racing_a_deactivation_ends_in_the_later_state(
    plain: SharedService, people: People
) -> None:
    stub, (U, A, B, C, D, P, _) = plain.stub, people
    await seed(stub, people)
    for _ in range(3):
        await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
        await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWERS, U)] == [C, B, A]
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWING, U)] == [D, A]
    assert await requests_of(stub, P) == [U]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.DeactivateAccount(pb.DeactivateAccountRequest(user_id=0)),
        lambda s: s.ReactivateAccount(pb.ReactivateAccountRequest()),
        lambda s: s.DeleteAccount(pb.DeleteAccountRequest(user_id=0)),
        lambda s: s.GetAccountState(pb.GetAccountStateRequest(user_id=0)),
    ],
    ids=["deactivate", "reactivate", "delete", "state"],
)
async def test_an_id_of_0_is_invalid(plain: SharedService, call: object) -> None:
    info = await rejected(call(plain.stub), INVALID, "INVALID_USER_ID")  # type: ignore[operator]
    assert info.metadata["field"] == "user_id"


async def test_an_account_never_deactivated_is_active_with_no_job(plain: SharedService, people: People) -> None:
    stub, never = plain.stub, people.U + 989
    reply = await state_of(stub, never)
    assert (reply.state, reply.edges_done, reply.edges_total) == (pb.ACCOUNT_STATE_ACTIVE, 0, 0)
    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=never))
    assert (await state_of(stub, never)).state == pb.ACCOUNT_STATE_ACTIVE


async def test_lists_of_an_account_out_of_the_graph_still_check_their_page_token(
    plain: SharedService, people: People
) -> None:
    stub, U = plain.stub, people.U
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    await asyncio.gather(
        rejected(
            stub.ListFollowers(pb.ListFollowersRequest(user_id=U, page_token="forged")), INVALID, "INVALID_PAGE_TOKEN"
        ),
        rejected(stub.ListFollowing(pb.ListFollowingRequest(user_id=U, page_size=-1)), INVALID, "INVALID_PAGE_SIZE"),
    )


async def test_timelines_hide_an_account_away_and_get_its_tweets_back_with_its_followers(
    plain: SharedService, people: People
) -> None:
    """SPEC §3b/§5: an account away is shown in no home timeline and its own is empty; its
    reactivation backfills the followers it gets back like a new follow; its deletion removes its
    own home timeline and recent tweets."""
    stub, settings, server, (U, A, B, _, _, _, _) = plain.stub, plain.settings, plain.server, people
    timelines = build_timelines(settings)
    assert timelines is not None
    async with timeline_stub_for(server.port) as reader:
        try:
            await follow(stub, A, U)
            await follow(stub, U, B)
            await timelines.record_tweet(U, 5_000)  # as the fanout records a tweet of U's, pushed to A
            await timelines.merge(A, [5_000])
            await timelines.record_tweet(B, 5_001)
            await timelines.merge(U, [5_001])
            assert await whole_timeline(reader, A) == [5_000]
            assert await whole_timeline(reader, U) == [5_001]

            await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
            assert await whole_timeline(reader, A) == []  # at once, whatever the job has done
            assert await whole_timeline(reader, U) == []
            await settled(stub, U, pb.ACCOUNT_STATE_DEACTIVATED)
            await timelines.remove(A, [5_000])  # the entry left A's timeline meanwhile (its cap, say)

            await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
            await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
            assert await whole_timeline(reader, A) == [5_000]  # backfilled with the follow it got back
            assert await whole_timeline(reader, U) == [5_001]

            await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=U))
            await settled(stub, U, pb.ACCOUNT_STATE_DELETED)
            assert (await timelines.home(U), await timelines.recent(U)) == ([], [])
            assert await whole_timeline(reader, A) == []
        finally:
            await timelines.aclose()


async def test_an_unfollow_or_a_rejection_while_an_account_is_away_is_not_undone_by_its_return(
    plain: SharedService, people: People
) -> None:
    """The later word wins: A unfollows U and P rejects U's request while U is away (their items are
    archived, not stored as an edge or a request): neither comes back with U."""
    stub, (U, A, B, C, D, P, _) = plain.stub, people
    await seed(stub, people)
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_DEACTIVATED)
    await stub.Unfollow(pb.UnfollowRequest(follower_id=A, followee_id=U))
    await stub.RemoveFollower(pb.RemoveFollowerRequest(user_id=U, follower_id=B))
    await stub.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=P, requester_id=U))
    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    back = await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
    assert back.edges_done == back.edges_total == 3  # C's follow, and U's of A and D
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWERS, U)] == [C]
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWING, U)] == [D, A]
    assert await requests_of(stub, P) == []


async def test_a_deletion_leaves_no_cached_block_or_mute_of_the_account(plain: SharedService, people: People) -> None:
    """Without the counters consumer (whose stream repairs would hide a missing write-through): the
    cached relationships of the blocks and mutes a deletion removed go with them."""
    stub, (U, A, B, C, _, _, E) = plain.stub, people
    await block(stub, E, U)
    await stub.Mute(pb.MuteRequest(muter_id=A, muted_id=U))
    await block(stub, U, B)
    await stub.Mute(pb.MuteRequest(muter_id=U, muted_id=C))
    for _ in range(2):  # filled, then read from the cache
        assert await relationships(stub, E, [U]) == [(U, frozenset({"blocking"}))]
        assert await relationships(stub, A, [U]) == [(U, frozenset({"muting"}))]
        assert await relationships(stub, B, [U]) == [(U, frozenset({"blocked_by"}))]
    await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_DELETED)
    for other in (E, A, B, C):
        assert await relationships(stub, other, [U]) == [(U, frozenset())], other


async def test_a_block_while_an_account_is_away_ends_its_archived_follows_even_once_lifted(
    plain: SharedService, people: People
) -> None:
    """SPEC §3b: an edge whose other side blocked the account meanwhile is not restored, also when
    the block is lifted before the account comes back."""
    stub, (U, A, B, C, D, _, _) = plain.stub, people
    await seed(stub, people)
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_DEACTIVATED)
    await block(stub, A, U)
    await stub.Unblock(pb.UnblockRequest(blocker_id=A, blocked_id=U))
    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=U))
    await settled(stub, U, pb.ACCOUNT_STATE_ACTIVE)
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWERS, U)] == [C, B]
    assert [u for u, _ in await whole_list(stub, Direction.FOLLOWING, U)] == [D]
