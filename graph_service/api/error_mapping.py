"""The one place where domain errors become gRPC statuses with ``google.rpc.ErrorInfo``."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
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
}


def _status(code: int, message: str, reason: str, metadata: dict[str, str]) -> grpc.Status:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata))
    status = status_pb2.Status(code=code, message=message, details=[detail])
    result: grpc.Status = rpc_status.to_status(status)
    return result


def to_grpc_status(error: DomainError) -> grpc.Status:
    return _status(_CODES[error.code], error.message, error.reason, dict(error.metadata))


def internal_status(request_id: str) -> grpc.Status:
    """An unexpected failure: no internals leak, the request ID leads to the log line."""
    return _status(code_pb2.INTERNAL, "internal error", "INTERNAL", {"request_id": request_id})
