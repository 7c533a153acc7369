"""A per-process copy of hot graph-cache entries, kept true by Redis's own invalidation messages.

Why it can be trusted (SPEC §3: after ``Follow`` returns on any replica, no replica answers the old
state):

- **Invalidations.** One connection per process (named ``sg-near-cache``) runs ``CLIENT TRACKING
  ON BCAST PREFIX sg:`` in RESP3. Redis then pushes ``invalidate [keys]`` on it for every change of
  a graph-cache key, by any client: a write-through, a fill, a drop, an expiry, an eviction.
  Redis queues that message while it runs the changing command, before the writer hears back.
- **The read fence.** A near-cache hit is answered only after a fence on that connection,
  written after the read arrived, has come back (one fence is in flight at a time; reads that
  arrive meanwhile wait for the next, written when it returns). Redis answers in order on a connection, so every
  invalidation of a change that finished before the fence was read comes first, and its key is
  dropped before the read looks again. A change acknowledged to a writer before the read arrived
  finished before the fence. Every read waiting at that moment shares the one fence, so the
  cost is one round trip per batch of concurrent reads, not per read (and a read waits at most
  two round trips, or two Redis timeouts: below). The fence is the cache's trust check
  (``FENCE``), not a bare ``PING``: a hit is answered only while the cache may be trusted across
  replicas (``cache/trust.py``), and a new generation (a reset) empties the near cache.
- **Fills.** A value read from Redis is kept only if no invalidation of its slot (1 of 4,096, by
  key hash) and no reconnection came between the moment the read was sent (``stamp``) and the
  moment it is stored (``put``). Otherwise a change that raced the read could leave it stale for
  good.
- **Failures.** If the connection fails or drops, every entry is dropped, waiting fences answer
  False (those reads go to Redis), and nothing is kept or served until it is back, tracking again,
  and empty.
- **A link that hangs** (SPEC §6: no read waits on a dead link longer than a few Redis timeouts).
  A fence not answered within the Redis timeout counts as a lost connection: the same drop, and
  the connection is aborted, so the reader starts over. A reply that comes after that is never
  taken for a fence's: it arrives on a connection that is no longer the near cache's, and the
  fences are numbered. When no read sends fences, a heartbeat does: one every
  ``HEARTBEAT_TIMEOUTS`` Redis timeouts without an answered fence, under the same rule, so a dead
  link is noticed without a read. Connecting again (the handshake, ``CLIENT TRACKING``) is under
  the Redis timeout too.

It is the serving process's alone; with Redis Cluster it is off (tracking is per node).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import time
import zlib
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from graph_service.cache import keys, scripts
from graph_service.cache.trust import generation_of
from graph_service.domain.retry import Backoff, pause
from graph_service.telemetry.cache import NearCacheMetrics

__all__ = ["NearCache"]

log = structlog.get_logger(__name__)
SLOTS = 4096
CONNECTION_NAME = "sg-near-cache"
_PUSHED = object()


def _command(*parts: str) -> bytes:
    """One command in RESP, as the connection would write it."""
    encoded = [part.encode() for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in encoded)


FENCE = _command(
    "EVALSHA",
    hashlib.sha1(scripts.CHECK_TRUST.encode(), usedforsecurity=False).hexdigest(),  # Redis names scripts by SHA-1
    "2",
    keys.TRUST_GENERATION,
    keys.TRUST_LEASES,
)
"""The fence: the cache's trust check (``cache/trust.py``), so that a near-cache hit is checked in
the same round trip as the fence, as a Redis read is. Its answer is the generation (trusted) or
``[]`` (not: the fence says no, and the near cache empties)."""
TIMEOUT_SECONDS = 0.25
"""The default fence timeout: ``SG_REDIS_TIMEOUT_SECONDS``'s default (the service passes the setting)."""
HEARTBEAT_TIMEOUTS = 4
"""A heartbeat fence goes out after this many fence timeouts without an answered fence."""


