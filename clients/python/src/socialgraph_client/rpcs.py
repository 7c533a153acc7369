"""The one description of the service's RPCs that both clients are built on.

Each entry names the method's path, its request and response types, and its kind, which picks the
default deadline. The transports call a path with the types given here, so no generated stub class is
needed; ``tests/unit/client/test_rpcs.py`` checks this table against the services the protos
declare, so an RPC added to a proto and not here fails the build.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import timeline_pb2 as tpb

__all__ = ["ALL", "Kind", "Rpc"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)

GRAPH = pb.DESCRIPTOR.services_by_name["SocialGraphService"].full_name
TIMELINES = tpb.DESCRIPTOR.services_by_name["TimelineService"].full_name


class Kind(Enum):
    """What a call does, which decides its default deadline (``Deadlines``)."""

    READ = "read"
    """A point or page read, served from the cache when warm."""
    WRITE = "write"
    """A change to the graph (a DynamoDB transaction)."""
    HEAVY = "heavy"
    """A read that walks or intersects lists (suggestions, known and mutual followers)."""


@dataclass(frozen=True, slots=True)
class Rpc(Generic[Req, Rep]):
    service: str
    name: str
    request: type[Req]
    response: type[Rep]
    kind: Kind

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


FOLLOW = Rpc(GRAPH, "Follow", pb.FollowRequest, pb.FollowResponse, Kind.WRITE)
UNFOLLOW = Rpc(GRAPH, "Unfollow", pb.UnfollowRequest, pb.UnfollowResponse, Kind.WRITE)
IS_FOLLOWING = Rpc(GRAPH, "IsFollowing", pb.IsFollowingRequest, pb.IsFollowingResponse, Kind.READ)
LIST_FOLLOWERS = Rpc(GRAPH, "ListFollowers", pb.ListFollowersRequest, pb.ListFollowersResponse, Kind.READ)
LIST_FOLLOWING = Rpc(GRAPH, "ListFollowing", pb.ListFollowingRequest, pb.ListFollowingResponse, Kind.READ)
GET_COUNTS = Rpc(GRAPH, "GetCounts", pb.GetCountsRequest, pb.GetCountsResponse, Kind.READ)
BATCH_GET_COUNTS = Rpc(GRAPH, "BatchGetCounts", pb.BatchGetCountsRequest, pb.BatchGetCountsResponse, Kind.READ)
GET_RELATIONSHIPS = Rpc(GRAPH, "GetRelationships", pb.GetRelationshipsRequest, pb.GetRelationshipsResponse, Kind.READ)
LIST_KNOWN_FOLLOWERS = Rpc(
    GRAPH, "ListKnownFollowers", pb.ListKnownFollowersRequest, pb.ListKnownFollowersResponse, Kind.HEAVY
)
LIST_MUTUAL_FOLLOWS = Rpc(
    GRAPH, "ListMutualFollows", pb.ListMutualFollowsRequest, pb.ListMutualFollowsResponse, Kind.HEAVY
)
SUGGEST_FOLLOWS = Rpc(GRAPH, "SuggestFollows", pb.SuggestFollowsRequest, pb.SuggestFollowsResponse, Kind.HEAVY)
SET_PRIVACY = Rpc(GRAPH, "SetPrivacy", pb.SetPrivacyRequest, pb.SetPrivacyResponse, Kind.WRITE)
LIST_FOLLOW_REQUESTS = Rpc(
    GRAPH, "ListFollowRequests", pb.ListFollowRequestsRequest, pb.ListFollowRequestsResponse, Kind.READ
)
ACCEPT_FOLLOW_REQUEST = Rpc(
    GRAPH, "AcceptFollowRequest", pb.AcceptFollowRequestRequest, pb.AcceptFollowRequestResponse, Kind.WRITE
)
REJECT_FOLLOW_REQUEST = Rpc(
    GRAPH, "RejectFollowRequest", pb.RejectFollowRequestRequest, pb.RejectFollowRequestResponse, Kind.WRITE
)
BLOCK = Rpc(GRAPH, "Block", pb.BlockRequest, pb.BlockResponse, Kind.WRITE)
UNBLOCK = Rpc(GRAPH, "Unblock", pb.UnblockRequest, pb.UnblockResponse, Kind.WRITE)
REMOVE_FOLLOWER = Rpc(GRAPH, "RemoveFollower", pb.RemoveFollowerRequest, pb.RemoveFollowerResponse, Kind.WRITE)
MUTE = Rpc(GRAPH, "Mute", pb.MuteRequest, pb.MuteResponse, Kind.WRITE)
UNMUTE = Rpc(GRAPH, "Unmute", pb.UnmuteRequest, pb.UnmuteResponse, Kind.WRITE)
LIST_MUTES = Rpc(GRAPH, "ListMutes", pb.ListMutesRequest, pb.ListMutesResponse, Kind.READ)
# The lifecycle writes return at once (a background job does the work), so the write deadline fits.
DEACTIVATE_ACCOUNT = Rpc(
    GRAPH, "DeactivateAccount", pb.DeactivateAccountRequest, pb.DeactivateAccountResponse, Kind.WRITE
)
REACTIVATE_ACCOUNT = Rpc(
    GRAPH, "ReactivateAccount", pb.ReactivateAccountRequest, pb.ReactivateAccountResponse, Kind.WRITE
)
DELETE_ACCOUNT = Rpc(GRAPH, "DeleteAccount", pb.DeleteAccountRequest, pb.DeleteAccountResponse, Kind.WRITE)
GET_ACCOUNT_STATE = Rpc(GRAPH, "GetAccountState", pb.GetAccountStateRequest, pb.GetAccountStateResponse, Kind.READ)
GET_HOME_TIMELINE = Rpc(
    TIMELINES, "GetHomeTimeline", tpb.GetHomeTimelineRequest, tpb.GetHomeTimelineResponse, Kind.READ
)

ALL: tuple[Rpc[Any, Any], ...] = (
    FOLLOW,
    UNFOLLOW,
    IS_FOLLOWING,
    LIST_FOLLOWERS,
    LIST_FOLLOWING,
    GET_COUNTS,
    BATCH_GET_COUNTS,
    GET_RELATIONSHIPS,
    LIST_KNOWN_FOLLOWERS,
    LIST_MUTUAL_FOLLOWS,
    SUGGEST_FOLLOWS,
    SET_PRIVACY,
    LIST_FOLLOW_REQUESTS,
    ACCEPT_FOLLOW_REQUEST,
    REJECT_FOLLOW_REQUEST,
    BLOCK,
    UNBLOCK,
    REMOVE_FOLLOWER,
    MUTE,
    UNMUTE,
    LIST_MUTES,
    DEACTIVATE_ACCOUNT,
    REACTIVATE_ACCOUNT,
    DELETE_ACCOUNT,
    GET_ACCOUNT_STATE,
    GET_HOME_TIMELINE,
)
"""Every RPC the clients call; a test checks it against the protos' service descriptors."""
