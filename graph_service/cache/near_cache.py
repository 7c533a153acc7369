"""A per-process copy of hot graph-cache entries, kept true by Redis's own invalidation messages.

Why it can be trusted (SPEC §3: after ``Follow`` returns on any replica, no replica answers the old
state):

- **Invalidations.** One connection per Redis node (named ``sg-near-cache``; ``tracking_link.py``)
  runs ``CLIENT TRACKING ON BCAST PREFIX sg:`` in RESP3. Redis then pushes ``invalidate [keys]`` on
  it for every change of a graph-cache key, by any client: a write-through, a fill, a drop, an
  expiry, an eviction. Redis queues that message while it runs the changing command, before the
  writer hears back.
- **The read fence.** A near-cache hit is answered only after a fence on that connection,
  written after the read arrived, has come back (one fence is in flight at a time; reads that
  arrive meanwhile wait for the next, written when it returns). Redis answers in order on a
  connection, so every
  invalidation of a change that finished before the fence was read comes first, and its key is
  dropped before the read looks again. A change acknowledged to a writer before the read arrived
  finished before the fence. Every read waiting at that moment shares the one fence, so the
  cost is one round trip per batch of concurrent reads, not per read (and a read waits at most
  two round trips, or two Redis timeouts: below). The fence is the cache's trust check
  (``FENCE``), not a bare ``PING``: a hit is answered only while the cache may be trusted across
  replicas (``cache/trust.py``), and a new generation (a reset) empties the near cache.
- **Fills.** A value read from Redis is kept only if no invalidation of its slot (its Redis
  Cluster slot, 1 of 16,384, on a single node too) and no reconnection came between the moment
  the read was sent (``stamp``) and the moment it is stored (``put``). Otherwise a change that
  raced the read could leave it stale for good.
- **Failures.** If the connection fails or drops, every entry is dropped, waiting fences answer
  False (those reads go to Redis), and nothing is kept or served until it is back, tracking again,
  and empty.
- **A link that hangs** (SPEC §6: no read waits on a dead link longer than a few Redis timeouts).
  A fence not answered within the Redis timeout counts as a lost connection: the same drop, and
  the connection is aborted. A reply that comes after that is never taken for a fence's: it
  arrives on a connection that is no longer the near cache's. When no read sends fences, a heartbeat does: one every
  ``HEARTBEAT_TIMEOUTS`` Redis timeouts without an answered fence, under the same rule, so a dead
  link is noticed without a read. Connecting again (the handshake, ``CLIENT TRACKING``) is under
  the Redis timeout too.
- **Redis Cluster.** Tracking is per node, so there is a link to every master (from ``CLUSTER
  SLOTS``), and a read's fence goes to the master of each slot its keys are in, probing those slots
  (the node answers ``MOVED`` for a slot it no longer owns, ``ASK`` for one it is migrating away:
  the fence says no, and the read goes to Redis, whose client follows the redirection), with the
  trust check on the master of the trust record (in parallel, when that is another node). While the
  cluster changes, the near cache is bypassed, never trusted: a lost link (a master killed) or a
  ``MOVED`` empties it and makes it unusable until the slot map is read again and every master of
  the new map tracks. A replica promoted after its master died may have lost writes the master
  acknowledged: the cache's trust keeper empties the whole cache then (``trust_keeper.py``, the run
  IDs), and the fence's trust check sees the new generation.

It is the serving process's alone.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any

import structlog
from redis.asyncio.connection import AbstractConnection, ConnectionPool, parse_url
from redis.crc import key_slot
from redis.exceptions import RedisError

from graph_service.cache import keys
from graph_service.cache.tracking_link import CLUSTER_SLOTS, HEARTBEAT_TIMEOUTS, TrackingLink, probe_key
from graph_service.domain import arrival
from graph_service.domain.retry import Backoff, pause
from graph_service.telemetry.cache import NearCacheMetrics

__all__ = ["CONNECTION_NAME", "HEARTBEAT_TIMEOUTS", "NearCache"]

log = structlog.get_logger(__name__)
CONNECTION_NAME = "sg-near-cache"
TIMEOUT_SECONDS = 0.25
"""The default fence timeout: ``SG_REDIS_TIMEOUT_SECONDS``'s default (the service passes the setting)."""
TRUST_SLOT = key_slot(keys.TRUST_GENERATION.encode())
Node = tuple[str, int]


