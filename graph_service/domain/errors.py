"""Domain errors: one class per caller-visible failure, each with a stable reason.

The gRPC edge maps these to a status code plus ``google.rpc.ErrorInfo``
(``graph_service/api/error_mapping.py``); the Python client maps them back (``socialgraph_client.errors``).
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "AccountDeactivated",
    "AccountDeleted",
    "BatchTooLarge",
    "Blocked",
    "Code",
    "DomainError",
    "FollowLimit",
    "InvalidDuration",
    "InvalidLimit",
    "InvalidPageSize",
    "InvalidPageToken",
    "InvalidTweet",
    "InvalidUserId",
    "MalformedRequest",
    "MissingScope",
    "OpaqueError",
    "RateLimited",
    "RequestNotFound",
    "SelfFollow",
    "SelfRelation",
    "TimelineUnavailable",
    "Unauthenticated",
    "Unavailable",
]


class Code(Enum):
    """The canonical codes the service uses (a subset of google.rpc.Code)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    NOT_FOUND = "NOT_FOUND"
    UNAVAILABLE = "UNAVAILABLE"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


class DomainError(Exception):
    """Base class: a message for humans, a reason for programs, metadata for both."""

    code: Code = Code.INVALID_ARGUMENT
    reason: str = "INVALID_ARGUMENT"
    retry_after_seconds: float | None = None
    """When set, the caller may try again after this long (sent as ``google.rpc.RetryInfo``)."""

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


class OpaqueError(DomainError):
    """A failure whose cause callers are not told: they get the class's fixed ``public_message``,
    while the exception's own text (``str(exc)``) is the detail, for the logs only. Endpoint URLs,
    host names and a library's exception text are the service's business, and a caller could do
    nothing with them."""

    public_message = "the call failed"

    def __init__(self, detail: str, **metadata: str) -> None:
        super().__init__(self.public_message, **metadata)
        self.args = (detail,)  # str(exc): what the consumers and the CLI log and print


class MalformedRequest(OpaqueError):
    """The request body is not a protobuf of the RPC's request type (gRPC's deserializer refused it)."""

    reason = "MALFORMED_REQUEST"
    public_message = "the request body is not a valid message of this RPC's request type"


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


class AccountDeactivated(DomainError):
    """A follow or request to or from an account that is deactivated (SPEC §3b)."""

    code = Code.FAILED_PRECONDITION
    reason = "ACCOUNT_DEACTIVATED"

    def __init__(self, user_id: int) -> None:
        super().__init__(f"account {user_id} is deactivated", user_id=str(user_id))


class AccountDeleted(DomainError):
    """A call that needs an account that is deleted: a follow to or from it, or its reactivation."""

    code = Code.FAILED_PRECONDITION
    reason = "ACCOUNT_DELETED"

    def __init__(self, user_id: int) -> None:
        super().__init__(f"account {user_id} is deleted", user_id=str(user_id))


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


class InvalidDuration(DomainError):
    """A mute's duration that is negative or longer than the longest allowed."""

    reason = "INVALID_DURATION"

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field} {why}", field=field)


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


class Unavailable(OpaqueError):
    """The edge store could not be reached or kept throttling; safe to retry."""

    code = Code.UNAVAILABLE
    reason = "STORE_UNAVAILABLE"
    public_message = "the graph store is unavailable; the call is safe to retry"


class TimelineUnavailable(OpaqueError):
    """Redis, which holds the timelines, could not be reached; safe to retry."""

    code = Code.UNAVAILABLE
    reason = "TIMELINE_UNAVAILABLE"
    public_message = "the timeline store is unavailable; the call is safe to retry"


class FollowLimit(DomainError):
    """The follower already follows, or has asked to follow, as many accounts as the cap allows."""

    code = Code.FAILED_PRECONDITION
    reason = "FOLLOW_LIMIT"

    def __init__(self, follower_id: int, cap: int) -> None:
        super().__init__(
            f"account {follower_id} follows or has asked to follow {cap} accounts, the most allowed;"
            " unfollow someone first",
            follower_id=str(follower_id),
            cap=str(cap),
        )


class RateLimited(DomainError):
    """The actor made as many follows as the window allows; ``retry_after_seconds`` says when the next one is."""

    code = Code.RESOURCE_EXHAUSTED
    reason = "RATE_LIMITED"

    def __init__(self, actor_id: int, limit: int, window_seconds: int, retry_after_seconds: float) -> None:
        super().__init__(
            f"account {actor_id} made {limit} follows in the last {window_seconds} s, the most allowed;"
            f" try again in {retry_after_seconds:.3f} s",
            actor_id=str(actor_id),
            limit=str(limit),
            window_seconds=str(window_seconds),
        )
        self.retry_after_seconds = retry_after_seconds


class Unauthenticated(DomainError):
    """No bearer token, or one that names no configured caller. The message never repeats the token."""

    code = Code.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class MissingScope(DomainError):
    """The caller is known but its scopes do not include the one the RPC needs."""

    code = Code.PERMISSION_DENIED
    reason = "MISSING_SCOPE"

    def __init__(self, caller: str, scope: str, method: str) -> None:
        super().__init__(f"caller {caller!r} lacks the {scope!r} scope that {method} needs", scope=scope)
