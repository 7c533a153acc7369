"""Domain errors: one class per caller-visible failure, each with a stable reason.

The gRPC edge maps these to a status code plus ``google.rpc.ErrorInfo``
(``error_mapping.py``); the Python client maps them back (``socialgraph_client.errors``).
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "BatchTooLarge",
    "Code",
    "DomainError",
    "InvalidPageSize",
    "InvalidPageToken",
    "InvalidUserId",
    "SelfFollow",
    "Unavailable",
]


class Code(Enum):
    """The canonical codes the service uses (a subset of google.rpc.Code)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
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


class InvalidPageSize(DomainError):
    reason = "INVALID_PAGE_SIZE"

    def __init__(self, page_size: int) -> None:
        super().__init__("page_size must not be negative", page_size=str(page_size))


class InvalidPageToken(DomainError):
    reason = "INVALID_PAGE_TOKEN"

    def __init__(self, why: str) -> None:
        super().__init__(f"page_token is not valid for this request: {why}")


class BatchTooLarge(DomainError):
    reason = "TOO_MANY_IDS"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"at most {limit} IDs per call", size=str(size), limit=str(limit))


class Unavailable(DomainError):
    """The edge store could not be reached or kept throttling; safe to retry."""

    code = Code.UNAVAILABLE
    reason = "STORE_UNAVAILABLE"