class NearCache:
    def __init__(
        self,
        redis_url: str,
        *,
        max_entries: int,
        timeout_seconds: float = TIMEOUT_SECONDS,
        metrics: NearCacheMetrics | None = None,
    ) -> None:
        self._url = redis_url
        self._max = max_entries
        self._timeout = timeout_seconds
        """How long a fence (and the connection's handshake) may take before the link counts as lost."""
        self._entries: collections.OrderedDict[str, dict[Any, Any]] = collections.OrderedDict()
        self._slots = [0] * SLOTS
        self._generation = 0
        self._trusted: str | None = None
        """The cache generation the last fence saw (None: not trusted, or no fence yet)."""
        self._usable = False
        self._connection: AbstractConnection | None = None
        self._next: asyncio.Future[bool] | None = None
        self._waiting: collections.deque[asyncio.Future[bool]] = collections.deque()
        self._in_flight = False
        """A fence is on the wire; reads arriving meanwhile wait for the next, sent when it returns."""
        self._sent = 0
        """The number of the last fence sent: the one its timer may give up on."""
        self._overdue: asyncio.TimerHandle | None = None
        self._answered_at = 0.0
        """``time.monotonic()`` of the last fence answered (or of the start of tracking)."""
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
        waiter = self._ask()
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

    def _ask(self) -> asyncio.Future[bool]:
        """The answer of the next fence, sent now unless one is in flight (then when it returns)."""
        waiter = self._next
        if waiter is None:
            waiter = self._next = asyncio.get_running_loop().create_future()
            if not self._in_flight:  # else it goes when the one in flight comes back
                asyncio.get_running_loop().call_soon(self._send_fence)
        return waiter

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
            writer.write(FENCE)
        except Exception as exc:  # a transport already torn down; else a loss shows to the reader
            log.warning("near_cache_fence_failed", error=str(exc))
            self._down()  # every waiter, this one included, goes to Redis
            closing = asyncio.get_running_loop().create_task(_disconnect(connection))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            return
        self._sent += 1
        self._overdue = asyncio.get_running_loop().call_later(self._timeout, self._late, self._sent, connection)

    def _late(self, fence: int, connection: AbstractConnection) -> None:
        """Fence number ``fence`` has had the Redis timeout. Looked at again one turn of the loop
        later: a reply that came in with this timer (a loop that was busy) is read first."""
        if self._waits_for(fence, connection):
            asyncio.get_running_loop().call_soon(self._give_up, fence, connection)

    def _give_up(self, fence: int, connection: AbstractConnection) -> None:
        """A link that hangs is a lost one: every waiting read goes to Redis (whose own timeout
        sends it on to DynamoDB), the near cache empties, and the connection is aborted so that
        the reader starts over."""
        if not self._waits_for(fence, connection):
            return
        log.warning("near_cache_fence_timed_out", timeout_seconds=self._timeout)
        self._down()
        writer = getattr(connection, "_writer", None)
        if writer is not None:
            writer.transport.abort()  # the reader sees the connection end; no flush on a dead link

    def _waits_for(self, fence: int, connection: AbstractConnection) -> bool:
        return self._in_flight and self._sent == fence and self._connection is connection

    async def _heartbeat(self) -> None:
        """A fence whenever none was answered for ``HEARTBEAT_TIMEOUTS`` timeouts, so that a dead
        link is found (by the fence's timeout) even when no read comes."""
        interval = HEARTBEAT_TIMEOUTS * self._timeout
        while True:
            await asyncio.sleep(max(self._answered_at + interval - time.monotonic(), self._timeout))
            if self._usable and time.monotonic() - self._answered_at >= interval:
                self._ask()  # nobody awaits it: a timeout drops the connection, an answer moves _answered_at

    async def _run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while not self._stop.is_set():
            client: Redis = Redis.from_url(
                self._url,
                protocol=3,
                decode_responses=True,
                client_name=CONNECTION_NAME,
                health_check_interval=0,
                socket_timeout=self._timeout,  # the handshake and CLIENT TRACKING: a hung link fails them
                socket_connect_timeout=self._timeout,
            )
            connection: AbstractConnection | None = None
            heartbeat: asyncio.Task[None] | None = None
            try:
                connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
                parser: Any = connection._parser  # redis-py's parser (hiredis or RESP3): its invalidation hook
                parser.invalidation_push_handler_func = self._invalidated
                await connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", f"{keys.PREFIX}:")
                if await connection.read_response() != "OK":
                    raise RedisError("CLIENT TRACKING was refused")
                await connection.send_command("SCRIPT", "LOAD", scripts.CHECK_TRUST)  # the fence's
                await connection.read_response()
                # From now on it waits for pushes for as long as it lives; the fences' timeouts and
                # the heartbeat find a link that hangs.
                connection.socket_timeout = None
                self._connection = connection
                self._generation += 1
                self._entries.clear()
                self._answered_at = time.monotonic()
                self._usable = True
                backoff.reset()
                log.debug("near_cache_tracking")
                heartbeat = asyncio.create_task(self._heartbeat())
                await self._read(connection)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                if self._usable or backoff.failures == 0:
                    log.warning("near_cache_connection_lost", error=str(exc))
            finally:
                self._down()
                if heartbeat is not None:
                    heartbeat.cancel()
                    await asyncio.gather(heartbeat, return_exceptions=True)
                if connection is not None:
                    await connection.disconnect()
                await client.aclose()
            await pause(backoff.next_delay(), self._stop)

    async def _read(self, connection: AbstractConnection) -> None:
        while True:
            reply = await connection.read_response(push_request=True)
            if reply is _PUSHED:
                continue
            try:
                generation = generation_of(reply)
            except ValueError as exc:
                # Only fences are sent here. Anything else (an invalidation a parser did not hand
                # to the hook, say) would answer a fence without its keys dropped: start over.
                raise RedisError(f"unexpected reply on the tracking connection: {reply!r}") from exc
            if connection is not self._connection:
                # Given up on (a fence timed out): a late reply answers no fence of a newer connection.
                raise RedisError("the tracking connection was dropped")
            if self._waiting:
                self._cancel_overdue()
                self._answered_at = time.monotonic()
                if generation is None or (self._trusted is not None and generation != self._trusted):
                    # Trust lost, or a cache reset since the last fence (its deletes have dropped
                    # every key already; this is the belt to those braces): nothing kept counts.
                    self._generation += 1
                    self._entries.clear()
                self._trusted = generation
                _answer(self._waiting.popleft(), generation is not None)
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
        self._trusted = None
        self._generation += 1
        self._entries.clear()
        for waiter in (*self._waiting, *([self._next] if self._next is not None else [])):
            _answer(waiter, False)
        self._waiting.clear()
        self._next = None
        self._in_flight = False
        self._cancel_overdue()

    def _cancel_overdue(self) -> None:
        if self._overdue is not None:
            self._overdue.cancel()
            self._overdue = None


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
