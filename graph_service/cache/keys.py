"""Redis key names. Every key of one user shares the hash tag ``{<user_id>}``, so the Lua
scripts that touch several keys stay within one Redis Cluster slot. No command ever
spans two users' keys."""

from __future__ import annotations

from graph_service.domain.models import Direction

__all__ = [
    "TRUST_GENERATION",
    "TRUST_LEASES",
    "TRUST_PREFIX",
    "TRUST_RESET",
    "TRUST_RUN",
    "account_state",
    "counts",
    "epoch",
    "follow_state",
    "list_key",
    "list_tmp",
    "list_tombstones",
    "mute",
    "privacy",
    "privacy_epoch",
    "relationship",
    "suggestions",
]

PREFIX = "sg"

TRUST_PREFIX = "sgtrust:{trust}:"
"""The cache's trust record (``cache/trust.py``), all in one slot, outside the ``sg:`` prefix: the
near caches do not track it (a lease renewal pushes no invalidation) and emptying the cache keeps it."""
TRUST_GENERATION = f"{TRUST_PREFIX}gen"
"""String: the cache's generation, new after every reset; absent: nothing in the cache is trusted."""
TRUST_LEASES = f"{TRUST_PREFIX}leases"
"""Sorted set: each serving process's lease, scored by its expiry (Redis's clock, ms)."""
TRUST_RESET = f"{TRUST_PREFIX}reset"
"""String with a TTL: the cache is being emptied (only one at a time, as far as it matters)."""
TRUST_RUN = f"{TRUST_PREFIX}run"
"""String: the run IDs of the Redis nodes when the cache was last emptied (a restart changes them)."""


def epoch(user_id: int) -> str:
    """Bumped by every write touching the user's follow state or lists; guards cache fills."""
    return f"{PREFIX}:{{{user_id}}}:ep"


def follow_state(follower_id: int, followee_id: int) -> str:
    """'1' or '0': does follower follow followee. Lives in the follower's slot."""
    return f"{PREFIX}:{{{follower_id}}}:fs:{followee_id}"


def list_key(direction: Direction, user_id: int) -> str:
    """A whole adjacency list as a lexicographic sorted set of ``<at>#<user_id>`` members."""
    tag = "fl" if direction is Direction.FOLLOWERS else "fg"
    return f"{PREFIX}:{{{user_id}}}:{tag}"


def list_tombstones(direction: Direction, user_id: int) -> str:
    """Members recently removed from the list (scored by removal time); they may not come back."""
    return f"{list_key(direction, user_id)}:gone"


def list_tmp(direction: Direction, user_id: int, token: str) -> str:
    return f"{list_key(direction, user_id)}:fill:{token}"


def counts(user_id: int) -> str:
    """Hash of ``fl`` (followers), ``fg`` (following) and ``v`` (counter version)."""
    return f"{PREFIX}:{{{user_id}}}:cnt"


def relationship(actor_id: int, target_id: int) -> str:
    """Six '0'/'1' flags: how the actor relates to the target (``Relationship.encode``)."""
    return f"{PREFIX}:{{{actor_id}}}:rl:{target_id}"


def mute(actor_id: int, target_id: int) -> str:
    """The actor's mute of the target (``Relationship.encode_mute``: ``-`` for none). Read and filled
    with the relationship, but a key of its own: the relationship value keeps the six flags that
    every release reads and writes, so old and new tasks can share the cache during a rollout."""
    return f"{PREFIX}:{{{actor_id}}}:mu:{target_id}"


def privacy(user_id: int) -> str:
    """'1' if the account is private, '0' if public."""
    return f"{PREFIX}:{{{user_id}}}:pv"


def account_state(user_id: int) -> str:
    """The account's lifecycle state (``Lifecycle``'s letter; SPEC §3b). Filled and dropped under the
    user's settings epoch (``privacy_epoch``), which only privacy and lifecycle changes move."""
    return f"{PREFIX}:{{{user_id}}}:st"


def suggestions(user_id: int) -> str:
    """The user's ranked follow suggestions (JSON), kept for a short TTL."""
    return f"{PREFIX}:{{{user_id}}}:sg"


def privacy_epoch(user_id: int) -> str:
    """The user's settings epoch: bumped by every privacy and lifecycle change of the user; guards
    fills of ``privacy`` and ``account_state``."""
    return f"{PREFIX}:{{{user_id}}}:pe"
