"""The near cache's rules for a link that hangs, on a connection the test plays (no server): a fence
not answered within the Redis timeout says "no", empties the near cache and aborts the connection;
a reply that comes after that answers no newer fence; the heartbeat sends a fence when no read does."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from graph_service.cache.near_cache import FENCE, HEARTBEAT_TIMEOUTS, NearCache

TIMEOUT = 0.05


class Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


class Writer:
    def __init__(self, replies: asyncio.Queue[str]) -> None:
        self.written: list[bytes] = []
        self.transport = Transport()
        self.answering = False
        """Redis answers each fence (the trust check) as it is written (a live link), else the test does."""
        self.pinged = asyncio.Event()
        self._replies = replies

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.pinged.set()
        if self.answering:
            self._replies.put_nowait(["tests"])


class Connection:
    """What the near cache uses of a redis-py connection: its socket writer and ``read_response``."""

    def __init__(self, *, answering: bool = False) -> None:
        self.replies: asyncio.Queue[str] = asyncio.Queue()
        self._writer = Writer(self.replies)
        self._writer.answering = answering

    @property
    def pings(self) -> int:
        return self._writer.written.count(FENCE)

    async def pinged(self) -> None:
        """Until a fence has been written."""
        await asyncio.wait_for(self._writer.pinged.wait(), 1)

    @property
    def aborted(self) -> bool:
        return self._writer.transport.aborted

    async def read_response(self, push_request: bool = False) -> str:
        return await self.replies.get()


@contextlib.asynccontextmanager
async def tracking(near: NearCache, connection: Connection) -> AsyncIterator[asyncio.Task[None]]:
    """``connection`` as the near cache's tracking connection, its replies read as ``_run`` does."""
    near._connection = connection  # type: ignore[assignment]  # the fake connection above
    near._answered_at = time.monotonic()
    near._usable = True
    reader = asyncio.create_task(near._read(connection))  # type: ignore[arg-type]  # the fake connection above
    try:
        yield reader
    finally:
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader


def holding(near: NearCache, key: str = "sg:{1}:fs:2") -> str:
    near.put(key, "1", near.stamp(key))
    assert near.get(key) == "1"
    return key


async def test_an_answered_fence_says_yes_and_is_not_given_up_later() -> None:
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=TIMEOUT)
    connection = Connection(answering=True)
    async with tracking(near, connection):
        key = holding(near)
        assert await near.fence() is True
        await asyncio.sleep(3 * TIMEOUT)  # past the timer it had: it was cancelled with the answer
        assert near.usable
        assert not connection.aborted
        assert near.get(key) == "1"


async def test_a_fence_not_answered_within_the_timeout_says_no_and_drops_the_connection() -> None:
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=TIMEOUT)
    connection = Connection()
    async with tracking(near, connection):
        key = holding(near)
        started = time.monotonic()
        answers = await asyncio.gather(*(near.fence() for _ in range(5)))  # they share one fence
        waited = time.monotonic() - started
        assert answers == [False] * 5
        assert TIMEOUT <= waited < TIMEOUT + 0.5, waited
        assert connection.pings == 1
        assert connection.aborted  # so the reader starts over
        assert not near.usable
        assert near.get(key) is None
        near._usable = True  # even if it were usable again, nothing kept before is
        assert near.get(key) is None
        assert await asyncio.wait_for(near.fence(), 1) is False  # the connection is gone: at once


async def test_reads_waiting_behind_a_fence_in_flight_wait_one_timeout_from_its_sending() -> None:
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=TIMEOUT)
    connection = Connection()
    async with tracking(near, connection):
        first = asyncio.create_task(near.fence())
        await connection.pinged()
        started = time.monotonic()
        second = asyncio.create_task(near.fence())  # waits for the next fence, after the one in flight
        assert await first is False
        assert await second is False
        assert time.monotonic() - started < TIMEOUT + 0.5
        assert connection.pings == 1  # the next one never went out on a link given up on


async def test_a_late_reply_answers_no_fence_of_a_newer_connection() -> None:
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=TIMEOUT)
    old = Connection()
    async with tracking(near, old) as old_reader:
        assert await near.fence() is False  # timed out: old is given up on
        new = Connection()
        async with tracking(near, new):
            fence = asyncio.create_task(near.fence())
            await new.pinged()
            await old.replies.put(["tests"])  # the old fence's answer, late, read by the old reader
            await asyncio.wait({old_reader}, timeout=1)
            assert old_reader.done()
            assert old_reader.exception() is not None  # it stopped on it
            assert not fence.done()  # the newer fence is still waiting for its own answer
            await new.replies.put(["tests"])
            assert await fence is True


async def test_the_heartbeat_finds_a_dead_link_without_reads() -> None:
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=TIMEOUT)
    connection = Connection()
    async with tracking(near, connection):
        key = holding(near)
        heartbeat = asyncio.create_task(near._heartbeat())
        try:
            # A live link: the heartbeat's fences are answered and nothing is dropped.
            connection._writer.answering = True
            deadline = time.monotonic() + 2 + 2 * HEARTBEAT_TIMEOUTS * TIMEOUT
            while connection.pings < 2:
                assert time.monotonic() < deadline, "no heartbeat"
                await asyncio.sleep(TIMEOUT / 5)
            assert near.usable
            assert near.get(key) == "1"
            # Then the link dies: the next heartbeat is not answered, and the near cache lets go.
            connection._writer.answering = False
            started = time.monotonic()
            deadline = started + 1 + (HEARTBEAT_TIMEOUTS + 1) * TIMEOUT
            while near.usable:
                assert time.monotonic() < deadline, "a dead link went unnoticed"
                await asyncio.sleep(TIMEOUT / 5)
            assert connection.aborted
            assert near.get(key) is None
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat


async def test_reads_keep_the_heartbeat_quiet() -> None:
    """Fences that reads send and Redis answers are proof enough: no heartbeat goes out meanwhile."""
    near = NearCache("redis://unused", max_entries=10, timeout_seconds=0.1)
    connection = Connection(answering=True)
    async with tracking(near, connection):
        heartbeat = asyncio.create_task(near._heartbeat())
        try:
            end = time.monotonic() + 2 * HEARTBEAT_TIMEOUTS * 0.1
            reads = 0
            while time.monotonic() < end:
                assert await near.fence() is True
                reads += 1
                await asyncio.sleep(0.05)  # a read every 50 ms: a fence answered well within the interval
            assert connection.pings == reads
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
