"""An in-process ``grpc.aio`` server that answers ``IsFollowing`` from a script, for the client's
channel tests: it records each call's metadata, can hang (a replica stopped, not dead) and can
refuse the next calls with given codes. It runs in the test's event loop; a blocking client calls
it from a thread (``asyncio.to_thread``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from socialgraph.v1 import social_graph_pb2 as pb

__all__ = ["Scripted", "scripted_server"]

SERVICE = "socialgraph.v1.SocialGraphService"


class Scripted:
    """What the server does with each ``IsFollowing``: record it, then hang, refuse or answer True."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        """Each call's metadata, in arrival order (a key sent twice keeps its last value)."""
        self.hang = False
        """Answer nothing until the server stops."""
        self.refusals: list[grpc.StatusCode] = []
        """Codes the next calls fail with, one each, before calls are answered again."""
        self._forever = asyncio.Event()

    async def is_following(self, request: pb.IsFollowingRequest, context: grpc.aio.ServicerContext[Any, Any]) -> object:
        self.calls.append({key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)})
        if self.hang:
            await self._forever.wait()
        if self.refusals:
            await context.abort(self.refusals.pop(0), "scripted refusal")
        return pb.IsFollowingResponse(following=True)

    def header(self, key: str) -> list[str | None]:
        """The value of ``key`` in each call so far (None where it was not sent)."""
        return [call.get(key) for call in self.calls]


@contextlib.asynccontextmanager
async def scripted_server(
    port: int = 0, *, tls: tuple[Path, Path] | None = None, options: tuple[tuple[str, object], ...] = ()
) -> AsyncIterator[tuple[Scripted, int]]:
    """A server of ``Scripted`` on ``127.0.0.1:port`` (0: a free one), plaintext or TLS with
    ``tls`` (cert, key); yields the script and the port, and stops the server (calls in flight
    cancelled) at the end."""
    script = Scripted()
    handler = grpc.unary_unary_rpc_method_handler(
        script.is_following,
        request_deserializer=pb.IsFollowingRequest.FromString,
        response_serializer=pb.IsFollowingResponse.SerializeToString,
    )
    server = grpc.aio.server(options=list(options))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"IsFollowing": handler}),))
    address = f"127.0.0.1:{port}"
    if tls is None:
        bound = server.add_insecure_port(address)
    else:
        cert, key = (path.read_bytes() for path in tls)
        bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    await server.start()
    try:
        yield script, bound
    finally:
        await server.stop(None)
