"""The plain values the clients return, and ``Page``: one page of a list and its next token."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

from socialgraph.v1 import social_graph_pb2 as pb

__all__ = [
    "AccountState",
    "AccountStatus",
    "Counts",
    "FollowEntry",
    "FollowState",
    "MuteEntry",
    "Page",
    "PendingRequest",
    "Relationship",
    "Suggestion",
]

T = TypeVar("T")


class FollowState(StrEnum):
    """What ``follow`` left in place."""

    FOLLOWING = "FOLLOWING"
    """The follow is in place (and counted)."""
    REQUESTED = "REQUESTED"
    """The followee is private: a pending request waits for ``accept_follow_request``."""


@dataclass(frozen=True, slots=True)
class FollowEntry:
    user_id: int
    followed_at: datetime

    @classmethod
    def of(cls, entry: Any) -> FollowEntry:
        return cls(entry.user_id, entry.followed_at.ToDatetime(tzinfo=UTC))


@dataclass(frozen=True, slots=True)
class PendingRequest:
    user_id: int
    requested_at: datetime

    @classmethod
    def of(cls, entry: Any) -> PendingRequest:
        return cls(entry.user_id, entry.requested_at.ToDatetime(tzinfo=UTC))


@dataclass(frozen=True, slots=True)
class Counts:
    user_id: int
    followers: int
    following: int

    @classmethod
    def of(cls, user_id: int, entry: Any) -> Counts:
        return cls(user_id, entry.followers_count, entry.following_count)


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
    muting: bool = False
    """The actor mutes the target (a mute in force: an expired one is never reported)."""
    muting_notifications: bool = False
    """The actor's mute also asks notification services to drop the target's notifications."""

    @classmethod
    def of(cls, r: Any) -> Relationship:
        return cls(
            r.target_id,
            r.following,
            r.followed_by,
            r.requested,
            r.requested_by,
            r.blocking,
            r.blocked_by,
            r.muting,
            r.muting_notifications,
        )


@dataclass(frozen=True, slots=True)
class MuteEntry:
    """One mute in force, from ``list_mutes``."""

    user_id: int
    """The muted account."""
    muted_at: datetime
    """When the mute was made (a repeat of a mute in force keeps it)."""
    expires_at: datetime | None
    """When it ends by itself; None: until ``unmute``."""
    notifications: bool
    """Notification services should also drop notifications from the account."""

    @classmethod
    def of(cls, entry: Any) -> MuteEntry:
        expires_at = entry.expires_at.ToDatetime(tzinfo=UTC) if entry.HasField("expires_at") else None
        return cls(entry.user_id, entry.muted_at.ToDatetime(tzinfo=UTC), expires_at, entry.notifications)


class AccountState(StrEnum):
    """Where an account is in its lifecycle (``get_account_state``)."""

    ACTIVE = "ACTIVE"
    """In the graph (every account that was never deactivated, and one whose reactivation finished)."""
    DEACTIVATING = "DEACTIVATING"
    """Deactivated; a job is archiving its edges and requests."""
    DEACTIVATED = "DEACTIVATED"
    """Deactivated; every edge and request touching it is archived."""
    REACTIVATING = "REACTIVATING"
    """Active again; a job is restoring its archived edges and requests."""
    DELETING = "DELETING"
    """Deleted; a job is removing every item about it."""
    DELETED = "DELETED"
    """Deleted; its job has removed its items (this state stays, so that it cannot be reactivated)."""


_RUNNING = frozenset({AccountState.DEACTIVATING, AccountState.REACTIVATING, AccountState.DELETING})

_ACCOUNT_STATES = {pb.AccountState.Value(f"ACCOUNT_STATE_{state.name}"): state for state in AccountState}
"""The proto's numbers; ``ACCOUNT_STATE_UNSPECIFIED`` (never sent) is not among them."""


@dataclass(frozen=True, slots=True)
class AccountStatus:
    """An account's lifecycle state and, during a job, how far the job is."""

    state: AccountState
    edges_done: int
    """The edges and requests the job has moved so far (after it: how many it moved)."""
    edges_total: int
    """The edges and requests the job is to move, counted when it started (or was taken over:
    what it had moved plus what was left). Follows and unfollows during the job can leave it a
    little off ``edges_done`` at the end."""

    @classmethod
    def of(cls, reply: Any) -> AccountStatus:
        """A ``GetAccountStateResponse`` read back; a state this client does not know (``UNSPECIFIED``,
        which the server never sends, or one of a newer server) is a ``ValueError`` rather than a guess."""
        state = _ACCOUNT_STATES.get(reply.state)
        if state is None:
            raise ValueError(f"unknown account state {reply.state} in GetAccountStateResponse")
        return cls(state, reply.edges_done, reply.edges_total)

    @property
    def job_running(self) -> bool:
        """A deactivation, reactivation or deletion job is still at work (the ``-ING`` states)."""
        return self.state in _RUNNING

    @property
    def fraction(self) -> float:
        """``edges_done / edges_total``, for a progress bar; 1.0 when there is nothing to move.
        While the job still finds edges the total grows, so the fraction may go down between polls."""
        if self.edges_total == 0:
            return 1.0
        return self.edges_done / self.edges_total


@dataclass(frozen=True, slots=True)
class Suggestion:
    user_id: int
    score: float
    mutual_count: int

    @classmethod
    def of(cls, s: Any) -> Suggestion:
        return cls(s.user_id, s.score, s.mutual_count)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list RPC. Hand ``next_page_token`` back as ``page_token`` for the next page
    (to this client or another one: tokens are bound to the query, not to the connection);
    an empty ``next_page_token`` means this was the last page."""

    items: list[T]
    next_page_token: str

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def last(self) -> bool:
        """True on the last page."""
        return not self.next_page_token
