"""A per-process copy of hot graph-cache entries, kept true by Redis's own invalidation messages.

Why it can be trusted (SPEC §3: after ``Follow`` returns on any replica, no replica answers the old
state):

- **Invalidations.** One connection per process (named ``sg-near-cache``) runs ``CLIENT TRACKING
  ON BCAST PREFIX sg:`` in RESP3. Redis then pushes ``invalidate [keys]`` on it for every change of
  a graph-cache key, by any client: a write-through, a fill, a drop, an expiry, an eviction.
  Redis queues that message while it runs the changing command, before the writer hears back.
- **The read fence.** A near-cache hit is answered only after a ``PING`` on that connection,
  written after the read arrived, has come back (one ``PING`` is in flight at a time; reads that
  arrive meanwhile wait for the next, written when it returns). Redis answers in order on a connection, so every
  invalidation of a change that finished before the ``PING`` was read comes first, and its key is
  dropped before the read looks again. A change acknowledged to a writer before the read arrived
  finished before the ``PING``. Every read waiting at that moment shares the one ``PING``, so the
  cost is one round trip per batch of concurrent reads, not per read (and a read waits at most
  two round trips).
- **Fills.** A value read from Redis is kept only if no invalidation of its slot (1 of 4,096, by
  key hash) and no reconnection came between the moment the read was sent (``stamp``) and the
  moment it is stored (``put``). Otherwise a change that raced the read could leave it stale for
  good.
- **Failures.** If the connection fails or drops, every entry is dropped, waiting fences answer
  False (those reads go to Redis), and nothing is kept or served until it is back, tracking again,
  and empty.

It is the serving process's alone; with Redis Cluster it is off (tracking is per node).
"""

from __future__ import annotations

import asyncio
import collections
import zlib
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from graph_service.cache import keys
from graph_service.domain.retry import Backoff, pause
from graph_service.telemetry.cache import NearCacheMetrics

__all__ = ["NearCache"]

log = structlog.get_logger(__name__)
SLOTS = 4096
CONNECTION_NAME = "sg-near-cache"
_PUSHED = object()
PING = b"*1\r\n$4\r\nPING\r\n"


