"""Domain errors: one class per caller-visible failure, each with a stable reason.

The gRPC edge maps these to a status code plus ``google.rpc.ErrorInfo``
(``graph_service/api/error_mapping.py``); the Python client maps them back (``socialgraph_client.errors``).
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "BatchTooLarge",
    "Blocked",
    "Code",
    "DomainError",
    "InvalidLimit",
    "InvalidPageSize",
    "InvalidPageToken",
    "InvalidTweet",
    "InvalidUserId",
    "RequestNotFound",
    "SelfFollow",
    "SelfRelation",
    "TimelineUnavailable",
    "Unavailable",
]


class Code(Enum):
    """The canonical codes the service uses (a subset of google.rpc.Code)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    NOT_FOUND = "NOT_FOUND"
    UNAVAILABLE = "UNAVAILABLE"


class DomainError(Exception):
    """Base class: a message for humans, a reason for programs, metadata for both."""

    code: Code = Code.INVALID_ARGUMENT
    reason: str = "INVALID_ARGUMENT"

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


class InvalidUserId(DomainError):
    reason = "INVALID_USER_ID"

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} must be a user ID greater than 0", field=field)


class SelfFollow(DomainError):
    reason = "SELF_FOLLOW"

    def __init__(self, user_id: int) -> None:
        super().__init__("an account cannot follow itself", user_id=str(user_id))


class SelfRelation(DomainError):
    """Blocking, accepting or removing oneself: there is no such relationship."""

    reason = "SELF_RELATION"

    def __init__(self, user_id: int) -> None:
        super().__init__(
            f"both IDs name account {user_id}; the call needs two different accounts", user_id=str(user_id)
        )


class Blocked(DomainError):
    """One account blocks the other, so no follow or request can be made either way."""

    code = Code.FAILED_PRECONDITION
    reason = "BLOCKED"

    def __init__(self, follower_id: int, followee_id: int) -> None:
        super().__init__(
            "one of the accounts blocks the other", follower_id=str(follower_id), followee_id=str(followee_id)
        )


class RequestNotFound(DomainError):
    """Accepting a request that does not exist (and was not accepted before)."""

    code = Code.NOT_FOUND
    reason = "FOLLOW_REQUEST_NOT_FOUND"

    def __init__(self, user_id: int, requester_id: int) -> None:
        super().__init__(
            f"account {user_id} has no pending follow request from account {requester_id}",
            user_id=str(user_id),
            requester_id=str(requester_id),
        )


class InvalidLimit(DomainError):
    reason = "INVALID_LIMIT"

    def __init__(self, limit: int, maximum: int) -> None:
        super().__init__(f"limit must be between 0 and {maximum}", limit=str(limit), maximum=str(maximum))


class InvalidPageSize(DomainError):
    reason = "INVALID_PAGE_SIZE"

    def __init__(self, page_size: int) -> None:
        super().__init__("page_size must not be negative", page_size=str(page_size))


class InvalidPageToken(DomainError):
    reason = "INVALID_PAGE_TOKEN"

    def __init__(self, why: str) -> None:
        super().__init__(f"page_token is not valid for this request: {why}")


class InvalidTweet(DomainError):
    """A tweet that cannot be posted: a bad author ID, or a text that is too long."""

    reason = "INVALID_TWEET"


class BatchTooLarge(DomainError):
    reason = "TOO_MANY_IDS"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"at most {limit} IDs per call", size=str(size), limit=str(limit))


class Unavailable(DomainError):
    """The edge store could not be reached or kept throttling; safe to retry."""

    code = Code.UNAVAILABLE
    reason = "STORE_UNAVAILABLE"


class TimelineUnavailable(DomainError):
    """Redis, which holds the timelines, could not be reached; safe to retry."""

    code = Code.UNAVAILABLE
    reason = "TIMELINE_UNAVAILABLE"
