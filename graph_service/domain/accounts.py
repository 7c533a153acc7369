"""An account's lifecycle (SPEC §3b): its state, and how far the background job of a change is.

An account that was never deactivated has no stored state and is ``ACTIVE``. Every change of state
moves the account's *generation* by one; the job of that change works under it and stops when the
generation moves again (a ``ReactivateAccount`` while a deactivation runs, or the reverse), so the
later call always wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from graph_service.domain.errors import AccountDeactivated, AccountDeleted, DomainError

__all__ = ["AccountStatus", "Archived", "JobEntry", "Lifecycle", "Moved", "Restored", "Side", "refusal"]


class Lifecycle(Enum):
    """The stored value of each state is one letter (the state item's ``st`` and the cache's value)."""

    ACTIVE = "a"
    DEACTIVATING = "d"
    DEACTIVATED = "D"
    REACTIVATING = "r"
    DELETING = "x"
    DELETED = "X"

    @property
    def in_graph(self) -> bool:
        """Its edges count and show, and it may follow and be followed (a restore may still run)."""
        return self in (Lifecycle.ACTIVE, Lifecycle.REACTIVATING)

    @property
    def deleted(self) -> bool:
        return self in (Lifecycle.DELETING, Lifecycle.DELETED)

    @property
    def job_running(self) -> bool:
        return self in (Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING, Lifecycle.DELETING)

    @property
    def settled(self) -> Lifecycle:
        """The state its job ends in."""
        return _SETTLED.get(self, self)


_SETTLED = {
    Lifecycle.DEACTIVATING: Lifecycle.DEACTIVATED,
    Lifecycle.REACTIVATING: Lifecycle.ACTIVE,
    Lifecycle.DELETING: Lifecycle.DELETED,
}


class Side(Enum):
    FOLLOWER = "F"
    """The other account follows U."""
    FOLLOWING = "G"
    """U follows the other account."""
    REQUESTER = "R"
    """The other account asked to follow U."""
    REQUESTED = "Q"
    """U asked to follow the other account."""

    @property
    def mirror(self) -> Side:
        return _MIRROR[self]

    @property
    def is_edge(self) -> bool:
        return self in (Side.FOLLOWER, Side.FOLLOWING)

    def follower_followee(self, user_id: int, other: int) -> tuple[int, int]:
        """The (follower, followee) of the edge or request (the requester first)."""
        return (other, user_id) if self in (Side.FOLLOWER, Side.REQUESTER) else (user_id, other)


_MIRROR = {
    Side.FOLLOWER: Side.FOLLOWING,
    Side.FOLLOWING: Side.FOLLOWER,
    Side.REQUESTER: Side.REQUESTED,
    Side.REQUESTED: Side.REQUESTER,
}


def refusal(user_id: int, state: Lifecycle) -> DomainError | None:
    """The error a follow, request or accept touching an account in ``state`` gets (None: none)."""
    if state.in_graph:
        return None
    return AccountDeleted(user_id) if state.deleted else AccountDeactivated(user_id)


@dataclass(frozen=True, slots=True)
class AccountStatus:
    """An account's stored state: ``gen`` moves with every change; ``edges_done`` counts the items
    its job has moved, ``edges_total`` those it is to move, counted when it started (or was taken
    over: what was moved plus what was left; both per job)."""

    user_id: int
    state: Lifecycle = Lifecycle.ACTIVE
    gen: int = 0
    edges_done: int = 0
    edges_total: int = 0
    at_us: int = 0
    """When the state was last changed by a call (0: never)."""
    previous: Lifecycle = Lifecycle.ACTIVE
    """The state the last call changed it from (for operators reading the item, and the tests)."""


@dataclass(frozen=True, slots=True)
class Archived:
    """An archived edge or request in ``owner``'s partition."""

    owner: int
    side: Side
    other: int
    at_us: int


@dataclass(frozen=True, slots=True)
class JobEntry:
    """A job in the registry: the account, the generation it works under, and its lease."""

    user_id: int
    gen: int
    owner: str
    until_ms: int
    tries: int = 0
    """How many times the job failed (it waits longer after each)."""


class Moved(Enum):
    """What one fenced batch of a job (archive, delete, a counters row) did."""

    DONE = "done"
    SUPERSEDED = "superseded"
    """The account's state moved on (a later call): the job stops; nothing was written."""
    GONE = "gone"
    """(One item.) Its membership item is gone or was made again: the job, or an unfollow, got
    there first."""
    REFUSED = "refused"
    """Something the batch read changed since (an unfollow, a counter moved): read again."""


class Restored(Enum):
    DONE = "done"
    SUPERSEDED = "superseded"
    """The account's state moved on (a later call): the job stops."""
    OTHER_AWAY = "other_away"
    """(One item.) The other account is out of the graph."""
    GONE = "gone"
    """(One item.) The archived item is not there any more (another worker of the job moved it, or
    an unfollow forgot it): nothing to do."""
    REFUSED = "refused"
    """Some item cannot come back as it was (a block, or the pair has a newer item), or (one of
    several) the other is away: try them one by one."""
