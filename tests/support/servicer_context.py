"""The parts of grpc.aio's server side that the per-call interceptor touches, faked once for the
unit tests that run it without a server: the call's details and the servicer context."""

from __future__ import annotations

import grpc

__all__ = ["CallDetails", "ServicerContext"]

Metadata = tuple[tuple[str, str], ...]


class CallDetails(grpc.HandlerCallDetails):
    """What the server knows of a call before choosing its handler: the full method name."""

    def __init__(self, method: str, metadata: Metadata = ()) -> None:
        self.method = method
        self.invocation_metadata = metadata


class ServicerContext:
    """A servicer context with the caller's ``metadata``; an abort keeps its status in ``status``
    and raises ``AbortError`` as grpc.aio's does."""

    def __init__(self, metadata: Metadata = ()) -> None:
        self._metadata = metadata
        self.status: grpc.Status | None = None

    def invocation_metadata(self) -> Metadata:
        return self._metadata

    async def send_initial_metadata(self, metadata: object) -> None:
        return None

    def set_trailing_metadata(self, metadata: object) -> None:
        return None

    async def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise grpc.aio.AbortError()
