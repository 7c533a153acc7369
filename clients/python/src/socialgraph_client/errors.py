"""Typed errors: one class per family of canonical status codes, all under ``SocialGraphError``.

Catch the family (``except NotFound``), read the stable ``reason`` (``Reason.BLOCKED``, or a plain
``str`` for a reason this client does not know), log ``request_id`` (the ID the server logged the
call under). The status details are read from the ``grpc-status-details-bin`` trailer:
``google.rpc.ErrorInfo`` gives ``reason`` and ``metadata``, ``google.rpc.RetryInfo`` gives
``retry_after``. A few reasons a caller must tell apart have a class of their own within their
family (``AccountDeactivatedError`` is a ``FailedPrecondition``). Every error is also a
``grpc.RpcError`` with ``code()``, ``details()`` and ``trailing_metadata()``, so code written for
gRPC's own errors (``except grpc.RpcError``) handles them unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from socialgraph_client.reasons import DOMAIN, Reason

__all__ = [
    "Aborted",
    "AccountDeactivatedError",
    "AccountDeletedError",
    "AlreadyExists",
    "Cancelled",
    "ConnectError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "SocialGraphError",
    "StatusCodeView",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "error_from_rpc",
]

DETAILS_KEY = "grpc-status-details-bin"
REQUEST_ID_KEY = "x-request-id"

MetadataPairs = tuple[tuple[str, str | bytes], ...]


class StatusCodeView:
    """``error.code``: called, the ``grpc.StatusCode`` (``error.code()``, as on ``grpc.RpcError``);
    read as a value, it stands for that code (``error.code == grpc.StatusCode.NOT_FOUND``,
    ``error.code.name``), as the attribute of earlier versions did. Compare with ``==``, or call it
    for ``is``."""

    __slots__ = ("_code",)

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def __call__(self) -> grpc.StatusCode:
        return self._code

    def __eq__(self, other: object) -> bool:
        return self._code == (other._code if isinstance(other, StatusCodeView) else other)

    def __hash__(self) -> int:
        return hash(self._code)

    def __getattr__(self, name: str) -> Any:
        if name == "_code":  # not set yet (a copy being made): no recursion through this method
            raise AttributeError(name)
        return getattr(self._code, name)  # name, value

    def __repr__(self) -> str:
        return repr(self._code)


class SocialGraphError(grpc.RpcError):
    """A call that failed. Every error of the client is one of these, and a ``grpc.RpcError``."""

    codes: ClassVar[tuple[grpc.StatusCode, ...]] = ()
    """The status codes this class stands for (the base: any code no family claims)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str = "",
        metadata: dict[str, str] | None = None,
        request_id: str = "",
        retry_after: float | None = None,
        attempts: int = 1,
        trailing_metadata: MetadataPairs = (),
        initial_metadata: MetadataPairs = (),
    ) -> None:
        head = f"{code.name} {reason}" if reason else code.name
        super().__init__(f"{head}: {message}" + (f" (request {request_id})" if request_id else ""))
        self._code = code
        self.message = message
        """The server's message, for people; programs read ``reason``."""
        self.reason: Reason | str = _known(reason)
        """The stable ``ErrorInfo.reason``: the ``Reason`` member when this client knows it (so
        ``error.reason is Reason.BLOCKED`` holds), the plain string when it does not (a newer
        server's), or "" when the status carried none. Either compares equal to its string."""
        self.metadata = metadata or {}
        """``ErrorInfo.metadata``: the values the message names (e.g. ``{"user_id": "7"}``)."""
        self.request_id = request_id
        """The ``x-request-id`` the server logged the call under: the one given, or the one the client
        made up (or, for a failure before any server answered, the one that was sent)."""
        self.retry_after = retry_after
        """Seconds until the call may succeed (``google.rpc.RetryInfo``); None when not said."""
        self.attempts = attempts
        """How many times the call was sent (more than 1 when retries ran; 0 when no server was
        reached to send it to, see ``ConnectError``)."""
        self._trailing = trailing_metadata
        self._initial = initial_metadata

    @property
    def code(self) -> StatusCodeView:
        """The canonical gRPC status code: ``error.code()`` (see ``StatusCodeView``)."""
        return StatusCodeView(self._code)

    def details(self) -> str:
        """The server's message (``message``), as ``grpc.RpcError.details()`` gives it."""
        return self.message

    def trailing_metadata(self) -> MetadataPairs:  # type: ignore[override]  # grpc-stubs' _Metadatum is the same pairs
        """The trailing metadata of the failed attempt (the status details among it); empty for an
        error of the client's own (``ConnectError``, a closed client)."""
        return self._trailing

    def initial_metadata(self) -> MetadataPairs:
        """The initial metadata of the failed attempt (the server's ``x-request-id`` among it)."""
        return self._initial

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (Celery results, process pools) by the state, not by the constructor's arguments.
        return (_restore, (type(self), self.args, self.__dict__))


def _known(reason: str) -> Reason | str:
    """The ``Reason`` member of a reason this client knows; any other string as it came."""
    try:
        return Reason(reason)
    except ValueError:
        return reason


def _restore(kind: type[SocialGraphError], args: tuple[Any, ...], state: dict[str, Any]) -> SocialGraphError:
    """An error from its pickled state: this version's, or an earlier one's (up to 1.2 ``code`` was
    the attribute now held in ``_code``, ``reason`` a plain string, and no metadata was kept)."""
    error = kind.__new__(kind)
    error.args = args
    state = dict(state)
    if "code" in state:
        state.setdefault("_code", state.pop("code"))
    state.setdefault("_trailing", ())
    state.setdefault("_initial", ())
    if isinstance(state.get("reason"), str):
        state["reason"] = _known(state["reason"])
    error.__dict__.update(state)
    return error


