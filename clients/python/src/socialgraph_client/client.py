"""``SocialGraphClient.connect(target)``: async methods per RPC and iterators that hide page tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph.v1 import timeline_pb2_grpc as tpb_grpc

from socialgraph_client.errors import SocialGraphError

__all__ = ["Counts", "FollowEntry", "PendingRequest", "Relationship", "SocialGraphClient", "Suggestion", "TlsConfig"]

R = TypeVar("R")
E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class FollowEntry:
    user_id: int
    followed_at: datetime


@dataclass(frozen=True, slots=True)
class PendingRequest:
    user_id: int
    requested_at: datetime


@dataclass(frozen=True, slots=True)
class Counts:
    user_id: int
    followers: int
    following: int


@dataclass(frozen=True, slots=True)
class Relationship:
    """How the actor relates to ``target_id``, from the actor's side."""

    target_id: int
    following: bool
    followed_by: bool
    requested: bool
    requested_by: bool
    blocking: bool
    blocked_by: bool


@dataclass(frozen=True, slots=True)
class Suggestion:
    user_id: int
    score: float
    mutual_count: int


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS to the service; with ``cert_file`` and ``key_file``, mTLS (the client's certificate)."""

    ca_file: str | None = None
    """PEM CA bundle that signed the server's certificate; None: the system's trusted CAs."""
    cert_file: str | None = None
    """PEM client certificate chain, for a server that requires one (SG_TLS_CLIENT_CA_FILE)."""
    key_file: str | None = None
    """PEM private key of ``cert_file``."""
    server_name: str | None = None
    """The name to verify the server's certificate against, when it is not the target's host."""

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            if path is None:
                return None
            with open(path, "rb") as file:
                return file.read()

        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (mTLS)")
        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


def _follow_entry(entry: Any) -> FollowEntry:
    return FollowEntry(entry.user_id, entry.followed_at.ToDatetime(tzinfo=UTC))


class SocialGraphClient:
    """One channel to the service. Use as ``async with await SocialGraphClient.connect(...)``."""

    def __init__(
        self, channel: grpc.aio.Channel, *, timeout: float | None, metadata: Sequence[tuple[str, str]] = ()
    ) -> None:
        self._channel = channel
        self._stub = pb_grpc.SocialGraphServiceStub(channel)
        self._timelines = tpb_grpc.TimelineServiceStub(channel)
        self._timeout = timeout
        self._metadata = tuple(metadata) or None

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        call_timeout: float | None = 5.0,
        connect_timeout: float = 10.0,
        options: Sequence[tuple[str, Any]] = (),
    ) -> SocialGraphClient:
        """Open a channel and wait until it is ready.

        ``token``: the caller's bearer token (``socialgraph token``). Over TLS it is sent as call
        credentials; over plaintext (the local stack, a trusted network) as ``authorization`` metadata.
        ``tls``: TLS or mTLS options; ``credentials``: ready-made channel credentials instead.
        ``call_timeout`` is the deadline of each call; ``connect_timeout`` bounds the wait for the channel.
        """
        if tls is not None:
            if credentials is not None:
                raise ValueError("give tls or credentials, not both")
            credentials = tls.credentials()
            if tls.server_name:
                options = [*options, ("grpc.ssl_target_name_override", tls.server_name)]
        metadata: list[tuple[str, str]] = []
        if credentials is None:
            channel = grpc.aio.insecure_channel(target, options=list(options))
            if token is not None:
                metadata.append(("authorization", f"Bearer {token}"))
        else:
            if token is not None:
                credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
            channel = grpc.aio.secure_channel(target, credentials, options=list(options))
        try:
            await asyncio.wait_for(channel.channel_ready(), connect_timeout)
        except BaseException:
            await channel.close(None)
            raise
        return cls(channel, timeout=call_timeout, metadata=metadata)

    async def __aenter__(self) -> SocialGraphClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close(None)

    async def _call(self, method: Callable[..., Awaitable[R]], request: Any) -> R:
        try:
            return await method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as error:
            raise SocialGraphError.from_rpc_error(error) from error

    async def follow(self, follower_id: int, followee_id: int) -> bool:
        """True when the follow is in place; False when it is a pending request (private account)."""
        reply = await self._call(self._stub.Follow, pb.FollowRequest(follower_id=follower_id, followee_id=followee_id))
        return reply.state == pb.FOLLOW_STATE_FOLLOWING

    async def unfollow(self, follower_id: int, followee_id: int) -> None:
        await self._call(self._stub.Unfollow, pb.UnfollowRequest(follower_id=follower_id, followee_id=followee_id))

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        request = pb.IsFollowingRequest(follower_id=follower_id, followee_id=followee_id)
        return (await self._call(self._stub.IsFollowing, request)).following

    async def get_counts(self, user_id: int) -> Counts:
        reply = await self._call(self._stub.GetCounts, pb.GetCountsRequest(user_id=user_id))
        return Counts(user_id, reply.followers_count, reply.following_count)

    async def batch_get_counts(self, user_ids: Sequence[int]) -> list[Counts]:
        reply = await self._call(self._stub.BatchGetCounts, pb.BatchGetCountsRequest(user_ids=list(user_ids)))
        return [Counts(c.user_id, c.followers_count, c.following_count) for c in reply.counts]

    async def get_relationships(self, actor_id: int, target_ids: Sequence[int]) -> list[Relationship]:
        """Up to 100 targets in one call, in request order."""
        request = pb.GetRelationshipsRequest(actor_id=actor_id, target_ids=list(target_ids))
        reply = await self._call(self._stub.GetRelationships, request)
        return [
            Relationship(r.target_id, r.following, r.followed_by, r.requested, r.requested_by, r.blocking, r.blocked_by)
            for r in reply.relationships
        ]

    async def suggest_follows(self, user_id: int, limit: int = 0) -> list[Suggestion]:
        reply = await self._call(self._stub.SuggestFollows, pb.SuggestFollowsRequest(user_id=user_id, limit=limit))
        return [Suggestion(s.user_id, s.score, s.mutual_count) for s in reply.suggestions]

    async def set_privacy(self, user_id: int, private: bool) -> None:
        await self._call(self._stub.SetPrivacy, pb.SetPrivacyRequest(user_id=user_id, private=private))

    async def accept_follow_request(self, user_id: int, requester_id: int) -> None:
        request = pb.AcceptFollowRequestRequest(user_id=user_id, requester_id=requester_id)
        await self._call(self._stub.AcceptFollowRequest, request)

    async def reject_follow_request(self, user_id: int, requester_id: int) -> None:
        request = pb.RejectFollowRequestRequest(user_id=user_id, requester_id=requester_id)
        await self._call(self._stub.RejectFollowRequest, request)

    async def block(self, blocker_id: int, blocked_id: int) -> None:
        await self._call(self._stub.Block, pb.BlockRequest(blocker_id=blocker_id, blocked_id=blocked_id))

    async def unblock(self, blocker_id: int, blocked_id: int) -> None:
        await self._call(self._stub.Unblock, pb.UnblockRequest(blocker_id=blocker_id, blocked_id=blocked_id))

    async def remove_follower(self, user_id: int, follower_id: int) -> None:
        request = pb.RemoveFollowerRequest(user_id=user_id, follower_id=follower_id)
        await self._call(self._stub.RemoveFollower, request)

    async def iter_followers(self, user_id: int, *, page_size: int = 0) -> AsyncIterator[FollowEntry]:
        """Every follower, newest first, fetching pages as the loop goes."""
        async for entry in self._walk(
            lambda token: self._call(
                self._stub.ListFollowers,
                pb.ListFollowersRequest(user_id=user_id, page_size=page_size, page_token=token),
            ),
            "followers",
            _follow_entry,
        ):
            yield entry

    async def iter_following(self, user_id: int, *, page_size: int = 0) -> AsyncIterator[FollowEntry]:
        """Every account the user follows, newest first."""
        async for entry in self._walk(
            lambda token: self._call(
                self._stub.ListFollowing,
                pb.ListFollowingRequest(user_id=user_id, page_size=page_size, page_token=token),
            ),
            "following",
            _follow_entry,
        ):
            yield entry

    async def iter_known_followers(
        self, viewer_id: int, user_id: int, *, page_size: int = 0
    ) -> AsyncIterator[FollowEntry]:
        """Followers of ``user_id`` whom ``viewer_id`` follows, newest first."""
        async for entry in self._walk(
            lambda token: self._call(
                self._stub.ListKnownFollowers,
                pb.ListKnownFollowersRequest(
                    viewer_id=viewer_id, user_id=user_id, page_size=page_size, page_token=token
                ),
            ),
            "followers",
            _follow_entry,
        ):
            yield entry

    async def iter_mutual_follows(self, user_id: int, *, page_size: int = 0) -> AsyncIterator[int]:
        """Accounts that follow ``user_id`` and that it follows back."""
        async for entry in self._walk(
            lambda token: self._call(
                self._stub.ListMutualFollows,
                pb.ListMutualFollowsRequest(user_id=user_id, page_size=page_size, page_token=token),
            ),
            "users",
            lambda ref: int(ref.user_id),
        ):
            yield entry

    async def iter_follow_requests(self, user_id: int, *, page_size: int = 0) -> AsyncIterator[PendingRequest]:
        """Incoming pending requests, newest first."""
        async for entry in self._walk(
            lambda token: self._call(
                self._stub.ListFollowRequests,
                pb.ListFollowRequestsRequest(user_id=user_id, page_size=page_size, page_token=token),
            ),
            "requests",
            lambda r: PendingRequest(r.user_id, r.requested_at.ToDatetime(tzinfo=UTC)),
        ):
            yield entry

    async def home_timeline_page(
        self, user_id: int, *, page_size: int = 0, page_token: str = ""
    ) -> tuple[list[int], str]:
        """One page of the user's home timeline: tweet IDs newest first, and the next page's token."""
        request = tpb.GetHomeTimelineRequest(user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._call(self._timelines.GetHomeTimeline, request)
        return list(reply.tweet_ids), reply.next_page_token

    async def iter_home_timeline(self, user_id: int, *, page_size: int = 0) -> AsyncIterator[int]:
        """Tweet IDs of the user's home timeline, newest first (TimelineService, same channel)."""
        async for tweet_id in self._walk(
            lambda token: self._call(
                self._timelines.GetHomeTimeline,
                tpb.GetHomeTimelineRequest(user_id=user_id, page_size=page_size, page_token=token),
            ),
            "tweet_ids",
            int,
        ):
            yield tweet_id

    async def _walk(
        self, fetch: Callable[[str], Awaitable[Any]], field: str, convert: Callable[[Any], E]
    ) -> AsyncIterator[E]:
        """Follow ``next_page_token`` until the last page; ``field`` names the entries of a reply."""
        token = ""
        while True:
            reply = await fetch(token)
            for entry in getattr(reply, field):
                yield convert(entry)
            token = reply.next_page_token
            if not token:
                return
