"""A TCP forwarder in front of a server, which a test can cut and mend: cut, every connection
through it is aborted and new ones are refused (nothing listens on its port); mended, it listens
on the same port again. To the processes behind it, the server is unreachable and then back, while
the server itself keeps running and keeps everything it acknowledged.

Used for "the store is down" instead of killing DynamoDB Local: a DynamoDB Local killed with
``kill -9`` may lose a write it acknowledged a few tens of milliseconds earlier (seen once in a
few dozen runs of ``tests/faults/test_dynamodb_down.py``), which DynamoDB itself never does.
Runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from socialgraph_devstack.processes import free_port

__all__ = ["TcpCut", "pipe", "tcp_cut"]

CHUNK = 65536


class TcpCut:
    def __init__(self, target_port: int, port: int) -> None:
        self.target_port = target_port
        self.port = port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def mend(self) -> None:
        """Listen (again) on the same port."""
        assert self._server is None, "already listening"
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port, reuse_address=True)

    async def cut(self) -> None:
        """Stop listening and abort every open connection: in-flight requests get a reset, new
        connections are refused until ``mend``."""
        assert self._server is not None, "already cut"
        server, self._server = self._server, None
        server.close()
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()
        await server.wait_closed()

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._open.add(client_writer)  # before connecting on: a cut meanwhile aborts it too
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            self._open.discard(client_writer)
            return
        pair = {client_writer, server_writer}
        if self._server is None or client_writer not in self._open:  # cut while connecting
            for writer in pair:
                writer.transport.abort()
            return
        self._open.add(server_writer)
        try:
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        finally:
            self._open -= pair
            for writer in pair:
                writer.transport.abort()


async def pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flowing: asyncio.Event | None = None
) -> None:
    """Copy one direction until it ends (holding each chunk while ``flowing`` is clear: a frozen
    link, ``tcp_freeze.py``). If either side fails, the writer's connection is aborted: the other
    direction's copy, reading from it, ends and aborts the first connection in turn."""
    try:
        while data := await reader.read(CHUNK):
            if flowing is not None:
                await flowing.wait()
            writer.write(data)
            await writer.drain()
        if flowing is not None:
            await flowing.wait()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, asyncio.IncompleteReadError):
        writer.transport.abort()


@contextlib.asynccontextmanager
async def tcp_cut(target_port: int) -> AsyncIterator[TcpCut]:
    """A forwarder to ``127.0.0.1:target_port`` on a free port, listening; closed at the end."""
    forwarder = TcpCut(target_port, free_port())
    await forwarder.mend()
    try:
        yield forwarder
    finally:
        if forwarder.listening:
            await forwarder.cut()
