"""A TCP forwarder in front of a server, which a test can freeze and thaw: frozen, it stops copying
bytes in one or both directions while every socket stays open (no reset, no FIN), so the processes
behind it see a link that hangs rather than one that closes; thawed, the held bytes go on in order.
New connections made while frozen are accepted and held the same way.

This is the partial partition of SPEC §6 (a link that hangs, to some replicas only), which
``tcp_cut.py`` (a link that closes) cannot show. Runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator

from socialgraph_devstack.processes import free_port

from tests.support.tcp_cut import pipe

__all__ = ["Direction", "TcpFreeze", "tcp_freeze"]


class Direction(enum.Flag):
    TO_SERVER = enum.auto()
    """Client → server bytes (requests)."""
    TO_CLIENT = enum.auto()
    """Server → client bytes (replies, pushes)."""
    BOTH = TO_SERVER | TO_CLIENT


class TcpFreeze:
    def __init__(self, target_port: int, port: int) -> None:
        self.target_port = target_port
        self.port = port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._forwarding: set[asyncio.Task[object]] = set()
        """The connections' tasks, awaited by ``close`` (a task left to the loop's shutdown is
        cancelled there, and asyncio logs the cancellation of a connection's task as an error)."""
        self._flowing = {Direction.TO_SERVER: asyncio.Event(), Direction.TO_CLIENT: asyncio.Event()}
        for event in self._flowing.values():
            event.set()

    def freeze(self, direction: Direction = Direction.BOTH) -> None:
        """Hold every byte going ``direction`` from now on; sockets stay open."""
        for one, event in self._flowing.items():
            if one in direction:
                event.clear()

    def thaw(self) -> None:
        """Let the held bytes go on, in order, in both directions."""
        for event in self._flowing.values():
            event.set()

    @property
    def frozen(self) -> bool:
        return not all(event.is_set() for event in self._flowing.values())

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port, reuse_address=True)

    async def close(self) -> None:
        """Stop listening and abort every connection."""
        self.thaw()
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
            for writer in list(self._open):
                writer.transport.abort()
            self._open.clear()
            await server.wait_closed()
        await asyncio.gather(*self._forwarding, return_exceptions=True)

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._forwarding.add(task)
            task.add_done_callback(self._forwarding.discard)
        self._open.add(client_writer)
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            self._open.discard(client_writer)
            return
        pair = {client_writer, server_writer}
        self._open.add(server_writer)
        try:
            await asyncio.gather(
                pipe(client_reader, server_writer, self._flowing[Direction.TO_SERVER]),
                pipe(server_reader, client_writer, self._flowing[Direction.TO_CLIENT]),
            )
        finally:
            self._open -= pair
            for writer in pair:
                writer.transport.abort()


@contextlib.asynccontextmanager
async def tcp_freeze(target_port: int) -> AsyncIterator[TcpFreeze]:
    """A forwarder to ``127.0.0.1:target_port`` on a free port, flowing; closed at the end."""
    forwarder = TcpFreeze(target_port, free_port())
    await forwarder.start()
    try:
        yield forwarder
    finally:
        await forwarder.close()