class InvalidArgument(SocialGraphError):
    """The request itself is wrong (``INVALID_ARGUMENT``, ``OUT_OF_RANGE``); retrying cannot help."""

    codes = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE)


class NotFound(SocialGraphError):
    codes = (grpc.StatusCode.NOT_FOUND,)


class AlreadyExists(SocialGraphError):
    codes = (grpc.StatusCode.ALREADY_EXISTS,)


class FailedPrecondition(SocialGraphError):
    """The request is well formed but the graph's state refuses it (``BLOCKED``, ``FOLLOW_LIMIT``)."""

    codes = (grpc.StatusCode.FAILED_PRECONDITION,)


class AccountDeactivatedError(FailedPrecondition):
    """An account of the call is deactivated (``ACCOUNT_DEACTIVATED``): a follow to or from it is
    refused until ``reactivate_account``."""

    for_reason: ClassVar[str] = Reason.ACCOUNT_DEACTIVATED
    """The ``ErrorInfo.reason`` this class stands for, within its family's codes."""


class AccountDeletedError(FailedPrecondition):
    """An account of the call is deleted (``ACCOUNT_DELETED``), for good: a follow to or from it, and its
    reactivation, are refused."""

    for_reason: ClassVar[str] = Reason.ACCOUNT_DELETED
    """The ``ErrorInfo.reason`` this class stands for, within its family's codes."""


class Aborted(SocialGraphError):
    codes = (grpc.StatusCode.ABORTED,)


class PermissionDenied(SocialGraphError):
    codes = (grpc.StatusCode.PERMISSION_DENIED,)


class Unauthenticated(SocialGraphError):
    codes = (grpc.StatusCode.UNAUTHENTICATED,)


class ResourceExhausted(SocialGraphError):
    """A limit was hit; ``retry_after`` says when trying again may succeed (``RATE_LIMITED``)."""

    codes = (grpc.StatusCode.RESOURCE_EXHAUSTED,)


class Unavailable(SocialGraphError):
    """The service or a store behind it did not answer, through every retry the policy allowed."""

    codes = (grpc.StatusCode.UNAVAILABLE,)


class ConnectError(Unavailable):
    """No server was ready (connected, TLS done): at ``connect(connect_timeout=...)`` within that
    time, or at a call of a client that has not reached one yet, within the call's deadline. Nothing
    was sent (``attempts`` is 0)."""


class DeadlineExceeded(SocialGraphError):
    codes = (grpc.StatusCode.DEADLINE_EXCEEDED,)


class Cancelled(SocialGraphError):
    codes = (grpc.StatusCode.CANCELLED,)


class Unimplemented(SocialGraphError):
    """The server does not serve this RPC (an older server than the client)."""

    codes = (grpc.StatusCode.UNIMPLEMENTED,)


class Internal(SocialGraphError):
    """A failure inside the server (``INTERNAL``, ``UNKNOWN``, ``DATA_LOSS``); see its log by ``request_id``."""

    codes = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS)


_FAMILIES: dict[grpc.StatusCode, type[SocialGraphError]] = {
    code: family
    for family in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        Aborted,
        PermissionDenied,
        Unauthenticated,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
        Unimplemented,
        Internal,
    )
    for code in family.codes
}

_BY_REASON: dict[tuple[grpc.StatusCode, str], type[SocialGraphError]] = {
    (code, kind.for_reason): kind for kind in (AccountDeactivatedError, AccountDeletedError) for code in kind.codes
}
"""The classes of single reasons, keyed by code too: a reason under a code its class does not stand for
(a server bug, a proxy) stays in its code's family rather than changing family."""


def error_from_rpc(error: grpc.RpcError, request_id: str, attempts: int = 1) -> SocialGraphError:
    """The typed error for a failed call (``grpc.RpcError`` of the sync API or ``AioRpcError``)."""
    call: Any = error  # both kinds of error are also the call, with code(), details(), trailing_metadata()
    code: grpc.StatusCode = call.code()
    reason, metadata, retry_after = _details(call.trailing_metadata() or ())
    # The server echoes the ID it logged the call under (its own when the one sent was unusable).
    echoed = [value for key, value in call.initial_metadata() or () if key == REQUEST_ID_KEY]
    family = _BY_REASON.get((code, reason)) or _FAMILIES.get(code, SocialGraphError)
    return family(
        code,
        call.details() or "",
        reason=reason,
        metadata=metadata,
        request_id=echoed[0] if echoed else request_id,
        retry_after=retry_after,
        attempts=attempts,
        trailing_metadata=tuple(call.trailing_metadata() or ()),
        initial_metadata=tuple(call.initial_metadata() or ()),
    )


def _details(trailers: Sequence[tuple[str, Any]]) -> tuple[str, dict[str, str], float | None]:
    """``ErrorInfo`` reason and metadata, and ``RetryInfo`` delay, from the status details trailer."""
    reason, metadata, retry_after = "", {}, None
    for key, value in trailers:
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            continue  # not ours to fail on: the code and message still say what happened
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            retry = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                if info.domain in (DOMAIN, ""):  # another domain's reason (a proxy's) is not ours to report
                    reason, metadata = info.reason, dict(info.metadata)
            elif detail.Unpack(retry):
                retry_after = retry.retry_delay.ToNanoseconds() / 1e9
    return reason, metadata, retry_after
