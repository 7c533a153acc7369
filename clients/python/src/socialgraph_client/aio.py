"""``AsyncSocialGraphClient``: the asyncio client, one method per RPC.

This file is the source of both clients: ``scripts/gen_sync_client.py`` writes ``sync.py`` from it
(``SocialGraphClient``, the same methods without ``async``), and CI fails if that file is stale.
Add an RPC here (and to ``rpcs.py``), then run the script.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import timeline_pb2 as tpb

from socialgraph_client import rpcs
from socialgraph_client.account_wait import AccountWait
from socialgraph_client.aio_transport import AsyncTransport, Interceptor, sleep, walk_pages
from socialgraph_client.arguments import request
from socialgraph_client.calls import Planner, Retry
from socialgraph_client.channel import plan_channel
from socialgraph_client.errors import DeadlineExceeded
from socialgraph_client.options import USE_CLIENT_DEFAULT, Deadlines, Metadata, RetryPolicy
from socialgraph_client.tls import TlsConfig
from socialgraph_client.tokens import Token
from socialgraph_client.tracing import Propagator, otel_context
from socialgraph_client.values import (
    AccountStatus,
    Counts,
    FollowEntry,
    FollowState,
    MuteEntry,
    Page,
    PendingRequest,
    Relationship,
    Suggestion,
)

__all__ = ["AsyncSocialGraphClient"]

DEFAULT_DEADLINES = Deadlines()
DEFAULT_RETRY = RetryPolicy()


class AsyncSocialGraphClient:
    """One channel to the service. ``async with await AsyncSocialGraphClient.connect(target) as graph:``

    Every method takes ``timeout=`` (seconds for the whole call, retries included; default from
    ``Deadlines`` by kind of call), ``metadata=`` (sent with this call after the client's own) and
    ``retry=`` (a ``RetryPolicy`` for this call, None for no retries; default: the client's). Its
    arguments are checked before anything is sent: a user ID that is not an integer from 1 to
    2**64-1, a negative ``page_size``, ... is a ``ValueError`` naming the argument. A failed call
    raises a ``SocialGraphError`` subclass (``socialgraph_client.errors``), also a ``grpc.RpcError``.
    """

    def __init__(self, transport: AsyncTransport) -> None:
        """Use ``connect``."""
        self._transport = transport

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        token: Token | None = None,
        tls: TlsConfig | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        metadata: Metadata | None = None,
        deadlines: Deadlines = DEFAULT_DEADLINES,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        connect_timeout: float | None = None,
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[Interceptor] = (),
        tracing: Propagator | None = otel_context,
    ) -> AsyncSocialGraphClient:
        """Open a channel to ``target`` (``host:port``, or any gRPC target such as ``dns:///name:port``).

        By default this returns at once, without waiting for a server: the first call waits for one
        within its own deadline (``ConnectError`` when none is ready by then), so an application that
        starts while the service is briefly down does not fail at start. ``connect_timeout``: wait
        here instead, that many seconds at most, for a ready server, else ``ConnectError``.

        ``token``: the caller's bearer token (``socialgraph token``), or a function of no arguments
        returning the current one, called for every call (a token rotated without reconnecting); call
        credentials over TLS, ``authorization`` metadata over plaintext. ``tls``: TLS or mTLS from PEM
        files, or ``credentials``: ready-made channel credentials. ``metadata``: sent with every call.
        ``deadlines``: default deadline per kind of call. ``retry``: the retry policy, None for none
        (its ``attempt_timeout`` bounds the read calls only; a call's own ``retry=`` applies as given).
        ``options``: gRPC channel options, over the client's defaults (keepalive among them).
        ``interceptors``: gRPC client interceptors (of ``grpc.aio`` for the asyncio client, of
        ``grpc`` for the blocking one), the first given the outermost. ``tracing``: writes the
        caller's trace context into each call's metadata; by default OpenTelemetry's propagators when
        ``opentelemetry-api`` is installed; None sends none.
        """
        if connect_timeout is not None and not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be above 0 seconds or None, not {connect_timeout!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ValueError(f"retry must be a RetryPolicy or None (no retries), not {retry!r}")
        if tracing is not None and not callable(tracing):
            raise ValueError(f"tracing must be a function of the metadata dict, or None, not {tracing!r}")
        plan = plan_channel(target, token=token, tls=tls, credentials=credentials, metadata=metadata, options=options)
        planner = Planner(deadlines, retry, plan.metadata, token=plan.token, tracing=tracing)
        return cls(await AsyncTransport.open(plan, planner, connect_timeout, interceptors))

    async def __aenter__(self) -> AsyncSocialGraphClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; calls in flight, and calls waiting to be retried, raise ``Cancelled``."""
        await self._transport.close()

    # Follows

    async def follow(
        self,
        follower_id: int,
        followee_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> FollowState:
        """``FOLLOWING``, or ``REQUESTED`` when the followee is private. A repeat returns the same state."""
        sent = request(pb.FollowRequest, follower_id=follower_id, followee_id=followee_id)
        reply = await self._transport.call(rpcs.FOLLOW, sent, timeout, metadata, retry)
        if reply.state == pb.FOLLOW_STATE_REQUESTED:
            return FollowState.REQUESTED
        return FollowState.FOLLOWING

    async def unfollow(
        self,
        follower_id: int,
        followee_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Remove the follow, or withdraw the pending request. Idempotent."""
        sent = request(pb.UnfollowRequest, follower_id=follower_id, followee_id=followee_id)
        await self._transport.call(rpcs.UNFOLLOW, sent, timeout, metadata, retry)

    async def is_following(
        self,
        follower_id: int,
        followee_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> bool:
        """Strongly consistent: sees every follow and unfollow that returned before it."""
        sent = request(pb.IsFollowingRequest, follower_id=follower_id, followee_id=followee_id)
        return (await self._transport.call(rpcs.IS_FOLLOWING, sent, timeout, metadata, retry)).following

    async def list_followers(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[FollowEntry]:
        """One page of the user's followers, newest first (``page_size`` 0: 50; at most 1000)."""
        sent = request(pb.ListFollowersRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.LIST_FOLLOWERS, sent, timeout, metadata, retry)
        return Page([FollowEntry.of(entry) for entry in reply.followers], reply.next_page_token)

    def iter_followers(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[FollowEntry]:
        """Every follower from ``page_token`` on, newest first; ``timeout`` and ``retry`` are per page."""
        return walk_pages(
            lambda token: self.list_followers(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )

    async def list_following(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[FollowEntry]:
        """One page of the accounts the user follows, newest first."""
        sent = request(pb.ListFollowingRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.LIST_FOLLOWING, sent, timeout, metadata, retry)
        return Page([FollowEntry.of(entry) for entry in reply.following], reply.next_page_token)

    def iter_following(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[FollowEntry]:
        """Every account the user follows from ``page_token`` on, newest first; ``timeout`` and ``retry``
        are per page."""
        return walk_pages(
            lambda token: self.list_following(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )

    # Counts and relationships

    async def get_counts(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Counts:
        """Followers and following counts (exact within about a second of the last write)."""
        sent = request(pb.GetCountsRequest, user_id=user_id)
        reply = await self._transport.call(rpcs.GET_COUNTS, sent, timeout, metadata, retry)
        return Counts.of(sent.user_id, reply)

    async def batch_get_counts(
        self,
        user_ids: Sequence[int],
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> list[Counts]:
        """Counts of up to 100 users, in request order."""
        sent = request(pb.BatchGetCountsRequest, user_ids=user_ids)
        reply = await self._transport.call(rpcs.BATCH_GET_COUNTS, sent, timeout, metadata, retry)
        return [Counts.of(counts.user_id, counts) for counts in reply.counts]

    async def get_relationships(
        self,
        actor_id: int,
        target_ids: Sequence[int],
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> list[Relationship]:
        """How ``actor_id`` relates to each of up to 100 targets, in request order."""
        sent = request(pb.GetRelationshipsRequest, actor_id=actor_id, target_ids=target_ids)
        reply = await self._transport.call(rpcs.GET_RELATIONSHIPS, sent, timeout, metadata, retry)
        return [Relationship.of(relationship) for relationship in reply.relationships]

    # Discovery

    async def list_known_followers(
        self,
        viewer_id: int,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[FollowEntry]:
        """One page of the followers of ``user_id`` whom ``viewer_id`` follows, newest first."""
        sent = request(
            pb.ListKnownFollowersRequest,
            viewer_id=viewer_id,
            user_id=user_id,
            page_size=page_size,
            page_token=page_token,
        )
        reply = await self._transport.call(rpcs.LIST_KNOWN_FOLLOWERS, sent, timeout, metadata, retry)
        return Page([FollowEntry.of(entry) for entry in reply.followers], reply.next_page_token)

    def iter_known_followers(
        self,
        viewer_id: int,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[FollowEntry]:
        """Every follower of ``user_id`` whom ``viewer_id`` follows; ``timeout`` and ``retry`` are per page."""
        return walk_pages(
            lambda token: self.list_known_followers(
                viewer_id,
                user_id,
                page_size=page_size,
                page_token=token,
                timeout=timeout,
                metadata=metadata,
                retry=retry,
            ),
            page_token,
        )

    async def list_mutual_follows(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[int]:
        """One page of the IDs of accounts that follow ``user_id`` and that it follows back."""
        sent = request(pb.ListMutualFollowsRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.LIST_MUTUAL_FOLLOWS, sent, timeout, metadata, retry)
        return Page([ref.user_id for ref in reply.users], reply.next_page_token)

    def iter_mutual_follows(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[int]:
        """Every mutual follow of ``user_id`` from ``page_token`` on; ``timeout`` and ``retry`` are per page."""
        return walk_pages(
            lambda token: self.list_mutual_follows(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )

    async def suggest_follows(
        self,
        user_id: int,
        *,
        limit: int = 0,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> list[Suggestion]:
        """Accounts the user's followees follow, best first (``limit`` 0: the default; at most 100)."""
        sent = request(pb.SuggestFollowsRequest, user_id=user_id, limit=limit)
        reply = await self._transport.call(rpcs.SUGGEST_FOLLOWS, sent, timeout, metadata, retry)
        return [Suggestion.of(suggestion) for suggestion in reply.suggestions]

    # Privacy and requests

    async def set_privacy(
        self,
        user_id: int,
        private: bool,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """A private account turns new follows into requests."""
        sent = request(pb.SetPrivacyRequest, user_id=user_id, private=private)
        await self._transport.call(rpcs.SET_PRIVACY, sent, timeout, metadata, retry)

    async def list_follow_requests(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[PendingRequest]:
        """One page of the requests waiting for the user's answer, newest first."""
        sent = request(pb.ListFollowRequestsRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.LIST_FOLLOW_REQUESTS, sent, timeout, metadata, retry)
        return Page([PendingRequest.of(entry) for entry in reply.requests], reply.next_page_token)

    def iter_follow_requests(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[PendingRequest]:
        """Every pending request from ``page_token`` on, newest first; ``timeout`` and ``retry`` are per page."""
        return walk_pages(
            lambda token: self.list_follow_requests(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )

    async def accept_follow_request(
        self,
        user_id: int,
        requester_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Make the requested follow (and count it). Idempotent once accepted."""
        sent = request(pb.AcceptFollowRequestRequest, user_id=user_id, requester_id=requester_id)
        await self._transport.call(rpcs.ACCEPT_FOLLOW_REQUEST, sent, timeout, metadata, retry)

    async def reject_follow_request(
        self,
        user_id: int,
        requester_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Drop the request. Idempotent."""
        sent = request(pb.RejectFollowRequestRequest, user_id=user_id, requester_id=requester_id)
        await self._transport.call(rpcs.REJECT_FOLLOW_REQUEST, sent, timeout, metadata, retry)

    # Blocks

    async def block(
        self,
        blocker_id: int,
        blocked_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Remove follows and requests both ways and refuse new ones. Idempotent."""
        sent = request(pb.BlockRequest, blocker_id=blocker_id, blocked_id=blocked_id)
        await self._transport.call(rpcs.BLOCK, sent, timeout, metadata, retry)

    async def unblock(
        self,
        blocker_id: int,
        blocked_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Lift the block (the follows it removed stay removed). Idempotent."""
        sent = request(pb.UnblockRequest, blocker_id=blocker_id, blocked_id=blocked_id)
        await self._transport.call(rpcs.UNBLOCK, sent, timeout, metadata, retry)

    async def remove_follower(
        self,
        user_id: int,
        follower_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Drop ``follower_id``'s follow of ``user_id`` without blocking. Idempotent."""
        sent = request(pb.RemoveFollowerRequest, user_id=user_id, follower_id=follower_id)
        await self._transport.call(rpcs.REMOVE_FOLLOWER, sent, timeout, metadata, retry)

    # Mutes

    async def mute(
        self,
        muter_id: int,
        muted_id: int,
        *,
        duration: timedelta | None = None,
        notifications: bool = False,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Hide ``muted_id``'s tweets from ``muter_id``'s home timeline, follows and counts untouched.

        ``duration``: the mute ends by itself after it (None or 0: until ``unmute``; negative or over
        100 years: ``INVALID_DURATION``). ``notifications``: notification services should also drop
        notifications from ``muted_id``. A repeat replaces both.
        """
        sent = request(
            pb.MuteRequest, muter_id=muter_id, muted_id=muted_id, duration=duration, notifications=notifications
        )
        await self._transport.call(rpcs.MUTE, sent, timeout, metadata, retry)

    async def unmute(
        self,
        muter_id: int,
        muted_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Show ``muted_id``'s tweets again at once. Idempotent."""
        sent = request(pb.UnmuteRequest, muter_id=muter_id, muted_id=muted_id)
        await self._transport.call(rpcs.UNMUTE, sent, timeout, metadata, retry)

    async def list_mutes(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[MuteEntry]:
        """One page of the user's mutes in force, newest first (an expired mute is never listed)."""
        sent = request(pb.ListMutesRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.LIST_MUTES, sent, timeout, metadata, retry)
        return Page([MuteEntry.of(entry) for entry in reply.mutes], reply.next_page_token)

    def iter_mutes(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[MuteEntry]:
        """Every mute in force from ``page_token`` on, newest first; ``timeout`` and ``retry`` are per page."""
        return walk_pages(
            lambda token: self.list_mutes(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )

    # Account lifecycle (the three changes need the admin scope)

    async def deactivate_account(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Take the account out of the graph at once; a background job then archives its edges and
        requests (``wait_for_account``). Idempotent; ``AccountDeletedError`` for a deleted account."""
        sent = request(pb.DeactivateAccountRequest, user_id=user_id)
        await self._transport.call(rpcs.DEACTIVATE_ACCOUNT, sent, timeout, metadata, retry)

    async def reactivate_account(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Bring a deactivated account back; a background job restores its archived edges and requests
        intact. Idempotent; ``AccountDeletedError`` for a deleted account."""
        sent = request(pb.ReactivateAccountRequest, user_id=user_id)
        await self._transport.call(rpcs.REACTIVATE_ACCOUNT, sent, timeout, metadata, retry)

    async def delete_account(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> None:
        """Irreversible: deactivate at once, then a background job removes every item about the
        account. Idempotent."""
        sent = request(pb.DeleteAccountRequest, user_id=user_id)
        await self._transport.call(rpcs.DELETE_ACCOUNT, sent, timeout, metadata, retry)

    async def get_account_state(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AccountStatus:
        """The account's lifecycle state and, during a job, how far it is."""
        sent = request(pb.GetAccountStateRequest, user_id=user_id)
        return AccountStatus.of(await self._transport.call(rpcs.GET_ACCOUNT_STATE, sent, timeout, metadata, retry))

    async def wait_for_account(
        self,
        user_id: int,
        *,
        timeout: float | None = None,
        poll_interval: float = 0.5,
        progress: Callable[[AccountStatus], object] | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AccountStatus:
        """Poll ``get_account_state`` every ``poll_interval`` seconds until no job runs (a state other
        than ``DEACTIVATING``, ``REACTIVATING``, ``DELETING``), and return that status.

        ``progress``: called with each status polled, the last one included. ``timeout``: seconds for
        the whole wait (None: no limit; each poll then has the read deadline), after which
        ``DeadlineExceeded`` names the last state seen. ``retry``: each poll's. A poll's own error is
        raised as it is.
        """
        wait = AccountWait(user_id, timeout, poll_interval)
        while True:
            try:
                status = await self.get_account_state(
                    user_id, timeout=wait.poll_timeout(), metadata=metadata, retry=retry
                )
            except DeadlineExceeded as error:
                if not wait.over():
                    raise  # the read deadline of a wait without a timeout
                raise wait.expired() from error
            if progress is not None:
                progress(status)
            if wait.finished(status):
                return status
            await sleep(wait.pause())

    # Home timeline (TimelineService, same channel)

    async def get_home_timeline(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> Page[int]:
        """One page of tweet IDs of the user's home timeline, newest first (``page_size`` 0: 20; at most 100)."""
        sent = request(tpb.GetHomeTimelineRequest, user_id=user_id, page_size=page_size, page_token=page_token)
        reply = await self._transport.call(rpcs.GET_HOME_TIMELINE, sent, timeout, metadata, retry)
        return Page(list(reply.tweet_ids), reply.next_page_token)

    def iter_home_timeline(
        self,
        user_id: int,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        metadata: Metadata | None = None,
        retry: Retry = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[int]:
        """Every tweet ID of the home timeline from ``page_token`` on, newest first; ``timeout`` and
        ``retry`` are per page."""
        return walk_pages(
            lambda token: self.get_home_timeline(
                user_id, page_size=page_size, page_token=token, timeout=timeout, metadata=metadata, retry=retry
            ),
            page_token,
        )
