"""Thin gRPC handlers: decode the request, call the rule (``graph_service/rules``), encode the response.

Errors are raised as domain errors and mapped once, in ``interceptors.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.api.first_page_replies import FirstPageReplies
from graph_service.domain.accounts import Lifecycle
from graph_service.domain.models import Direction, Edge, FollowState
from graph_service.domain.times import to_timestamp
from graph_service.rules.graph import GraphRules

__all__ = ["SocialGraphServicer"]

Context = Any  # grpc.aio.ServicerContext; unused by the handlers themselves

_STATES = {
    FollowState.FOLLOWING: pb.FOLLOW_STATE_FOLLOWING,
    FollowState.REQUESTED: pb.FOLLOW_STATE_REQUESTED,
}


ACCOUNT_STATES = {
    Lifecycle.ACTIVE: pb.ACCOUNT_STATE_ACTIVE,
    Lifecycle.DEACTIVATING: pb.ACCOUNT_STATE_DEACTIVATING,
    Lifecycle.DEACTIVATED: pb.ACCOUNT_STATE_DEACTIVATED,
    Lifecycle.REACTIVATING: pb.ACCOUNT_STATE_REACTIVATING,
    Lifecycle.DELETING: pb.ACCOUNT_STATE_DELETING,
    Lifecycle.DELETED: pb.ACCOUNT_STATE_DELETED,
}


def _entries(edges: Sequence[Edge]) -> list[pb.FollowEntry]:
    return [pb.FollowEntry(user_id=edge.user_id, followed_at=to_timestamp(edge.at_us)) for edge in edges]


class SocialGraphServicer(pb_grpc.SocialGraphServiceServicer):
    def __init__(self, rules: GraphRules) -> None:
        self._rules = rules
        self._followers: FirstPageReplies[pb.ListFollowersResponse] = FirstPageReplies()
        self._following: FirstPageReplies[pb.ListFollowingResponse] = FirstPageReplies()

    async def Follow(self, request: pb.FollowRequest, context: Context) -> pb.FollowResponse:
        state = await self._rules.follows.follow(request.follower_id, request.followee_id)
        return pb.FollowResponse(state=_STATES[state])

    async def Unfollow(self, request: pb.UnfollowRequest, context: Context) -> pb.UnfollowResponse:
        await self._rules.follows.unfollow(request.follower_id, request.followee_id)
        return pb.UnfollowResponse()

    async def IsFollowing(self, request: pb.IsFollowingRequest, context: Context) -> pb.IsFollowingResponse:
        following = await self._rules.queries.is_following(request.follower_id, request.followee_id)
        return pb.IsFollowingResponse(following=following)

    async def ListFollowers(self, request: pb.ListFollowersRequest, context: Context) -> pb.ListFollowersResponse:
        page = await self._rules.queries.list_edges(
            Direction.FOLLOWERS, request.user_id, request.page_size, request.page_token
        )
        return self._followers.reply(
            request.user_id,
            request.page_token,
            page,
            lambda: pb.ListFollowersResponse(followers=_entries(page.entries), next_page_token=page.next_page_token),
        )

    async def ListFollowing(self, request: pb.ListFollowingRequest, context: Context) -> pb.ListFollowingResponse:
        page = await self._rules.queries.list_edges(
            Direction.FOLLOWING, request.user_id, request.page_size, request.page_token
        )
        return self._following.reply(
            request.user_id,
            request.page_token,
            page,
            lambda: pb.ListFollowingResponse(following=_entries(page.entries), next_page_token=page.next_page_token),
        )

    async def GetCounts(self, request: pb.GetCountsRequest, context: Context) -> pb.GetCountsResponse:
        counts = await self._rules.queries.get_counts(request.user_id)
        return pb.GetCountsResponse(followers_count=counts.followers, following_count=counts.following)

    async def BatchGetCounts(self, request: pb.BatchGetCountsRequest, context: Context) -> pb.BatchGetCountsResponse:
        rows = await self._rules.queries.batch_get_counts(list(request.user_ids))
        return pb.BatchGetCountsResponse(
            counts=[pb.UserCounts(user_id=u, followers_count=c.followers, following_count=c.following) for u, c in rows]
        )

    async def GetRelationships(
        self, request: pb.GetRelationshipsRequest, context: Context
    ) -> pb.GetRelationshipsResponse:
        rows = await self._rules.queries.get_relationships(request.actor_id, list(request.target_ids))
        return pb.GetRelationshipsResponse(
            relationships=[
                pb.Relationship(
                    target_id=target,
                    following=r.following,
                    followed_by=r.followed_by,
                    requested=r.requested,
                    requested_by=r.requested_by,
                    blocking=r.blocking,
                    blocked_by=r.blocked_by,
                    muting=r.muting,
                    muting_notifications=r.muting_notifications,
                )
                for target, r in rows
            ]
        )

    async def ListKnownFollowers(
        self, request: pb.ListKnownFollowersRequest, context: Context
    ) -> pb.ListKnownFollowersResponse:
        page = await self._rules.known.list_known_followers(
            request.viewer_id, request.user_id, request.page_size, request.page_token
        )
        return pb.ListKnownFollowersResponse(followers=_entries(page.entries), next_page_token=page.next_page_token)

    async def ListMutualFollows(
        self, request: pb.ListMutualFollowsRequest, context: Context
    ) -> pb.ListMutualFollowsResponse:
        page = await self._rules.known.list_mutual_follows(request.user_id, request.page_size, request.page_token)
        return pb.ListMutualFollowsResponse(
            users=[pb.UserRef(user_id=e.user_id) for e in page.entries], next_page_token=page.next_page_token
        )

    async def SuggestFollows(self, request: pb.SuggestFollowsRequest, context: Context) -> pb.SuggestFollowsResponse:
        found = await self._rules.suggestions.suggest_follows(request.user_id, request.limit)
        return pb.SuggestFollowsResponse(
            suggestions=[pb.Suggestion(user_id=s.user_id, score=s.score, mutual_count=s.mutual_count) for s in found]
        )

    async def SetPrivacy(self, request: pb.SetPrivacyRequest, context: Context) -> pb.SetPrivacyResponse:
        await self._rules.requests.set_privacy(request.user_id, request.private)
        return pb.SetPrivacyResponse()

    async def ListFollowRequests(
        self, request: pb.ListFollowRequestsRequest, context: Context
    ) -> pb.ListFollowRequestsResponse:
        page = await self._rules.requests.list_requests(request.user_id, request.page_size, request.page_token)
        return pb.ListFollowRequestsResponse(
            requests=[
                pb.FollowRequestEntry(user_id=e.user_id, requested_at=to_timestamp(e.at_us)) for e in page.entries
            ],
            next_page_token=page.next_page_token,
        )

    async def AcceptFollowRequest(
        self, request: pb.AcceptFollowRequestRequest, context: Context
    ) -> pb.AcceptFollowRequestResponse:
        await self._rules.requests.accept_request(request.user_id, request.requester_id)
        return pb.AcceptFollowRequestResponse()

    async def RejectFollowRequest(
        self, request: pb.RejectFollowRequestRequest, context: Context
    ) -> pb.RejectFollowRequestResponse:
        await self._rules.requests.reject_request(request.user_id, request.requester_id)
        return pb.RejectFollowRequestResponse()

    async def Block(self, request: pb.BlockRequest, context: Context) -> pb.BlockResponse:
        await self._rules.blocks.block(request.blocker_id, request.blocked_id)
        return pb.BlockResponse()

    async def Unblock(self, request: pb.UnblockRequest, context: Context) -> pb.UnblockResponse:
        await self._rules.blocks.unblock(request.blocker_id, request.blocked_id)
        return pb.UnblockResponse()

    async def RemoveFollower(self, request: pb.RemoveFollowerRequest, context: Context) -> pb.RemoveFollowerResponse:
        await self._rules.follows.remove_follower(request.user_id, request.follower_id)
        return pb.RemoveFollowerResponse()

    async def Mute(self, request: pb.MuteRequest, context: Context) -> pb.MuteResponse:
        duration = request.duration  # absent: 0 seconds and 0 nanos
        await self._rules.mutes.mute_for(
            request.muter_id, request.muted_id, duration.seconds, duration.nanos, request.notifications
        )
        return pb.MuteResponse()

    async def Unmute(self, request: pb.UnmuteRequest, context: Context) -> pb.UnmuteResponse:
        await self._rules.mutes.unmute(request.muter_id, request.muted_id)
        return pb.UnmuteResponse()

    async def ListMutes(self, request: pb.ListMutesRequest, context: Context) -> pb.ListMutesResponse:
        page = await self._rules.mutes.list_mutes(request.user_id, request.page_size, request.page_token)
        return pb.ListMutesResponse(
            mutes=[
                pb.MuteEntry(
                    user_id=m.user_id,
                    muted_at=to_timestamp(m.at_us),
                    expires_at=to_timestamp(m.expires_us) if m.expires_us else None,
                    notifications=m.notifications,
                )
                for m in page.entries
            ],
            next_page_token=page.next_page_token,
        )

    async def DeactivateAccount(
        self, request: pb.DeactivateAccountRequest, context: Context
    ) -> pb.DeactivateAccountResponse:
        await self._rules.accounts.deactivate(request.user_id)
        return pb.DeactivateAccountResponse()

    async def ReactivateAccount(
        self, request: pb.ReactivateAccountRequest, context: Context
    ) -> pb.ReactivateAccountResponse:
        await self._rules.accounts.reactivate(request.user_id)
        return pb.ReactivateAccountResponse()

    async def DeleteAccount(self, request: pb.DeleteAccountRequest, context: Context) -> pb.DeleteAccountResponse:
        await self._rules.accounts.delete(request.user_id)
        return pb.DeleteAccountResponse()

    async def GetAccountState(self, request: pb.GetAccountStateRequest, context: Context) -> pb.GetAccountStateResponse:
        status = await self._rules.accounts.status(request.user_id)
        return pb.GetAccountStateResponse(
            state=ACCOUNT_STATES[status.state],
            edges_done=status.edges_done,
            edges_total=max(status.edges_total, status.edges_done),
        )
