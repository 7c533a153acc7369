"""Follow, Unfollow, IsFollowing and the counts, against DynamoDB Local and Redis."""

from __future__ import annotations

import asyncio

from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from tests.support.polling import eventually


async def counts(stub: pb_grpc.SocialGraphServiceStub, user_id: int) -> tuple[int, int]:
    reply = await stub.GetCounts(pb.GetCountsRequest(user_id=user_id))
    return reply.followers_count, reply.following_count


async def test_repeated_follow_and_unfollow_are_idempotent_and_counted_once(
    stub: pb_grpc.SocialGraphServiceStub, counters: asyncio.Task[None]
) -> None:
    """Five follows make one edge and count once; five unfollows remove it and count once."""
    for _ in range(5):
        reply = await stub.Follow(pb.FollowRequest(follower_id=1, followee_id=2))
        assert reply.state == pb.FOLLOW_STATE_FOLLOWING
    assert (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))).following
    assert not (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=2, followee_id=1))).following
    listed = await stub.ListFollowers(pb.ListFollowersRequest(user_id=2))
    assert [e.user_id for e in listed.followers] == [1]
    assert listed.next_page_token == ""
    assert await eventually(lambda: counts(stub, 2), lambda c: c == (1, 0)) == (1, 0)
    assert await counts(stub, 1) == (0, 1)

    for _ in range(5):
        await stub.Unfollow(pb.UnfollowRequest(follower_id=1, followee_id=2))
    assert not (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))).following
    assert (await stub.ListFollowing(pb.ListFollowingRequest(user_id=1))).following == []
    await eventually(lambda: counts(stub, 2), lambda c: c == (0, 0))
    await eventually(lambda: counts(stub, 1), lambda c: c == (0, 0))


async def test_lists_are_newest_first_and_carry_timestamps(stub: pb_grpc.SocialGraphServiceStub) -> None:
    """ListFollowers and ListFollowing order by follow time, newest first."""
    for follower in (10, 11, 12):
        await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=99))
    for followee in (20, 21, 22):
        await stub.Follow(pb.FollowRequest(follower_id=10, followee_id=followee))
    followers = (await stub.ListFollowers(pb.ListFollowersRequest(user_id=99))).followers
    assert [e.user_id for e in followers] == [12, 11, 10]
    stamps = [e.followed_at.ToMicroseconds() for e in followers]
    assert stamps == sorted(stamps, reverse=True)
    assert stamps[-1] > 0
    following = (await stub.ListFollowing(pb.ListFollowingRequest(user_id=10))).following
    assert [e.user_id for e in following] == [22, 21, 20, 99]