class NearCache:
    def __init__(
        self,
        redis_url: str,
        *,
        cluster: bool = False,
        max_entries: int,
        timeout_seconds: float = TIMEOUT_SECONDS,
        metrics: NearCacheMetrics | None = None,
    ) -> None:
        """``redis_url``: the Redis (with ``cluster``, a seed node of the Redis Cluster)."""
        self._url = redis_url
        self._cluster = cluster
        self._max = max_entries
        self._timeout = timeout_seconds
        """How long a fence (and a link's handshake) may take before the link counts as lost."""
        self._entries: collections.OrderedDict[str, dict[Any, Any]] = collections.OrderedDict()
        self._slots = [0] * CLUSTER_SLOTS
        self._generation = 0
        self._trusted: str | None = None
        """The cache generation the last trust check saw (None: not trusted, or none yet)."""
        self._usable = False
        self._link: TrackingLink | None = None
        """A single Redis's link (None on a cluster, or while there is none)."""
        self._owners: list[TrackingLink] = []
        """A cluster's link of each slot's master (empty while there is none)."""
        self._trust_link: TrackingLink | None = None
        self._links: frozenset[TrackingLink] = frozenset()
        """The links the near cache trusts now."""
        self._known: list[Node] = []
        """A cluster's nodes (masters and replicas) the last slot map named."""
        self._changed = asyncio.Event()
        """A cluster's probe was answered MOVED: read the slot map again."""
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._metrics = metrics if metrics is not None else NearCacheMetrics()
        self._metrics.watch(lambda: len(self._entries), lambda: self._usable)

    # -- what the graph cache calls ----------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self._usable

    def stamp(self, key: str) -> tuple[int, int]:
        """Taken before a Redis read whose answer may be kept (``put``)."""
        return self._generation, self._slots[key_slot(key.encode())]

    def get(self, key: str, part: Any = "") -> Any | None:
        entry = self._entries.get(key) if self._usable else None
        return None if entry is None else entry.get(part)

    def put(self, key: str, value: Any, stamp: tuple[int, int], part: Any = "") -> None:
        """Keep ``value`` (read from Redis after ``stamp`` was taken) unless it may be stale."""
        if not self._usable or stamp != (self._generation, self._slots[key_slot(key.encode())]):
            return
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = {}
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        entry[part] = value

    async def fence(self, read_keys: Sequence[str] = ()) -> bool:
        """True once every invalidation Redis queued before the read's call arrived
        (``domain/arrival.py``; before now outside a call) for ``read_keys`` has been applied (and
        the cache may be trusted); False if that cannot be known now (then do not trust what
        ``get`` said). On a single Redis the keys do not matter."""
        if not self._usable:
            return False
        since = arrival.arrived()
        link = self._link
        if link is not None:
            answer = link.ask((), since)
            if answer is None:
                return True
            self._metrics.fence_waits.inc()
            return await answer
        return await self._cluster_fence(read_keys, since)

    async def _cluster_fence(self, read_keys: Sequence[str], since: float | None) -> bool:
        owners, trust_link = self._owners, self._trust_link
        if not owners or trust_link is None:
            return False
        wanted: dict[TrackingLink, set[int]] = {}
        for key in read_keys:
            slot = key_slot(key.encode())
            wanted.setdefault(owners[slot], set()).add(slot)
        answers = [link.ask(slots, since) for link, slots in wanted.items()]
        if trust_link not in wanted:
            answers.append(trust_link.ask((), since))
        waited = False
        for answer in answers:
            if answer is not None:
                waited = True
                if not await answer:
                    return False
        if waited:
            self._metrics.fence_waits.inc()
        return True

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
        self._down()

    # -- the links ----------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while not self._stop.is_set():
            links: list[TrackingLink] = []
            try:
                if self._cluster:
                    await self._track_cluster(links, backoff)
                else:
                    await self._track_one(links, backoff)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError, TimeoutError) as exc:
                if self._usable or backoff.failures == 0:
                    log.warning("near_cache_connection_lost", error=str(exc))
            finally:
                self._down()
                for link in links:
                    link.close()
            await pause(backoff.next_delay(), self._stop)

    async def _track_one(self, links: list[TrackingLink], backoff: Backoff) -> None:
        link = await self._open(None, trust=True, links=links)
        self._link = link
        self._links = frozenset(links)
        self._tracking(backoff)
        await link.closed

    async def _track_cluster(self, links: list[TrackingLink], backoff: Backoff) -> None:
        await asyncio.to_thread(probe_key, 0)  # the probes' keys (0.15 s once a process), off the loop
        ranges = await self._slot_map()
        masters = sorted({node for _, _, node in ranges})
        trust_node = next(node for first, last, node in ranges if first <= TRUST_SLOT <= last)
        opening = [asyncio.ensure_future(self._open(n, trust=n == trust_node, links=links)) for n in masters]
        try:
            opened = await asyncio.gather(*opening)
        except BaseException:  # the others stop too, before the caller closes what they opened
            for task in opening:
                task.cancel()
            await asyncio.gather(*opening, return_exceptions=True)
            raise
        by_node = dict(zip(masters, opened, strict=True))
        owners: list[TrackingLink | None] = [None] * CLUSTER_SLOTS
        for first, last, node in ranges:
            owners[first : last + 1] = [by_node[node]] * (last - first + 1)
        self._owners = [link for link in owners if link is not None]
        self._trust_link = by_node[trust_node]
        self._links = frozenset(opened)
        self._changed.clear()
        self._tracking(backoff)
        changed: asyncio.Future[Any] = asyncio.ensure_future(self._changed.wait())
        ends: list[asyncio.Future[Any]] = [changed, *(link.closed for link in opened)]
        try:
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if self._changed.is_set():
            log.info("near_cache_slots_moved")

    def _tracking(self, backoff: Backoff) -> None:
        """Every link tracks: from now on nothing kept before counts, and the near cache serves."""
        self._generation += 1
        self._entries.clear()
        self._usable = True
        backoff.reset()
        log.debug("near_cache_tracking")

    async def _open(self, node: Node | None, *, trust: bool, links: list[TrackingLink]) -> TrackingLink:
        """A link to ``node`` (None: the URL's), tracking; appended to ``links`` as soon as it
        exists, so that the caller closes it whatever happens next."""
        connection = self._connection(node, protocol=3, client_name=CONNECTION_NAME)
        await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        link = TrackingLink(
            timeout=self._timeout,
            trust=trust,
            invalidated=self._invalidated,
            seen=self._seen,
            moved=self._moved,
            lost=self._lost,
            fenced=self._metrics.fences.inc,
        )
        links.append(link)
        await link.take(connection)
        return link

    async def _slot_map(self) -> list[tuple[int, int, Node]]:
        """The cluster's masters by slot range, every slot covered: ``CLUSTER SLOTS`` of the seed
        node, else of the nodes the last map named (masters and replicas: the seed may be the
        master that died), the first that answers with every slot served."""
        failures: list[str] = []
        for node in [None, *self._known]:
            try:
                ranges, known = await self._slots_of(node)
            except (RedisError, OSError, TimeoutError) as exc:
                failures.append(f"{node or 'seed'}: {exc}")
                continue
            self._known = known
            return ranges
        raise RedisError(f"no node gave a slot map: {'; '.join(failures)}")

    async def _slots_of(self, node: Node | None) -> tuple[list[tuple[int, int, Node]], list[Node]]:
        connection = self._connection(node, decode_responses=True)
        try:
            await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            await connection.send_command("CLUSTER", "SLOTS")
            reply = await connection.read_response()
        finally:
            await connection.disconnect()
        seed = parse_url(self._url).get("host") or "127.0.0.1"
        ranges: list[tuple[int, int, Node]] = []
        known: list[Node] = []
        covered = 0
        for first, last, *served in _slot_entries(reply):
            nodes = [(str(entry[0] or seed), int(entry[1])) for entry in served]
            ranges.append((int(first), int(last), nodes[0]))
            known += [n for n in nodes if n not in known]
            covered += int(last) - int(first) + 1
        if covered != CLUSTER_SLOTS:
            raise RedisError(f"the cluster serves {covered} of {CLUSTER_SLOTS} slots")
        return ranges, known

    def _connection(self, node: Node | None, **extra: Any) -> AbstractConnection:
        """A connection to ``node`` (None: the URL's) with the URL's TLS and credentials, not yet
        connected, failing within the Redis timeout (a hung link fails its handshake)."""
        options: dict[str, Any] = dict(parse_url(self._url))
        if node is not None:
            options["host"], options["port"] = node
        options.update(
            health_check_interval=0, socket_timeout=self._timeout, socket_connect_timeout=self._timeout, **extra
        )
        connection: AbstractConnection = ConnectionPool(**options).make_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        return connection

    # -- what the links report ----------------------------------------------------------------

    def _invalidated(self, changed: list[Any] | None) -> None:
        """The keys of a pushed ``invalidate``, or None after a ``FLUSHALL``."""
        if changed is None:
            self._generation += 1
            self._entries.clear()
            return
        for key in changed:
            name = key.decode() if isinstance(key, bytes) else str(key)
            self._slots[key_slot(name.encode())] += 1
            self._entries.pop(name, None)

    def _seen(self, generation: str | None) -> bool:
        """A trust check's answer: the cache may be trusted (and is the same generation)."""
        if generation is None or (self._trusted is not None and generation != self._trusted):
            # Trust lost, or a cache reset since the last check (its deletes have dropped every
            # key already; this is the belt to those braces): nothing kept counts.
            self._generation += 1
            self._entries.clear()
        self._trusted = generation
        return generation is not None

    def _lost(self, link: TrackingLink) -> None:
        """A link's connection is gone: if it is one the near cache trusts now, bypassed until
        every link tracks again (a link closed after it was replaced changes nothing)."""
        if link in self._links:
            self._metrics.dropped["lost"].inc()
            self._down()

    def _moved(self) -> None:
        """A probe says a slot has moved: bypassed until the slot map is read again."""
        if self._usable:
            self._metrics.dropped["moved"].inc()
        self._down()
        self._changed.set()

    def _down(self) -> None:
        """Nothing kept is trusted any more; reads go to Redis until every link tracks again."""
        self._usable = False
        self._link = None
        self._owners = []
        self._trust_link = None
        self._links = frozenset()
        self._trusted = None
        self._generation += 1
        self._entries.clear()


def _slot_entries(reply: Any) -> list[Sequence[Any]]:
    if not isinstance(reply, list):
        raise RedisError(f"not an answer of CLUSTER SLOTS: {reply!r}")
    return [entry for entry in reply if isinstance(entry, list | tuple) and len(entry) >= 3]
