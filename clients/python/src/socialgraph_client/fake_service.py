"""``FakeGraph``: the service of ``socialgraph_client.testing``, answering the clients' requests in memory.

It takes the request messages the clients build and returns the response messages the service
would, or raises a ``Refusal`` with the service's status code, reason and metadata. The RPCs of the
account lifecycle and the home timeline are not modelled: they answer ``UNIMPLEMENTED``, as a server
older than the client would.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import grpc
from google.protobuf import timestamp_pb2
from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb

from socialgraph_client import rpcs
from socialgraph_client.fake_graph import DEFAULT_MAX_FOLLOWING, GraphState, Refusal
from socialgraph_client.fake_pages import Pages
from socialgraph_client.reasons import Reason
from socialgraph_client.values import FollowState

__all__ = ["FakeGraph"]

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=Message)

MAX_SUGGESTIONS = 100
DEFAULT_SUGGESTIONS = 20
SUGGEST_FOLLOWEE_SAMPLE = 200
"""The service's defaults: the user's most recent followees looked at, and of each its most recent
followees (``SG_SUGGEST_FOLLOWEE_SAMPLE``, ``SG_SUGGEST_PER_FOLLOWEE``)."""
SUGGEST_PER_FOLLOWEE = 200


def _at(at_us: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=at_us // 1_000_000, nanos=at_us % 1_000_000 * 1000)


def _newest(entries: Mapping[int, int], count: int) -> list[int]:
    return [user for _, user in sorted(((at, user) for user, at in entries.items()), reverse=True)[:count]]


class FakeGraph:
    """One in-memory graph, as one server would hold it: share it between clients (a blocking and an
    asyncio one, several threads) to give them the same graph, and page tokens good for each.

    ``max_following``: the following cap of the service (``SG_MAX_FOLLOWING``, 7,500 by default; 0:
    no cap, as there): a follow or request past it is ``FailedPrecondition`` ``FOLLOW_LIMIT``. There
    is no follow rate limit, no authentication, and counts are exact at once (the service's are
    within about a second). ``fail_next`` makes calls fail as an outage or a limit would.
    """

    def __init__(self, *, max_following: int = DEFAULT_MAX_FOLLOWING) -> None:
        if isinstance(max_following, bool) or not isinstance(max_following, int) or max_following < 0:
            raise ValueError(f"max_following must be an integer from 0 (no cap) up, not {max_following!r}")
        self._state = GraphState(max_following)
        self._pages = Pages()
        self._lock = threading.Lock()
        self._failures: deque[Refusal] = deque()
        self._answers: dict[str, Callable[[Any], Message]] = {
            rpcs.FOLLOW.path: self._follow,
            rpcs.UNFOLLOW.path: self._unfollow,
            rpcs.IS_FOLLOWING.path: self._is_following,
            rpcs.LIST_FOLLOWERS.path: self._list_followers,
            rpcs.LIST_FOLLOWING.path: self._list_following,
            rpcs.GET_COUNTS.path: self._get_counts,
            rpcs.BATCH_GET_COUNTS.path: self._batch_get_counts,
            rpcs.GET_RELATIONSHIPS.path: self._get_relationships,
            rpcs.LIST_KNOWN_FOLLOWERS.path: self._list_known_followers,
            rpcs.LIST_MUTUAL_FOLLOWS.path: self._list_mutual_follows,
            rpcs.SUGGEST_FOLLOWS.path: self._suggest_follows,
            rpcs.SET_PRIVACY.path: self._set_privacy,
            rpcs.LIST_FOLLOW_REQUESTS.path: self._list_follow_requests,
            rpcs.ACCEPT_FOLLOW_REQUEST.path: self._accept_follow_request,
            rpcs.REJECT_FOLLOW_REQUEST.path: self._reject_follow_request,
            rpcs.BLOCK.path: self._block,
            rpcs.UNBLOCK.path: self._unblock,
            rpcs.REMOVE_FOLLOWER.path: self._remove_follower,
            rpcs.MUTE.path: self._mute,
            rpcs.UNMUTE.path: self._unmute,
            rpcs.LIST_MUTES.path: self._list_mutes,
        }

    def fail_next(
        self, code: grpc.StatusCode, reason: Reason | str | None = None, retry_after: float | None = None
    ) -> None:
        """Make the next call (of any client of this graph, to any method) fail with ``code``, and do
        nothing else: the error the client would raise once its retries gave up, such as
        ``UNAVAILABLE`` (``Unavailable``), ``DEADLINE_EXCEEDED`` (``DeadlineExceeded``), or
        ``RESOURCE_EXHAUSTED`` with ``reason=Reason.RATE_LIMITED`` and ``retry_after`` (seconds, sent
        as the service sends it, in ``RetryInfo``). Each call of this queues one failure: two make
        the next two calls fail, in order."""
        if not isinstance(code, grpc.StatusCode) or code is grpc.StatusCode.OK:
            raise ValueError(f"code must be a grpc.StatusCode other than OK, not {code!r}")
        if reason is not None and not isinstance(reason, str):
            raise ValueError(f"reason must be a Reason, a str or None, not {reason!r}")
        if retry_after is not None and (
            isinstance(retry_after, bool) or not isinstance(retry_after, int | float) or not retry_after >= 0
        ):
            raise ValueError(f"retry_after must be a number of seconds from 0 up, or None, not {retry_after!r}")
        message = f"{code.name} made by FakeGraph.fail_next"
        with self._lock:
            self._failures.append(Refusal(code, reason or "", message, retry_after=retry_after))

    def answer(self, rpc: rpcs.Rpc[Req, Rep], request: Req) -> Rep:
        """The response to ``request``, or a ``Refusal`` (the next of ``fail_next`` first); one call at
        a time, as one transaction each."""
        with self._lock:
            if self._failures:
                raise self._failures.popleft()
            answer = self._answers.get(rpc.path)
            if answer is None:
                raise Refusal(
                    grpc.StatusCode.UNIMPLEMENTED, "", f"{rpc.name} is not modelled by socialgraph_client.testing"
                )
            return cast(Rep, answer(request))  # the table maps each RPC to its own response type

    # Follows

    def _follow(self, r: pb.FollowRequest) -> pb.FollowResponse:
        state = self._state.follow(r.follower_id, r.followee_id)
        requested = state is FollowState.REQUESTED
        return pb.FollowResponse(state=pb.FOLLOW_STATE_REQUESTED if requested else pb.FOLLOW_STATE_FOLLOWING)

    def _unfollow(self, r: pb.UnfollowRequest) -> pb.UnfollowResponse:
        self._state.unfollow(r.follower_id, r.followee_id)
        return pb.UnfollowResponse()

    def _is_following(self, r: pb.IsFollowingRequest) -> pb.IsFollowingResponse:
        return pb.IsFollowingResponse(following=self._state.is_following(r.follower_id, r.followee_id))

    def _entries(self, scope: str, entries: Mapping[int, int], r: Any) -> tuple[list[pb.FollowEntry], str]:
        users, token = self._pages.page(scope, entries, r.page_size, r.page_token)
        return [pb.FollowEntry(user_id=u, followed_at=_at(entries[u])) for u in users], token

    def _list_followers(self, r: pb.ListFollowersRequest) -> pb.ListFollowersResponse:
        entries, token = self._entries(f"followers:{r.user_id}", self._state.followers(r.user_id), r)
        return pb.ListFollowersResponse(followers=entries, next_page_token=token)

    def _list_following(self, r: pb.ListFollowingRequest) -> pb.ListFollowingResponse:
        entries, token = self._entries(f"following:{r.user_id}", self._state.following(r.user_id), r)
        return pb.ListFollowingResponse(following=entries, next_page_token=token)

    # Counts and relationships

    def _get_counts(self, r: pb.GetCountsRequest) -> pb.GetCountsResponse:
        ((_, followers, following),) = self._state.counts([r.user_id])
        return pb.GetCountsResponse(followers_count=followers, following_count=following)

    def _batch_get_counts(self, r: pb.BatchGetCountsRequest) -> pb.BatchGetCountsResponse:
        counts = [
            pb.UserCounts(user_id=user, followers_count=followers, following_count=following)
            for user, followers, following in self._state.counts(list(r.user_ids))
        ]
        return pb.BatchGetCountsResponse(counts=counts)

    def _get_relationships(self, r: pb.GetRelationshipsRequest) -> pb.GetRelationshipsResponse:
        found = self._state.relationships(r.actor_id, list(r.target_ids))
        return pb.GetRelationshipsResponse(
            relationships=[
                pb.Relationship(
                    target_id=target,
                    following=f.following,
                    followed_by=f.followed_by,
                    requested=f.requested,
                    requested_by=f.requested_by,
                    blocking=f.blocking,
                    blocked_by=f.blocked_by,
                    muting=f.muting,
                    muting_notifications=f.muting_notifications,
                )
                for target, f in found
            ]
        )

    # Discovery

    def _known(self, scope: str, viewer_id: int, user_id: int, r: Any) -> tuple[list[pb.FollowEntry], str]:
        """Followers of ``user_id`` whom ``viewer_id`` follows, in ``user_id``'s followers order."""
        followed = self._state.following(viewer_id)
        known = {u: at for u, at in self._state.followers(user_id).items() if u in followed}
        return self._entries(scope, known, r)

    def _list_known_followers(self, r: pb.ListKnownFollowersRequest) -> pb.ListKnownFollowersResponse:
        entries, token = self._known(f"known:{r.viewer_id}:{r.user_id}", r.viewer_id, r.user_id, r)
        return pb.ListKnownFollowersResponse(followers=entries, next_page_token=token)

    def _list_mutual_follows(self, r: pb.ListMutualFollowsRequest) -> pb.ListMutualFollowsResponse:
        entries, token = self._known(f"mutual:{r.user_id}", r.user_id, r.user_id, r)
        return pb.ListMutualFollowsResponse(
            users=[pb.UserRef(user_id=e.user_id) for e in entries], next_page_token=token
        )

    def _suggest_follows(self, r: pb.SuggestFollowsRequest) -> pb.SuggestFollowsResponse:
        """Accounts the user's followees follow, ranked by how many do (ties by the lower ID), among the
        user's most recent followees and theirs; never the user, one it follows or asked to follow, or
        one blocked either way. Ranked afresh at every call (the service keeps a ranking up to 5
        minutes, dropped by the user's own writes only)."""
        if not 0 <= r.limit <= MAX_SUGGESTIONS:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                Reason.INVALID_LIMIT,
                f"limit must be between 0 and {MAX_SUGGESTIONS}",
                limit=str(r.limit),
                maximum=str(MAX_SUGGESTIONS),
            )
        followees = _newest(self._state.following(r.user_id), SUGGEST_FOLLOWEE_SAMPLE)
        tally = Counter(
            candidate
            for followee in followees
            for candidate in _newest(self._state.following(followee), SUGGEST_PER_FOLLOWEE)
            if candidate != r.user_id
        )
        ranked = sorted(tally.items(), key=lambda item: (-item[1], item[0]))
        kept = [
            pb.Suggestion(user_id=candidate, score=mutual / len(followees), mutual_count=mutual)
            for candidate, mutual in ranked
            if not self._state.asked_or_blocked(r.user_id, candidate)
        ][:MAX_SUGGESTIONS]
        return pb.SuggestFollowsResponse(suggestions=kept[: r.limit or DEFAULT_SUGGESTIONS])

    # Privacy and requests

    def _set_privacy(self, r: pb.SetPrivacyRequest) -> pb.SetPrivacyResponse:
        self._state.set_privacy(r.user_id, r.private)
        return pb.SetPrivacyResponse()

    def _list_follow_requests(self, r: pb.ListFollowRequestsRequest) -> pb.ListFollowRequestsResponse:
        pending = self._state.requests(r.user_id)
        users, token = self._pages.page(f"requests:{r.user_id}", pending, r.page_size, r.page_token)
        entries = [pb.FollowRequestEntry(user_id=u, requested_at=_at(pending[u])) for u in users]
        return pb.ListFollowRequestsResponse(requests=entries, next_page_token=token)

    def _accept_follow_request(self, r: pb.AcceptFollowRequestRequest) -> pb.AcceptFollowRequestResponse:
        self._state.accept_request(r.user_id, r.requester_id)
        return pb.AcceptFollowRequestResponse()

    def _reject_follow_request(self, r: pb.RejectFollowRequestRequest) -> pb.RejectFollowRequestResponse:
        self._state.reject_request(r.user_id, r.requester_id)
        return pb.RejectFollowRequestResponse()

    # Blocks

    def _block(self, r: pb.BlockRequest) -> pb.BlockResponse:
        self._state.block(r.blocker_id, r.blocked_id)
        return pb.BlockResponse()

    def _unblock(self, r: pb.UnblockRequest) -> pb.UnblockResponse:
        self._state.unblock(r.blocker_id, r.blocked_id)
        return pb.UnblockResponse()

    def _remove_follower(self, r: pb.RemoveFollowerRequest) -> pb.RemoveFollowerResponse:
        self._state.remove_follower(r.user_id, r.follower_id)
        return pb.RemoveFollowerResponse()

    # Mutes

    def _mute(self, r: pb.MuteRequest) -> pb.MuteResponse:
        duration_ns = r.duration.seconds * 1_000_000_000 + r.duration.nanos if r.HasField("duration") else 0
        self._state.mute(r.muter_id, r.muted_id, duration_ns, r.notifications)
        return pb.MuteResponse()

    def _unmute(self, r: pb.UnmuteRequest) -> pb.UnmuteResponse:
        self._state.unmute(r.muter_id, r.muted_id)
        return pb.UnmuteResponse()

    def _list_mutes(self, r: pb.ListMutesRequest) -> pb.ListMutesResponse:
        mutes = self._state.mutes(r.user_id)
        users, token = self._pages.page(
            f"mutes:{r.user_id}", {u: m.at_us for u, m in mutes.items()}, r.page_size, r.page_token
        )
        entries = [
            pb.MuteEntry(
                user_id=u,
                muted_at=_at(mutes[u].at_us),
                expires_at=_at(mutes[u].expires_us) if mutes[u].expires_us else None,
                notifications=mutes[u].notifications,
            )
            for u in users
        ]
        return pb.ListMutesResponse(mutes=entries, next_page_token=token)
