"""Concurrent writes of the same edge: the cache must end in the state DynamoDB committed last."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.settings import Settings
from tests.support.runtimes import running_server, stub_for


async def test_racing_follow_and_unfollow_of_one_edge_leave_no_stale_cache(settings: Settings) -> None:
    """Follow and Unfollow of one pair racing each other: cached reads then agree with an uncached server."""
    rng = random.Random(7)
    async with (
        running_server(settings) as cached,
        running_server(replace(settings, redis_url="")) as direct,
        stub_for(cached.port) as stub,
        stub_for(direct.port) as truth,
    ):
        pairs = [(100 + i, 200) for i in range(5)]
        # 20 rounds: each of the 5 pairs 4 times, starting both followed and not, and all 3 orders of
        # Follow, Unfollow, Follow sent (seed 7); more rounds only repeat the same race for better odds.
        for round_ in range(20):
            follower, followee = pairs[round_ % len(pairs)]
            # warm the cache so stale entries would be visible
            await stub.IsFollowing(pb.IsFollowingRequest(follower_id=follower, followee_id=followee))
            await stub.ListFollowers(pb.ListFollowersRequest(user_id=followee))
            await stub.ListFollowing(pb.ListFollowingRequest(user_id=follower))
            calls = [
                stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee)),
                stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee)),
                stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee)),
            ]
            rng.shuffle(calls)
            await asyncio.gather(*calls)
            want = await truth.IsFollowing(pb.IsFollowingRequest(follower_id=follower, followee_id=followee))
            got = await stub.IsFollowing(pb.IsFollowingRequest(follower_id=follower, followee_id=followee))
            assert got.following == want.following, f"round {round_}"
            want_list = await truth.ListFollowers(pb.ListFollowersRequest(user_id=followee))
            got_list = await stub.ListFollowers(pb.ListFollowersRequest(user_id=followee))
            assert list(got_list.followers) == list(want_list.followers), f"round {round_}"
            want_following = await truth.ListFollowing(pb.ListFollowingRequest(user_id=follower))
            got_following = await stub.ListFollowing(pb.ListFollowingRequest(user_id=follower))
            assert list(got_following.following) == list(want_following.following), f"round {round_}"
