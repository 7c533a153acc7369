"""The one error type of the client: a status code plus the service's ErrorInfo reason."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

__all__ = ["SocialGraphError"]


class SocialGraphError(Exception):
    """A failed call. ``reason`` is the stable ErrorInfo reason (e.g. ``SELF_FOLLOW``), or "" if none."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str,
        metadata: dict[str, str],
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code.name} {reason}: {message}" if reason else f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = metadata
        self.retry_after = retry_after
        """Seconds until the call may succeed (``google.rpc.RetryInfo``, e.g. with RATE_LIMITED); None if not said."""

    @classmethod
    def from_rpc_error(cls, error: grpc.aio.AioRpcError) -> SocialGraphError:
        reason, metadata, retry_after = "", {}, None
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        for detail in status.details if status else ():
            info = error_details_pb2.ErrorInfo()
            retry = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Unpack(retry):
                retry_after = retry.retry_delay.ToNanoseconds() / 1e9
        return cls(error.code(), error.details() or "", reason, metadata, retry_after)
