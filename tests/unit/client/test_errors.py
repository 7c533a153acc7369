"""A failed call becomes the error class of its code family, with the status details read back."""

from __future__ import annotations

import pickle
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from socialgraph_client import (
    DOMAIN,
    Aborted,
    AccountDeactivatedError,
    AccountDeletedError,
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    ResourceExhausted,
    SocialGraphError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from socialgraph_client.errors import _restore, error_from_rpc

from graph_service.api.error_mapping import to_grpc_status
from graph_service.domain.errors import (
    AccountDeactivated,
    AccountDeleted,
    Blocked,
    DomainError,
    InvalidDuration,
    RateLimited,
)


class Failed(grpc.RpcError):
    """What gRPC raises for a failed call: the error is also the call (code, details, metadata)."""

    def __init__(self, code: grpc.StatusCode, details: str = "", trailing: Any = (), initial: Any = ()) -> None:
        self._code, self._details, self._trailing, self._initial = code, details, trailing, initial

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing

    def initial_metadata(self) -> Any:
        return self._initial


FAMILIES = [
    (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
    (grpc.StatusCode.OUT_OF_RANGE, InvalidArgument),
    (grpc.StatusCode.NOT_FOUND, NotFound),
    (grpc.StatusCode.ALREADY_EXISTS, AlreadyExists),
    (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition),
    (grpc.StatusCode.ABORTED, Aborted),
    (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
    (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted),
    (grpc.StatusCode.UNAVAILABLE, Unavailable),
    (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded),
    (grpc.StatusCode.CANCELLED, Cancelled),
    (grpc.StatusCode.UNIMPLEMENTED, Unimplemented),
    (grpc.StatusCode.INTERNAL, Internal),
    (grpc.StatusCode.UNKNOWN, Internal),
    (grpc.StatusCode.DATA_LOSS, Internal),
]


@pytest.mark.parametrize(("code", "family"), FAMILIES, ids=[code.name for code, _ in FAMILIES])
def test_each_code_raises_its_family(code: grpc.StatusCode, family: type[SocialGraphError]) -> None:
    error = error_from_rpc(Failed(code, "went wrong"), "req-1")
    assert type(error) is family
    assert isinstance(error, SocialGraphError)
    assert (error.code(), error.message, error.reason, error.request_id) == (code, "went wrong", "", "req-1")


def test_every_code_but_ok_has_a_family() -> None:
    assert {code for code, _ in FAMILIES} == set(grpc.StatusCode) - {grpc.StatusCode.OK}


def test_reason_and_metadata_come_from_the_servers_error_info() -> None:
    """The server's own mapping of ``Blocked`` read back by the client."""
    status = to_grpc_status(Blocked(1, 2))
    error = error_from_rpc(Failed(grpc.StatusCode.FAILED_PRECONDITION, status.details, status.trailing_metadata), "r")
    assert type(error) is FailedPrecondition  # a reason without a class of its own stays in its family
    assert error.reason == Reason.BLOCKED
    assert error.metadata
    assert error.retry_after is None
    assert "FAILED_PRECONDITION BLOCKED" in str(error)


def test_a_refused_mute_duration_is_an_invalid_argument_with_its_reason() -> None:
    """The server's own mapping of ``InvalidDuration`` read back by the client."""
    status = to_grpc_status(InvalidDuration("duration", "must not be negative"))
    error = error_from_rpc(Failed(grpc.StatusCode.INVALID_ARGUMENT, status.details, status.trailing_metadata), "r")
    assert isinstance(error, InvalidArgument)
    assert error.reason == Reason.INVALID_DURATION
    assert error.metadata == {"field": "duration"}
    assert "INVALID_ARGUMENT INVALID_DURATION" in str(error)


def test_retry_after_comes_from_retry_info() -> None:
    status = to_grpc_status(RateLimited(7, 400, 86400, 12.5))
    error = error_from_rpc(Failed(grpc.StatusCode.RESOURCE_EXHAUSTED, "", status.trailing_metadata), "r")
    assert isinstance(error, ResourceExhausted)
    assert error.reason == Reason.RATE_LIMITED
    assert error.retry_after == pytest.approx(12.5)


def test_request_id_is_the_one_the_server_echoed() -> None:
    """The server logs a call under its own ID when the one sent was unusable; the error says which."""
    error = error_from_rpc(Failed(grpc.StatusCode.INTERNAL, initial=(("x-request-id", "server-7"),)), "sent-7")
    assert error.request_id == "server-7"
    assert "server-7" in str(error)


def test_unreadable_details_leave_code_and_message() -> None:
    """Details that are not a google.rpc.Status (a proxy's, a corrupted trailer) are ignored, not raised."""
    trailing = (("grpc-status-details-bin", b"\xff\xffnot a status"),)
    error = error_from_rpc(Failed(grpc.StatusCode.UNAVAILABLE, "proxy said no", trailing), "r")
    assert isinstance(error, Unavailable)
    assert (error.message, error.reason) == ("proxy said no", "")


def test_a_retry_info_without_error_info_still_gives_retry_after() -> None:
    delay = duration_pb2.Duration(seconds=3)
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    rich = status_pb2.Status(code=8, message="slow down", details=[detail]).SerializeToString()
    error = error_from_rpc(
        Failed(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", (("grpc-status-details-bin", rich),)), "r"
    )
    assert (error.reason, error.retry_after) == ("", 3.0)


def test_errors_survive_pickling() -> None:
    """Celery result backends and process pools pickle exceptions."""
    status = to_grpc_status(RateLimited(7, 400, 86400, 12.5))
    error = error_from_rpc(Failed(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow", status.trailing_metadata), "r-1", 3)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert type(copy) is ResourceExhausted
    assert (copy.code, copy.reason, copy.retry_after, copy.request_id, copy.attempts, str(copy)) == (
        error.code, error.reason, error.retry_after, "r-1", 3, str(error),
    )  # fmt: skip


class PickledBy12:
    """Pickles as client 1.2 pickled a ``FailedPrecondition``: ``_restore`` with the class, the args and
    the state of 1.2, where ``code`` was an attribute and ``reason`` a plain string."""

    def __reduce__(self) -> tuple[Any, ...]:
        state = {
            "code": grpc.StatusCode.FAILED_PRECONDITION,
            "message": "one of the accounts blocks the other",
            "reason": "BLOCKED",
            "metadata": {"follower_id": "1", "followee_id": "2"},
            "request_id": "r-12",
            "retry_after": None,
            "attempts": 2,
        }
        return (_restore, (FailedPrecondition, ("FAILED_PRECONDITION BLOCKED: one of ... (request r-12)",), state))


def test_an_error_pickled_by_version_1_2_unpickles_with_its_code_and_methods() -> None:
    """A result backend holding errors of the earlier client still reads them after the upgrade."""
    copy = pickle.loads(pickle.dumps(PickledBy12()))  # noqa: S301 - our own bytes
    assert type(copy) is FailedPrecondition
    assert copy.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert copy.code == grpc.StatusCode.FAILED_PRECONDITION
    assert copy.reason is Reason.BLOCKED
    assert (copy.trailing_metadata(), copy.initial_metadata(), copy.details()) == ((), (), copy.message)
    assert (copy.metadata["follower_id"], copy.request_id, copy.attempts) == ("1", "r-12", 2)
    assert str(copy) == "FAILED_PRECONDITION BLOCKED: one of ... (request r-12)"
    again = pickle.loads(pickle.dumps(copy))  # noqa: S301 - our own bytes
    assert (again.code(), again.reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.BLOCKED)


def test_another_domains_error_info_is_not_taken_for_a_reason() -> None:
    """An ErrorInfo of a proxy (another domain) leaves ``reason`` empty rather than misleading."""
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="QUOTA", domain="proxy.example"))
    rich = status_pb2.Status(code=14, message="no", details=[detail]).SerializeToString()
    error = error_from_rpc(Failed(grpc.StatusCode.UNAVAILABLE, "no", (("grpc-status-details-bin", rich),)), "r")
    assert (error.reason, error.metadata) == ("", {})


def with_error_info(code: grpc.StatusCode, reason: str, domain: str = DOMAIN) -> Failed:
    """A failed call whose status details carry one ``ErrorInfo``, as the server writes them."""
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=domain, metadata={"user_id": "7"}))
    status = status_pb2.Status(code=code.value[0], message="account 7 is not active", details=[detail])
    return Failed(code, status.message, (("grpc-status-details-bin", status.SerializeToString()),))


ACCOUNT_ERRORS = [(Reason.ACCOUNT_DEACTIVATED, AccountDeactivatedError), (Reason.ACCOUNT_DELETED, AccountDeletedError)]


@pytest.mark.parametrize(("reason", "kind"), ACCOUNT_ERRORS, ids=[reason.value for reason, _ in ACCOUNT_ERRORS])
def test_an_account_reason_raises_its_own_class_within_failed_precondition(
    reason: Reason, kind: type[FailedPrecondition]
) -> None:
    """``except AccountDeletedError`` and ``except FailedPrecondition`` both catch it."""
    error = error_from_rpc(with_error_info(grpc.StatusCode.FAILED_PRECONDITION, reason), "r-1")
    assert type(error) is kind
    assert isinstance(error, FailedPrecondition)
    assert (error.code(), error.reason, error.metadata, error.request_id) == (
        grpc.StatusCode.FAILED_PRECONDITION, reason, {"user_id": "7"}, "r-1",
    )  # fmt: skip
    assert f"FAILED_PRECONDITION {reason.value}: account 7 is not active" in str(error)


SERVER_ACCOUNT_ERRORS = [(AccountDeactivated(7), AccountDeactivatedError), (AccountDeleted(7), AccountDeletedError)]


@pytest.mark.parametrize(
    ("domain_error", "kind"), SERVER_ACCOUNT_ERRORS, ids=[error.reason for error, _ in SERVER_ACCOUNT_ERRORS]
)
def test_the_servers_account_errors_read_back_as_their_classes(
    domain_error: DomainError, kind: type[FailedPrecondition]
) -> None:
    """The server's own mapping of ``AccountDeactivated`` and ``AccountDeleted`` read back by the client."""
    status = to_grpc_status(domain_error)
    error = error_from_rpc(Failed(status.code, status.details, status.trailing_metadata), "r")
    assert type(error) is kind
    assert (error.reason, error.metadata) == (domain_error.reason, {"user_id": "7"})


@pytest.mark.parametrize(("reason", "kind"), ACCOUNT_ERRORS, ids=[reason.value for reason, _ in ACCOUNT_ERRORS])
def test_an_account_error_survives_pickling_as_its_class(reason: Reason, kind: type[FailedPrecondition]) -> None:
    error = error_from_rpc(with_error_info(grpc.StatusCode.FAILED_PRECONDITION, reason), "r-1")
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert type(copy) is kind
    assert (copy.reason, copy.metadata, str(copy)) == (error.reason, error.metadata, str(error))


def test_an_account_reason_under_another_code_stays_in_that_codes_family() -> None:
    """The class is picked by code and reason together: a misplaced reason never changes the family."""
    error = error_from_rpc(with_error_info(grpc.StatusCode.NOT_FOUND, Reason.ACCOUNT_DELETED), "r")
    assert type(error) is NotFound
    assert error.reason == Reason.ACCOUNT_DELETED


def test_an_account_reason_of_another_domain_is_a_plain_failed_precondition() -> None:
    error = error_from_rpc(with_error_info(grpc.StatusCode.FAILED_PRECONDITION, "ACCOUNT_DELETED", "proxy.x"), "r")
    assert type(error) is FailedPrecondition
    assert error.reason == ""


def test_every_error_is_a_grpc_rpc_error_with_its_methods() -> None:
    """Code written for gRPC's own errors (``except grpc.RpcError``, ``code()``, ``details()``,
    ``trailing_metadata()``) handles the client's errors unchanged."""
    status = to_grpc_status(Blocked(1, 2))
    failed = Failed(status.code, status.details, status.trailing_metadata, initial=(("x-request-id", "s-1"),))
    error = error_from_rpc(failed, "r-1")
    with pytest.raises(grpc.RpcError) as caught:
        raise error
    assert caught.value is error
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == status.details == error.message
    assert error.trailing_metadata() == tuple(status.trailing_metadata)
    assert error.initial_metadata() == (("x-request-id", "s-1"),)
    own = Unavailable(grpc.StatusCode.UNAVAILABLE, "no server")
    assert (own.code(), own.details(), own.trailing_metadata()) == (grpc.StatusCode.UNAVAILABLE, "no server", ())


def test_code_read_as_a_value_still_stands_for_the_status_code() -> None:
    """``error.code == grpc.StatusCode.X``, ``error.code.name`` and lookups by it work as before ``code()``."""
    error = error_from_rpc(Failed(grpc.StatusCode.NOT_FOUND, "gone"), "r")
    assert error.code == grpc.StatusCode.NOT_FOUND
    assert error.code != grpc.StatusCode.INTERNAL
    assert error.code in (grpc.StatusCode.NOT_FOUND,)
    assert error.code.name == "NOT_FOUND"
    assert {grpc.StatusCode.NOT_FOUND: "found"}[error.code] == "found"  # type: ignore[index]  # as older code does
    assert repr(error.code) == repr(grpc.StatusCode.NOT_FOUND)


def test_a_known_reason_is_its_reason_member_and_an_unknown_one_the_plain_string() -> None:
    known = error_from_rpc(with_error_info(grpc.StatusCode.FAILED_PRECONDITION, "BLOCKED"), "r")
    assert known.reason is Reason.BLOCKED
    assert pickle.loads(pickle.dumps(known)).reason is Reason.BLOCKED  # noqa: S301 - our own bytes
    newer = error_from_rpc(with_error_info(grpc.StatusCode.FAILED_PRECONDITION, "SOME_NEW_REASON"), "r")
    assert type(newer.reason) is str
    assert newer.reason == "SOME_NEW_REASON"
    assert error_from_rpc(Failed(grpc.StatusCode.INTERNAL), "r").reason == ""