class NearCache:
    def __init__(self, redis_url: str, *, max_entries: int, metrics: NearCacheMetrics | None = None) -> None:
        self._url = redis_url
        self._max = max_entries
        self._entries: collections.OrderedDict[str, dict[Any, Any]] = collections.OrderedDict()
        self._slots = [0] * SLOTS
        self._generation = 0
        self._usable = False
        self._connection: AbstractConnection | None = None
        self._next: asyncio.Future[bool] | None = None
        self._waiting: collections.deque[asyncio.Future[bool]] = collections.deque()
        self._in_flight = False
        """A fence is on the wire; reads arriving meanwhile wait for the next, sent when it returns."""
        self._stop = asyncio.Event()
        self._closing: set[asyncio.Task[None]] = set()
        """Disconnects of connections a fence could not be written to (the reader then starts over)."""
        self._task: asyncio.Task[None] | None = None
        self._metrics = metrics if metrics is not None else NearCacheMetrics()
        self._metrics.watch(lambda: len(self._entries), lambda: self._usable)

    # -- what the graph cache calls ----------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self._usable

    def stamp(self, key: str) -> tuple[int, int]:
        """Taken before a Redis read whose answer may be kept (``put``)."""
        return self._generation, self._slots[_slot(key)]

    def get(self, key: str, part: Any = "") -> Any | None:
        entry = self._entries.get(key) if self._usable else None
        return None if entry is None else entry.get(part)

    def put(self, key: str, value: Any, stamp: tuple[int, int], part: Any = "") -> None:
        """Keep ``value`` (read from Redis after ``stamp`` was taken) unless it may be stale."""
        if not self._usable or stamp != (self._generation, self._slots[_slot(key)]):
            return
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = {}
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        entry[part] = value

    async def fence(self) -> bool:
        """True once every invalidation Redis queued before now has been applied; False if the
        connection is not there (then do not trust what ``get`` said)."""
        if not self._usable:
            return False
        waiter = self._next
        if waiter is None:
            waiter = self._next = asyncio.get_running_loop().create_future()
            if not self._in_flight:  # else it goes when the one in flight comes back
                asyncio.get_running_loop().call_soon(self._send_fence)
        self._metrics.fence_waits.inc()
        return await asyncio.shield(waiter)

    def count(self, kind: str, hit: bool) -> None:
        self._metrics.count(kind, hit)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*self._closing, return_exceptions=True)
        self._down()

    # -- the invalidation connection ----------------------------------------------------------

    def _send_fence(self) -> None:
        waiter, self._next = self._next, None
        if waiter is None or self._in_flight:
            if waiter is not None:
                self._next = waiter
            return
        connection = self._connection
        writer = None if connection is None else getattr(connection, "_writer", None)
        if connection is None or writer is None or not self._usable:
            _answer(waiter, False)
            return
        self._in_flight = True
        self._metrics.fences.inc()
        self._waiting.append(waiter)
        # Straight onto the socket's buffer, in the order the waiters queue: no task, no lock and
        # no command packing per fence (redis-py's send_command was about half a fence's cost).
        try:
            writer.write(PING)
        except Exception as exc:  # a transport already torn down; else a loss shows to the reader
            log.warning("near_cache_fence_failed", error=str(exc))
            self._down()  # every waiter, this one included, goes to Redis
            closing = asyncio.get_running_loop().create_task(_disconnect(connection))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while not self._stop.is_set():
            client: Redis = Redis.from_url(
                self._url, protocol=3, decode_responses=True, client_name=CONNECTION_NAME, health_check_interval=0
            )
            connection: AbstractConnection | None = None
            try:
                connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
                connection.socket_timeout = None  # this connection waits for pushes for as long as it lives
                parser: Any = connection._parser  # redis-py's parser (hiredis or RESP3): its invalidation hook
                parser.invalidation_push_handler_func = self._invalidated
                await connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", f"{keys.PREFIX}:")
                if await connection.read_response() != "OK":
                    raise RedisError("CLIENT TRACKING was refused")
                self._connection = connection
                self._generation += 1
                self._entries.clear()
                self._usable = True
                backoff.reset()
                log.debug("near_cache_tracking")
                await self._read(connection)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                if self._usable or backoff.failures == 0:
                    log.warning("near_cache_connection_lost", error=str(exc))
            finally:
                self._down()
                if connection is not None:
                    await connection.disconnect()
                await client.aclose()
            await pause(backoff.next_delay(), self._stop)

    async def _read(self, connection: AbstractConnection) -> None:
        while True:
            reply = await connection.read_response(push_request=True)
            if reply is _PUSHED:
                continue
            if reply != "PONG":
                # Only fences are sent here. Anything else (an invalidation a parser did not hand
                # to the hook, say) would answer a fence without its keys dropped: start over.
                raise RedisError(f"unexpected reply on the tracking connection: {reply!r}")
            if self._waiting:
                _answer(self._waiting.popleft(), True)
                self._in_flight = False
                if self._next is not None:
                    self._send_fence()

    async def _invalidated(self, message: list[Any]) -> object:
        """``["invalidate", [key, ...]]``, or ``["invalidate", None]`` after a FLUSHALL."""
        changed = message[1] if len(message) > 1 else None
        if changed is None:
            self._generation += 1
            self._entries.clear()
            return _PUSHED
        for key in changed:
            name = key.decode() if isinstance(key, bytes) else str(key)
            self._slots[_slot(name)] += 1
            self._entries.pop(name, None)
        return _PUSHED

    def _down(self) -> None:
        """Nothing kept is trusted any more; waiting reads go to Redis."""
        self._usable = False
        self._connection = None
        self._generation += 1
        self._entries.clear()
        for waiter in (*self._waiting, *([self._next] if self._next is not None else [])):
            _answer(waiter, False)
        self._waiting.clear()
        self._next = None
        self._in_flight = False


async def _disconnect(connection: AbstractConnection) -> None:
    """Close a connection that failed a write; the reader on it then starts over."""
    try:
        await connection.disconnect()
    except Exception as exc:  # it is being thrown away: nothing to do but say so
        log.debug("near_cache_disconnect_failed", error=str(exc))


def _slot(key: str) -> int:
    return zlib.crc32(key.encode()) % SLOTS


def _answer(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)
