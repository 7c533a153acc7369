"""The ``ErrorInfo.reason`` values the service sends, as constants to compare ``error.reason`` with.

``tests/unit/client/test_reasons.py`` checks this list against the server's error table, so a reason
the server gains cannot be missing here. A reason not in this list (a newer server) still reaches
the caller as a plain string in ``error.reason``.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DOMAIN", "Reason"]

DOMAIN = "socialgraph.v1"
"""The ``ErrorInfo.domain`` of every error the service sends."""


class Reason(StrEnum):
    """Stable, machine-readable reasons (AIP-193). Each compares equal to its string."""

    INVALID_USER_ID = "INVALID_USER_ID"
    """A user ID is 0 (IDs are unsigned 64-bit integers above 0)."""
    SELF_FOLLOW = "SELF_FOLLOW"
    """``follow`` with the same user on both sides."""
    SELF_RELATION = "SELF_RELATION"
    """A block, mute, request or removal with the same user on both sides."""
    BLOCKED = "BLOCKED"
    """One side blocks the other (``FailedPrecondition``)."""
    FOLLOW_REQUEST_NOT_FOUND = "FOLLOW_REQUEST_NOT_FOUND"
    """``accept_follow_request`` with no pending request (``NotFound``)."""
    INVALID_LIMIT = "INVALID_LIMIT"
    """``suggest_follows`` with a limit below 0 or above 100."""
    INVALID_DURATION = "INVALID_DURATION"
    """``mute`` with a negative duration, one over 100 years, or a malformed one."""
    INVALID_PAGE_SIZE = "INVALID_PAGE_SIZE"
    """A negative ``page_size``."""
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"  # noqa: S105 - a reason, not a secret
    """A page token that is forged, corrupted, expired in rotation, or from another query."""
    INVALID_TWEET = "INVALID_TWEET"
    """A tweet the service refuses (the tweet pipeline)."""
    TOO_MANY_IDS = "TOO_MANY_IDS"
    """More than 100 IDs in one ``batch_get_counts`` or ``get_relationships``."""
    MALFORMED_REQUEST = "MALFORMED_REQUEST"
    """Request bytes that are not the RPC's message."""
    FOLLOW_LIMIT = "FOLLOW_LIMIT"
    """The follower already follows the most accounts allowed (``FailedPrecondition``)."""
    ACCOUNT_DEACTIVATED = "ACCOUNT_DEACTIVATED"
    """An account of the call is deactivated (``AccountDeactivatedError``, a ``FailedPrecondition``)."""
    ACCOUNT_DELETED = "ACCOUNT_DELETED"
    """An account of the call is deleted, for good (``AccountDeletedError``, a ``FailedPrecondition``)."""
    RATE_LIMITED = "RATE_LIMITED"
    """Too many follows in the window (``ResourceExhausted``; ``retry_after`` says when)."""
    UNAUTHENTICATED = "UNAUTHENTICATED"
    """No bearer token, or one the service does not know."""
    MISSING_SCOPE = "MISSING_SCOPE"
    """The caller's token lacks the scope the RPC needs (``PermissionDenied``)."""
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    """The graph store did not answer (``Unavailable``; retried by the client)."""
    TIMELINE_UNAVAILABLE = "TIMELINE_UNAVAILABLE"
    """The timeline store did not answer (``Unavailable``; retried by the client)."""
    INTERNAL = "INTERNAL"
    """An unexpected failure; ``metadata["request_id"]`` leads to the server's log line."""
