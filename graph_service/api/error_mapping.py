"""The one place where domain errors become gRPC statuses with ``google.rpc.ErrorInfo``."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from graph_service.domain.errors import Code, DomainError

__all__ = ["DOMAIN", "internal_status", "to_grpc_status"]

DOMAIN = "socialgraph.v1"

_CODES = {
    Code.INVALID_ARGUMENT: code_pb2.INVALID_ARGUMENT,
    Code.FAILED_PRECONDITION: code_pb2.FAILED_PRECONDITION,
    Code.NOT_FOUND: code_pb2.NOT_FOUND,
    Code.UNAVAILABLE: code_pb2.UNAVAILABLE,
    Code.RESOURCE_EXHAUSTED: code_pb2.RESOURCE_EXHAUSTED,
    Code.UNAUTHENTICATED: code_pb2.UNAUTHENTICATED,
    Code.PERMISSION_DENIED: code_pb2.PERMISSION_DENIED,
}


def _status(
    code: int, message: str, reason: str, metadata: dict[str, str], retry_after: float | None = None
) -> grpc.Status:
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata))
    details = [info]
    if retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(max(0, round(retry_after * 1e9)))
        retry = any_pb2.Any()
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    status = status_pb2.Status(code=code, message=message, details=details)
    result: grpc.Status = rpc_status.to_status(status)
    return result


def to_grpc_status(error: DomainError) -> grpc.Status:
    return _status(_CODES[error.code], error.message, error.reason, dict(error.metadata), error.retry_after_seconds)


def internal_status(request_id: str) -> grpc.Status:
    """An unexpected failure: no internals leak, the request ID leads to the log line."""
    return _status(code_pb2.INTERNAL, "internal error", "INTERNAL", {"request_id": request_id})
