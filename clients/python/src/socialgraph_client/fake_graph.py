"""The state of ``socialgraph_client.testing``'s graph: follows, requests, privacy, blocks and mutes in
memory, under the rules the service applies to them (SPEC §3, §3b).

Its caller (``fake_service.FakeGraph``) holds a lock around every use. Times come from the wall
clock, made strictly increasing, so the lists' newest-first order is the order of the calls. A
refusal is a ``Refusal``: the status code, ``ErrorInfo`` reason and metadata the service would send.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from socialgraph_client.reasons import Reason
from socialgraph_client.values import FollowState

__all__ = [
    "DEFAULT_MAX_FOLLOWING",
    "MAX_BATCH",
    "MAX_DURATION_NS",
    "GraphState",
    "Mute",
    "Refusal",
    "RelationshipFlags",
]

MAX_BATCH = 100
"""The most IDs ``batch_get_counts`` and ``get_relationships`` take (SPEC §3)."""
MAX_DURATION_NS = 100 * 366 * 86_400 * 1_000_000_000
"""The longest mute (100 years, every year counted as a leap year), as the service allows."""
DEFAULT_MAX_FOLLOWING = 7_500
"""The service's default following cap (``SG_MAX_FOLLOWING``; 0 there, as here, is no cap)."""


class Refusal(Exception):
    """What the service would answer with an error status: code, reason, message, metadata, and the
    delay of its ``RetryInfo`` (``retry_after``, seconds; None: none sent)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: Reason | str,
        message: str,
        *,
        retry_after: float | None = None,
        **metadata: str,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.metadata = metadata


def _self_relation(user_id: int) -> Refusal:
    return Refusal(
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.SELF_RELATION,
        f"both IDs name account {user_id}; the call needs two different accounts",
        user_id=str(user_id),
    )


def _require_pair(first: int, second: int) -> None:
    if first == second:
        raise _self_relation(first)


def _require_batch(ids: Sequence[int]) -> None:
    if len(ids) > MAX_BATCH:
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            Reason.TOO_MANY_IDS,
            f"at most {MAX_BATCH} IDs per call",
            size=str(len(ids)),
            limit=str(MAX_BATCH),
        )


@dataclass(frozen=True, slots=True)
class Mute:
    at_us: int
    """When it was made (a repeat of a mute in force keeps it)."""
    expires_us: int
    """When it ends; 0: until unmuted."""
    notifications: bool

    def in_force(self, now_us: int) -> bool:
        return self.expires_us == 0 or now_us < self.expires_us


@dataclass(frozen=True, slots=True)
class RelationshipFlags:
    following: bool
    followed_by: bool
    requested: bool
    requested_by: bool
    blocking: bool
    blocked_by: bool
    muting: bool
    muting_notifications: bool


def _add(index: dict[int, dict[int, int]], owner: int, other: int, at_us: int) -> None:
    index.setdefault(owner, {})[other] = at_us


def _drop(index: dict[int, dict[int, int]], owner: int, other: int) -> None:
    index.get(owner, {}).pop(other, None)


class GraphState:
    """What one server's tables would hold. ``max_following``: the following cap (follows and pending
    requests of one account), past which a follow is ``FOLLOW_LIMIT``; 0: no cap."""

    def __init__(self, max_following: int) -> None:
        self.max_following = max_following
        self._last_us = 0
        self._following: dict[int, dict[int, int]] = {}  # follower -> followee -> followed_at
        self._followers: dict[int, dict[int, int]] = {}  # followee -> follower -> followed_at
        self._requests_out: dict[int, dict[int, int]] = {}  # requester -> account -> requested_at
        self._requests_in: dict[int, dict[int, int]] = {}  # account -> requester -> requested_at
        self._blocking: dict[int, set[int]] = {}
        self._private: set[int] = set()
        self._mutes: dict[int, dict[int, Mute]] = {}  # muter -> muted -> mute

    def now_us(self) -> int:
        """The wall clock in microseconds, above every time handed out before."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return self._last_us

    # Follows

    def follow(self, follower_id: int, followee_id: int) -> FollowState:
        if follower_id == followee_id:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                Reason.SELF_FOLLOW,
                "an account cannot follow itself",
                user_id=str(follower_id),
            )
        if self._blocked_either_way(follower_id, followee_id):
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                Reason.BLOCKED,
                "one of the accounts blocks the other",
                follower_id=str(follower_id),
                followee_id=str(followee_id),
            )
        if followee_id in self._following.get(follower_id, {}):
            return FollowState.FOLLOWING
        if followee_id in self._requests_out.get(follower_id, {}):
            return FollowState.REQUESTED  # a request waits only while the account is private
        made = len(self._following.get(follower_id, {})) + len(self._requests_out.get(follower_id, {}))
        if self.max_following and made >= self.max_following:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                Reason.FOLLOW_LIMIT,
                f"account {follower_id} follows or has asked to follow {self.max_following} accounts, the most"
                " allowed; unfollow someone first",
                follower_id=str(follower_id),
                cap=str(self.max_following),
            )
        if followee_id in self._private:
            at = self.now_us()
            _add(self._requests_out, follower_id, followee_id, at)
            _add(self._requests_in, followee_id, follower_id, at)
            return FollowState.REQUESTED
        self._make_edge(follower_id, followee_id)
        return FollowState.FOLLOWING

    def unfollow(self, follower_id: int, followee_id: int) -> None:
        """Remove the follow and withdraw the request, whichever exist; a self-unfollow does nothing."""
        self._remove(follower_id, followee_id)

    def remove_follower(self, user_id: int, follower_id: int) -> None:
        _require_pair(user_id, follower_id)
        self._remove(follower_id, user_id)

    def is_following(self, follower_id: int, followee_id: int) -> bool:
        return followee_id in self._following.get(follower_id, {})

    def followers(self, user_id: int) -> dict[int, int]:
        """Follower -> followed_at."""
        return dict(self._followers.get(user_id, {}))

    def following(self, user_id: int) -> dict[int, int]:
        """Followee -> followed_at."""
        return dict(self._following.get(user_id, {}))

    def counts(self, user_ids: Sequence[int]) -> list[tuple[int, int, int]]:
        """``(user_id, followers, following)`` of each, in order: exact at once (the service's are
        exact within about a second of the last write)."""
        _require_batch(user_ids)
        return [(u, len(self._followers.get(u, {})), len(self._following.get(u, {}))) for u in user_ids]

    def relationships(self, actor_id: int, target_ids: Sequence[int]) -> list[tuple[int, RelationshipFlags]]:
        _require_batch(target_ids)
        now = self.now_us()
        answers = []
        for target in target_ids:
            mute = self._mutes.get(actor_id, {}).get(target)
            muting = mute is not None and mute.in_force(now)
            flags = RelationshipFlags(
                following=target in self._following.get(actor_id, {}),
                followed_by=actor_id in self._following.get(target, {}),
                requested=target in self._requests_out.get(actor_id, {}),
                requested_by=actor_id in self._requests_out.get(target, {}),
                blocking=target in self._blocking.get(actor_id, set()),
                blocked_by=actor_id in self._blocking.get(target, set()),
                muting=muting,
                muting_notifications=muting and mute is not None and mute.notifications,
            )
            answers.append((target, flags))
        return answers

    def asked_or_blocked(self, user_id: int, other: int) -> bool:
        """``user_id`` follows ``other`` or asked to, or one blocks the other (never a suggestion)."""
        asked = other in self._following.get(user_id, {}) or other in self._requests_out.get(user_id, {})
        return asked or self._blocked_either_way(user_id, other)

    # Privacy and requests

    def set_privacy(self, user_id: int, private: bool) -> None:
        """Private: later follows become requests. Public: every pending request is accepted now."""
        if private:
            self._private.add(user_id)
            return
        self._private.discard(user_id)
        pending = sorted(self._requests_in.get(user_id, {}).items(), key=lambda item: (item[1], item[0]), reverse=True)
        for requester, _ in pending:  # newest first, as the service's sweep reads them
            self._accept(user_id, requester)

    def requests(self, user_id: int) -> dict[int, int]:
        """Requester -> requested_at, of the requests waiting for ``user_id``'s answer."""
        return dict(self._requests_in.get(user_id, {}))

    def accept_request(self, user_id: int, requester_id: int) -> None:
        _require_pair(user_id, requester_id)
        if requester_id in self._requests_in.get(user_id, {}):
            self._accept(user_id, requester_id)
        elif user_id not in self._following.get(requester_id, {}):  # accepted before: idempotent
            raise Refusal(
                grpc.StatusCode.NOT_FOUND,
                Reason.FOLLOW_REQUEST_NOT_FOUND,
                f"account {user_id} has no pending follow request from account {requester_id}",
                user_id=str(user_id),
                requester_id=str(requester_id),
            )

    def reject_request(self, user_id: int, requester_id: int) -> None:
        _require_pair(user_id, requester_id)
        _drop(self._requests_in, user_id, requester_id)
        _drop(self._requests_out, requester_id, user_id)

    # Blocks

    def block(self, blocker_id: int, blocked_id: int) -> None:
        """Remove follows and requests both ways, and refuse new ones until ``unblock``."""
        _require_pair(blocker_id, blocked_id)
        self._blocking.setdefault(blocker_id, set()).add(blocked_id)
        self._remove(blocker_id, blocked_id)
        self._remove(blocked_id, blocker_id)

    def unblock(self, blocker_id: int, blocked_id: int) -> None:
        _require_pair(blocker_id, blocked_id)
        self._blocking.get(blocker_id, set()).discard(blocked_id)

    # Mutes

    def mute(self, muter_id: int, muted_id: int, duration_ns: int, notifications: bool) -> None:
        """``duration_ns`` 0: until unmuted. A repeat replaces both; a mute still in force keeps its time."""
        _require_pair(muter_id, muted_id)
        if duration_ns < 0:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                Reason.INVALID_DURATION,
                "duration must not be negative",
                field="duration",
            )
        if duration_ns > MAX_DURATION_NS:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                Reason.INVALID_DURATION,
                "duration must be at most 100 years",
                field="duration",
            )
        now = self.now_us()
        stored = self._mutes.get(muter_id, {}).get(muted_id)
        made_at = stored.at_us if stored is not None and stored.in_force(now) else now
        expires = 0 if duration_ns == 0 else now + -(-duration_ns // 1000)  # rounded up to the microsecond
        self._mutes.setdefault(muter_id, {})[muted_id] = Mute(made_at, expires, notifications)

    def unmute(self, muter_id: int, muted_id: int) -> None:
        _require_pair(muter_id, muted_id)
        self._mutes.get(muter_id, {}).pop(muted_id, None)

    def mutes(self, user_id: int) -> dict[int, Mute]:
        """Muted account -> mute, of the mutes in force (an ended one is never listed)."""
        now = self.now_us()
        return {muted: mute for muted, mute in self._mutes.get(user_id, {}).items() if mute.in_force(now)}

    # Helpers

    def _blocked_either_way(self, first: int, second: int) -> bool:
        return second in self._blocking.get(first, set()) or first in self._blocking.get(second, set())

    def _make_edge(self, follower_id: int, followee_id: int) -> None:
        at = self.now_us()
        _add(self._following, follower_id, followee_id, at)
        _add(self._followers, followee_id, follower_id, at)

    def _accept(self, user_id: int, requester_id: int) -> None:
        _drop(self._requests_in, user_id, requester_id)
        _drop(self._requests_out, requester_id, user_id)
        self._make_edge(requester_id, user_id)

    def _remove(self, follower_id: int, followee_id: int) -> None:
        _drop(self._following, follower_id, followee_id)
        _drop(self._followers, followee_id, follower_id)
        _drop(self._requests_out, follower_id, followee_id)
        _drop(self._requests_in, followee_id, follower_id)
