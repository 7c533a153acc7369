"""The one error type of the client: a status code plus the service's ErrorInfo reason."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

__all__ = ["SocialGraphError"]


class SocialGraphError(Exception):
    """A failed call. ``reason`` is the stable ErrorInfo reason (e.g. ``SELF_FOLLOW``), or "" if none."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str, metadata: dict[str, str]) -> None:
        super().__init__(f"{code.name} {reason}: {message}" if reason else f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = metadata

    @classmethod
    def from_rpc_error(cls, error: grpc.aio.AioRpcError) -> SocialGraphError:
        reason, metadata = "", {}
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        for detail in status.details if status else ():
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
                break
        return cls(error.code(), error.details() or "", reason, metadata)
