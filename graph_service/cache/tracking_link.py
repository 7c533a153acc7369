"""One Redis node's tracking connection, for the near cache (``near_cache.py``): the node's
invalidations pushed on it, and read fences answered on it.

The near cache keeps one per node it trusts: one for a single Redis, one per master of a Redis
Cluster. A fence is a few commands written on this connection after a read arrived; Redis answers
in order on a connection, so every invalidation the node queued for a change it finished before it
read the fence is pushed ahead of the fence's answer (``near_cache.py`` says why that is enough).

What a fence costs is what costs a cached read its throughput (SPEC §8: the CPU a read spends on
it, not the wait), so this is built for it:

- The connection is opened by redis-py (TLS, AUTH, ``HELLO 3`` and the client name, as every other
  Redis client of the service), then its transport is handed to this protocol: replies are parsed
  by hiredis in ``data_received`` and a fence's answer is set right there. No reader task, no
  coroutine per reply, no timeout wrapper.
- The reads waiting for one fence share one future (``Answer``), which refuses to be cancelled, so
  that a cancelled read cannot cancel the others': no ``asyncio.shield`` and no future per read.
- A fence's commands are encoded once (the trust check) or once per slot (a probe) and written
  straight to the transport.
- One watchdog per link, four times per Redis timeout, gives up on a fence unanswered for the
  timeout and sends a heartbeat fence when none was answered for ``HEARTBEAT_TIMEOUTS`` timeouts:
  no timer per fence.

A fence on a Redis Cluster master also probes each slot its reads name (``EXISTS`` of a key of that
slot that never exists): the node answers ``MOVED`` for a slot it no longer owns and ``ASK`` for one
it is migrating away, and the fence says no, so that a read is never answered after a fence on a
node whose invalidations no longer cover its key.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from collections.abc import Callable, Iterable
from typing import Any, cast

import hiredis
import structlog
from redis.asyncio.connection import AbstractConnection
from redis.crc import key_slot
from redis.exceptions import RedisError

from graph_service.cache import keys, scripts
from graph_service.cache.trust import generation_of
from graph_service.redis_client.packed import command

__all__ = ["FENCE", "HEARTBEAT_TIMEOUTS", "Answer", "TrackingLink", "probe_key"]

log = structlog.get_logger(__name__)
HEARTBEAT_TIMEOUTS = 4
"""A heartbeat fence goes out after this many Redis timeouts without an answered fence."""
FENCE_GAP_SECONDS = 0.0005
"""The least time between two fences of a link. A read that finds none in flight sends its fence at
once if the last went out longer ago; else the fence waits out the gap, and every read arriving
meanwhile shares it. Idle, a read pays no wait; busy, a fence is shared by the reads of half a
millisecond instead of going out for nearly every read (a local Redis answers a fence before the
next read arrives), and a fence's CPU, not its wait, is what costs a loaded process throughput."""
WATCHES_PER_TIMEOUT = 4
"""How often a link looks at its fence in flight, per Redis timeout: a fence that hangs is given up
on at most a quarter of a timeout late."""
CLUSTER_SLOTS = 16384


FENCE = command(
    "EVALSHA",
    hashlib.sha1(scripts.CHECK_TRUST.encode(), usedforsecurity=False).hexdigest(),  # Redis names scripts by SHA-1
    "2",
    keys.TRUST_GENERATION,
    keys.TRUST_LEASES,
)
"""The trust check (``cache/trust.py``) as a fence: its answer is the generation (trusted) or ``[]``
(not), so a near-cache hit is checked in the same round trip as its fence, as a Redis read is."""
_TRACKING = command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", f"{keys.PREFIX}:")
_LOAD_TRUST = command("SCRIPT", "LOAD", scripts.CHECK_TRUST)
_PING = command("PING")


class Answer(asyncio.Future[bool]):
    """The answer of one fence, awaited by every read that waits for it. Cancelling one of those
    reads must not cancel the others' answer, so ``cancel`` refuses: a cancelled read's task is
    cancelled when the fence answers (within one Redis timeout)."""

    def cancel(self, msg: Any | None = None) -> bool:
        return False


class _Fence:
    __slots__ = ("answer", "expected", "replies", "sent_at", "slots", "trust")

    def __init__(self, answer: Answer, slots: set[int], trust: bool) -> None:
        self.answer = answer
        self.slots = slots
        self.trust = trust
        self.replies: list[Any] = []
        self.expected = 0
        self.sent_at = 0.0


_probe_keys: list[str] = []


def probe_key(slot: int) -> str:
    """A key of cluster slot ``slot`` outside the graph cache's prefix (never written, never
    tracked): its ``EXISTS`` asks the node whether it still serves the slot."""
    if not _probe_keys:
        found: list[str | None] = [None] * CLUSTER_SLOTS
        missing, n = CLUSTER_SLOTS, 0
        while missing:
            name = f"sgprobe:{{{n}}}"
            s = key_slot(name.encode())
            if found[s] is None:
                found[s] = name
                missing -= 1
            n += 1
        _probe_keys[:] = [name for name in found if name is not None]  # whole at once: a thread may build it
    return _probe_keys[slot]


