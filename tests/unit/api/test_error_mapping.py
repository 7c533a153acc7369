"""Domain errors become a canonical gRPC status with one google.rpc.ErrorInfo (AIP-193)."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from graph_service.api.error_mapping import DOMAIN, internal_status, to_grpc_status
from graph_service.domain import errors
from graph_service.domain.errors import (
    BatchTooLarge,
    DomainError,
    FollowLimit,
    InvalidPageSize,
    InvalidPageToken,
    InvalidUserId,
    MalformedRequest,
    MissingScope,
    OpaqueError,
    RateLimited,
    SelfFollow,
    TimelineUnavailable,
    Unauthenticated,
    Unavailable,
)

DETAILS_KEY = "grpc-status-details-bin"


def decode(status: grpc.Status) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    """The google.rpc.Status a client would read from the trailers, and its single ErrorInfo."""
    trailers = dict(status.trailing_metadata)
    assert set(trailers) == {DETAILS_KEY}
    rich = status_pb2.Status.FromString(trailers[DETAILS_KEY])
    infos = [d for d in rich.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1
    info = error_details_pb2.ErrorInfo()
    assert infos[0].Unpack(info)
    return rich, info


def retry_delay(status: grpc.Status) -> float | None:
    """The RetryInfo delay in seconds, None when the status carries none."""
    rich = status_pb2.Status.FromString(dict(status.trailing_metadata)[DETAILS_KEY])
    for detail in rich.details:
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            return float(retry.retry_delay.ToNanoseconds()) / 1e9
    return None


CASES: list[tuple[DomainError, grpc.StatusCode, str, dict[str, str]]] = [
    (InvalidUserId("follower_id"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_USER_ID", {"field": "follower_id"}),
    (InvalidUserId("user_ids[3]"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_USER_ID", {"field": "user_ids[3]"}),
    (SelfFollow(42), grpc.StatusCode.INVALID_ARGUMENT, "SELF_FOLLOW", {"user_id": "42"}),
    (InvalidPageSize(-3), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_SIZE", {"page_size": "-3"}),
    (InvalidPageToken("malformed"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN", {}),
    (
        BatchTooLarge(101, 100),
        grpc.StatusCode.INVALID_ARGUMENT,
        "TOO_MANY_IDS",
        {"size": "101", "limit": "100"},
    ),
    (Unavailable("DynamoDB kept throttling"), grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE", {}),
    (TimelineUnavailable("Redis did not answer"), grpc.StatusCode.UNAVAILABLE, "TIMELINE_UNAVAILABLE", {}),
    (MalformedRequest("3 bytes: Wire format was corrupt"), grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_REQUEST", {}),
    (FollowLimit(7, 7500), grpc.StatusCode.FAILED_PRECONDITION, "FOLLOW_LIMIT", {"follower_id": "7", "cap": "7500"}),
    (
        RateLimited(7, 400, 86400, 12.5),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "RATE_LIMITED",
        {"actor_id": "7", "limit": "400", "window_seconds": "86400"},
    ),
    (Unauthenticated("no bearer token"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", {}),
    (
        MissingScope("feed", "write", "/socialgraph.v1.SocialGraphService/Follow"),
        grpc.StatusCode.PERMISSION_DENIED,
        "MISSING_SCOPE",
        {"scope": "write"},
    ),
]


@pytest.mark.parametrize(
    ("error", "code", "reason", "metadata"), CASES, ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(CASES)]
)
def test_domain_error_maps_to_code_reason_domain_and_metadata(
    error: DomainError, code: grpc.StatusCode, reason: str, metadata: dict[str, str]
) -> None:
    """Each domain error becomes its canonical code and an ErrorInfo with its stable reason, domain and metadata."""
    status = to_grpc_status(error)
    assert status.code == code
    rich, info = decode(status)
    assert rich.code == code.value[0]
    assert info.reason == reason
    assert info.domain == DOMAIN == "socialgraph.v1"
    assert dict(info.metadata) == metadata


@pytest.mark.parametrize(
    "error", [c[0] for c in CASES], ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(CASES)]
)
def test_message_is_the_same_in_the_status_and_the_details(error: DomainError) -> None:
    """The human message is the status details and the rich status message alike (grpc_status checks this)."""
    status = to_grpc_status(error)
    rich, _ = decode(status)
    assert status.details == rich.message == error.message
    assert status.details


@pytest.mark.parametrize(
    ("error", "sentence"),
    [
        (Unavailable('DynamoDB query: Could not connect to the endpoint URL: "http://10.0.0.7:8000/"'), "graph store"),
        (TimelineUnavailable("Redis did not answer: Error 111 connecting to 10.0.0.7:6379"), "timeline store"),
        (MalformedRequest("3 bytes: Error parsing message with type 'socialgraph.v1.FollowRequest'"), "request body"),
    ],
)
def test_an_opaque_error_tells_callers_a_fixed_sentence_and_keeps_the_detail_as_its_text(
    error: OpaqueError, sentence: str
) -> None:
    """Endpoints, hosts and a library's words never reach the caller; ``str(exc)``, which the
    consumers and the CLI log and print, keeps them."""
    status = to_grpc_status(error)
    assert status.details == type(error).public_message
    assert sentence in status.details
    assert "10.0.0.7" not in status.details
    assert "socialgraph.v1" not in status.details
    assert str(error) == error.args[0]
    assert str(error) not in status.details


def test_rate_limited_carries_retry_info_with_the_wait() -> None:
    """RATE_LIMITED tells the caller when to try again (google.rpc.RetryInfo), to the millisecond."""
    assert retry_delay(to_grpc_status(RateLimited(7, 400, 86400, 12.345))) == pytest.approx(12.345, abs=1e-6)
    assert retry_delay(to_grpc_status(FollowLimit(7, 10))) is None


def test_user_id_message_names_the_field() -> None:
    """The INVALID_USER_ID message tells a human which field was wrong."""
    assert "followee_id" in to_grpc_status(InvalidUserId("followee_id")).details


def test_every_domain_error_class_is_mapped() -> None:
    """Every DomainError subclass maps to a status whose reason is an UPPER_SNAKE_CASE constant."""
    classes = [getattr(errors, name) for name in errors.__all__]
    subclasses = [c for c in classes if isinstance(c, type) and issubclass(c, DomainError) and c is not DomainError]
    assert subclasses
    for cls in subclasses:
        error = cls.__new__(cls)
        DomainError.__init__(error, "message")
        status = to_grpc_status(error)
        _, info = decode(status)
        assert info.reason == cls.reason
        assert info.reason.isupper()
        assert " " not in info.reason
        assert status.code != grpc.StatusCode.OK


def test_unexpected_failure_is_internal_without_internals() -> None:
    """An unexpected failure is INTERNAL with reason INTERNAL, a bland message, and the request ID to find the log."""
    status = internal_status("req-123")
    assert status.code == grpc.StatusCode.INTERNAL
    rich, info = decode(status)
    assert rich.code == code_pb2.INTERNAL
    assert status.details == rich.message == "internal error"
    assert info.reason == "INTERNAL"
    assert info.domain == DOMAIN
    assert dict(info.metadata) == {"request_id": "req-123"}
