"""Thin gRPC handlers: decode the request, call the service layer, encode the response.

Errors are raised as domain errors and mapped once, in ``interceptors.py``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.models import Direction, Edge
from graph_service.service import FollowState, GraphService

__all__ = ["SocialGraphServicer"]

Context = Any  # grpc.aio.ServicerContext; unused by the handlers themselves

_STATES = {
    FollowState.FOLLOWING: pb.FOLLOW_STATE_FOLLOWING,
    FollowState.REQUESTED: pb.FOLLOW_STATE_REQUESTED,
}


def _entries(edges: list[Edge]) -> list[pb.FollowEntry]:
    out = []
    for edge in edges:
        at = Timestamp(seconds=edge.at_us // 1_000_000, nanos=(edge.at_us % 1_000_000) * 1000)
        out.append(pb.FollowEntry(user_id=edge.user_id, followed_at=at))
    return out


class SocialGraphServicer(pb_grpc.SocialGraphServiceServicer):
    def __init__(self, service: GraphService) -> None:
        self._service = service

    async def Follow(self, request: pb.FollowRequest, context: Context) -> pb.FollowResponse:
        state = await self._service.follow(request.follower_id, request.followee_id)
        return pb.FollowResponse(state=_STATES[state])

    async def Unfollow(self, request: pb.UnfollowRequest, context: Context) -> pb.UnfollowResponse:
        await self._service.unfollow(request.follower_id, request.followee_id)
        return pb.UnfollowResponse()

    async def IsFollowing(self, request: pb.IsFollowingRequest, context: Context) -> pb.IsFollowingResponse:
        following = await self._service.is_following(request.follower_id, request.followee_id)
        return pb.IsFollowingResponse(following=following)

    async def ListFollowers(self, request: pb.ListFollowersRequest, context: Context) -> pb.ListFollowersResponse:
        page = await self._service.list_edges(
            Direction.FOLLOWERS, request.user_id, request.page_size, request.page_token
        )
        return pb.ListFollowersResponse(followers=_entries(page.entries), next_page_token=page.next_page_token)

    async def ListFollowing(self, request: pb.ListFollowingRequest, context: Context) -> pb.ListFollowingResponse:
        page = await self._service.list_edges(
            Direction.FOLLOWING, request.user_id, request.page_size, request.page_token
        )
        return pb.ListFollowingResponse(following=_entries(page.entries), next_page_token=page.next_page_token)

    async def GetCounts(self, request: pb.GetCountsRequest, context: Context) -> pb.GetCountsResponse:
        counts = await self._service.get_counts(request.user_id)
        return pb.GetCountsResponse(followers_count=counts.followers, following_count=counts.following)

    async def BatchGetCounts(self, request: pb.BatchGetCountsRequest, context: Context) -> pb.BatchGetCountsResponse:
        rows = await self._service.batch_get_counts(list(request.user_ids))
        return pb.BatchGetCountsResponse(
            counts=[pb.UserCounts(user_id=u, followers_count=c.followers, following_count=c.following) for u, c in rows]
        )