class TrackingLink(asyncio.Protocol):
    """The tracking connection to one node. ``invalidated`` gets each pushed invalidation's keys
    (None: everything, after a ``FLUSHALL``); ``seen`` gets each trust check's generation (None:
    not trusted) and says whether the near cache still trusts itself; ``moved`` is called when a
    probe says a slot moved, ``lost`` when the connection is gone (before any waiting read hears
    "no"); ``closed`` is done then too, whatever the cause."""

    def __init__(
        self,
        *,
        timeout: float,
        trust: bool,
        invalidated: Callable[[list[Any] | None], None],
        seen: Callable[[str | None], bool],
        moved: Callable[[], None] = lambda: None,
        lost: Callable[[TrackingLink], None] = lambda link: None,
        fenced: Callable[[], None] = lambda: None,
        gap: float = FENCE_GAP_SECONDS,
    ) -> None:
        self._timeout = timeout
        self._trust = trust
        """Every fence of this link carries the trust check (the node holding the trust record)."""
        self._invalidated = invalidated
        self._seen = seen
        self._moved = moved
        self._lost = lost
        self._fenced = fenced
        self._reader = hiredis.Reader(encoding="utf-8")
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self._calls: collections.deque[tuple[int, list[Any], asyncio.Future[list[Any]]]] = collections.deque()
        """Handshake commands written, their replies awaited (before any fence is sent)."""
        self._in_flight: _Fence | None = None
        self._next: _Fence | None = None
        self._confirmed: _Fence | None = None
        """The last fence that said yes (on this connection: a lost one keeps nothing)."""
        self._answered_at = self._loop.time()
        self._watch: asyncio.Task[None] | None = None
        self._probes: dict[int, bytes] = {}
        self._gap = gap
        self._last_sent = -gap
        self._paced: asyncio.TimerHandle | None = None
        self._streams: tuple[object, object] | None = None

    # -- opening ------------------------------------------------------------------------------

    async def take(self, connection: AbstractConnection) -> None:
        """Take over ``connection`` (connected and authenticated by redis-py, nothing sent since),
        turn tracking on and load the trust check; within the Redis timeout, or the link is closed
        and the error raised."""
        writer: Any = getattr(connection, "_writer", None)
        reader: Any = getattr(connection, "_reader", None)
        if writer is None or reader is None or len(getattr(reader, "_buffer", b"")) > 0:
            raise RedisError("the tracking connection is not idle")
        transport = writer.transport
        transport.set_protocol(self)
        self.connection_made(transport)
        # The transport is this link's now: redis-py's connection forgets its streams, so that
        # dropping it does not close them (its __del__ closes a writer it still holds), and the
        # link holds the writer (whose own __del__ would close the transport too).
        self._streams = (reader, writer)
        connection._writer = connection._reader = None
        try:
            async with asyncio.timeout(self._timeout):
                tracking, _ = await self._call(_TRACKING + _LOAD_TRUST, 2)
        except BaseException:
            self.close()
            raise
        if tracking != "OK":
            self.close()
            raise RedisError(f"CLIENT TRACKING was refused: {tracking!r}")
        self._watch_fences()

    def _watch_fences(self) -> None:
        """From now on fences may go out: the watchdog starts."""
        self._answered_at = self._loop.time()
        self._watch = self._loop.create_task(self._watching())

    async def _call(self, payload: bytes, replies: int) -> list[Any]:
        if self._transport is None:
            raise RedisError("the tracking connection is closed")
        done: asyncio.Future[list[Any]] = self._loop.create_future()
        self._calls.append((replies, [], done))
        self._transport.write(payload)
        return await done

    # -- fences -------------------------------------------------------------------------------

    def ask(self, slots: Iterable[int] = (), since: float | None = None) -> Answer | None:
        """The answer of a fence on this node (probing ``slots``) written after ``since`` (the
        read's call arrived then, ``domain/arrival.py``; None: after now): True once every
        invalidation the node queued before it has been applied (and, on the trust node, the cache
        may be trusted). None: such a fence has said yes already, nothing to wait for. Else the
        fence in flight, if it was written late enough and probes ``slots``; else the next one,
        sent at once or when the one in flight returns (paced, ``FENCE_GAP_SECONDS``)."""
        if since is not None:
            done = self._confirmed
            if done is not None and done.sent_at >= since and (not slots or done.slots.issuperset(slots)):
                return None
            flying = self._in_flight
            if flying is not None and flying.sent_at >= since and (not slots or flying.slots.issuperset(slots)):
                return flying.answer
        fence = self._next
        if fence is None:
            fence = self._next = _Fence(Answer(loop=self._loop), set(slots), self._trust)
            if self._in_flight is None:
                self._pace()
        elif slots:
            fence.slots.update(slots)
        return fence.answer

    def _pace(self) -> None:
        """Send the waiting fence now, or once ``FENCE_GAP_SECONDS`` have passed since the last."""
        wait = self._last_sent + self._gap - self._loop.time()
        if wait <= 0:
            self._send()
        elif self._paced is None:
            self._paced = self._loop.call_later(wait, self._send)

    def _send(self) -> None:
        self._paced = None
        fence = self._next
        if fence is None or self._in_flight is not None:
            return
        self._next = None
        transport = self._transport
        if transport is None or transport.is_closing():
            _answer(fence.answer, False)
            return
        payload = b"".join([self._probe(slot) for slot in fence.slots]) if fence.slots else b""
        fence.expected = len(fence.slots) + 1
        if fence.trust:
            payload += FENCE
        elif payload:
            fence.expected -= 1
        else:  # a heartbeat of a node without the trust record
            payload = _PING
        fence.sent_at = self._last_sent = self._loop.time()
        self._in_flight = fence
        self._fenced()
        try:
            transport.write(payload)
        except Exception as exc:  # a transport torn down under it: every waiting read goes to Redis
            log.warning("near_cache_fence_failed", error=str(exc))
            self.close()

    def _probe(self, slot: int) -> bytes:
        probe = self._probes.get(slot)
        if probe is None:
            probe = self._probes[slot] = command("EXISTS", probe_key(slot))
        return probe

    def _answered(self, fence: _Fence) -> None:
        self._in_flight = None
        self._answered_at = self._loop.time()
        ok = True
        replies = fence.replies
        if fence.trust:
            try:
                ok = self._seen(generation_of(replies[-1]))
            except ValueError:  # not a trust check's answer (NOSCRIPT after a flush, a stray reply)
                _answer(fence.answer, False)
                self._lose(f"unexpected reply on the tracking connection: {replies[-1]!r}")
                return
            replies = replies[:-1]
        for reply in replies:  # the probes' answers (and a heartbeat's PONG)
            if isinstance(reply, hiredis.ReplyError):  # MOVED, ASK, CLUSTERDOWN: not this node's now
                ok = False
                if str(reply).startswith("MOVED"):
                    self._moved()
        if ok:
            self._confirmed = fence
        _answer(fence.answer, ok)
        if self._next is not None:
            self._pace()

    # -- the protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream transport: create_connection's

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                if isinstance(reply, hiredis.PushNotification):
                    if reply and reply[0] == "invalidate":
                        self._invalidated(reply[1] if len(reply) > 1 else None)
                    continue
                self._reply(reply)
        except hiredis.ProtocolError as exc:
            self._lose(f"unreadable reply on the tracking connection: {exc}")

    def _reply(self, reply: Any) -> None:
        fence = self._in_flight
        if fence is not None:
            fence.replies.append(reply)
            if len(fence.replies) == fence.expected:
                self._answered(fence)
            return
        if self._calls:
            count, replies, done = self._calls[0]
            replies.append(reply)
            if len(replies) == count:
                self._calls.popleft()
                if not done.done():
                    done.set_result(replies)
            return
        # Only fences and the handshake are sent here: anything else (an invalidation a parser
        # took for a reply) would answer a fence without its keys dropped.
        self._lose(f"unexpected reply on the tracking connection: {reply!r}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._confirmed = None
        if self._paced is not None:
            self._paced.cancel()
            self._paced = None
        self._lost(self)
        if self._watch is not None:
            self._watch.cancel()
        for fence in (self._in_flight, self._next):
            if fence is not None:
                _answer(fence.answer, False)
        self._in_flight = self._next = None
        for _, _, done in self._calls:
            if not done.done():
                done.set_exception(RedisError("the tracking connection was lost"))
        self._calls.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    # -- ends ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Abort the connection (no flush on a link that may hang); ``closed`` follows."""
        if self._transport is not None:
            self._transport.abort()
        else:
            self.connection_lost(None)

    def _lose(self, why: str) -> None:
        log.warning("near_cache_connection_lost", error=why)
        self.close()

    async def _watching(self) -> None:
        """Gives up on a fence unanswered for the Redis timeout (a link that hangs is a lost one:
        every waiting read goes to Redis, whose own timeout sends it on to DynamoDB), and sends a
        heartbeat fence when none was answered for ``HEARTBEAT_TIMEOUTS`` timeouts, so that a dead
        link is found even when no read comes."""
        interval = self._timeout / WATCHES_PER_TIMEOUT
        while True:
            await asyncio.sleep(interval)
            now = self._loop.time()
            fence = self._in_flight
            if fence is not None and now - fence.sent_at >= self._timeout:
                log.warning("near_cache_fence_timed_out", timeout_seconds=self._timeout)
                self.close()
                return
            if fence is None and self._next is None and now - self._answered_at >= HEARTBEAT_TIMEOUTS * self._timeout:
                self.ask()  # nobody awaits it: a timeout closes the link, an answer moves _answered_at


def _answer(answer: asyncio.Future[bool], value: bool) -> None:
    if not answer.done():
        answer.set_result(value)
