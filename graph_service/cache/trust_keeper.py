"""Keeps the cache's trust record (docs/architecture.md, "Trust across replicas"); every serving
process runs one, on each round of its lease (``cache/lease.py``).

Each round it looks at the leases in Redis (alive, expired) and in the store (live, with their
heartbeats), and:

- **Revokes a holder gone silent**: a lease expired in Redis, or live in the store but missing
  from Redis, whose heartbeat has not moved for ``dead_after`` (by this process's clock). A holder
  that still beats is alive and owes invalidations: its lease keeps the cache untrusted until it
  clears it itself. A revoked lease is removed from Redis; if its holder had marked it unsettled
  (a write acknowledged after a failed write-through), the invalidations it owed are lost with it,
  so the cache is emptied.
- **Empties the cache when Redis may have lost writes**: the run IDs of the Redis nodes differ
  from the ones recorded (``sgtrust:{trust}:run``): a restart, a failover to a replica, a restore from a
  snapshot. Emptying deletes the generation first, then every ``sg:*`` key but the trust record,
  then records the run IDs (the trust record is outside ``sg:``).
- **Keeps the generation alive**: the generation expires (on Redis's clock) one lease after the
  round's start (the time ``SPLIT_LEASES`` read, before the store's leases were read), and each
  round renews it, or writes a new one when there is none, only while nothing holds trust back: no
  expired lease in Redis, every live lease in the store alive in Redis (a process cut off from a
  Redis that restarted, or that never reached it, has not registered there), and no live lease
  marked unsettled. So a process that marked its lease unsettled knows, without reaching Redis,
  that no generation outlives the mark by more than a lease: every round that read the store after
  the mark holds back, and every earlier one stamped an earlier expiry (``cache/lease.py``).
"""

from __future__ import annotations

import secrets
from typing import Any

import structlog
from redis.asyncio.cluster import RedisCluster

from graph_service.cache import keys, scripts
from graph_service.domain.ports import LeaseRegistry
from graph_service.redis_client.connect import AnyRedis
from graph_service.telemetry.cache import LeaseMetrics

__all__ = ["TrustKeeper"]

log = structlog.get_logger(__name__)
RESET_LOCK_MS = 30_000
FLUSH_BATCH = 500


class TrustKeeper:
    def __init__(
        self,
        redis: AnyRedis,
        registry: LeaseRegistry,
        *,
        generation_seconds: float,
        dead_after: float,
        metrics: LeaseMetrics,
    ) -> None:
        """``generation_seconds``: how long a round keeps the generation (one lease)."""
        self._redis = redis
        self._registry = registry
        self._generation_ms = int(generation_seconds * 1000)
        self._dead_after = dead_after
        self._metrics = metrics
        self._split_leases = redis.register_script(scripts.SPLIT_LEASES)
        self._remove_lease = redis.register_script(scripts.REMOVE_LEASE)
        self._keep_trust = redis.register_script(scripts.KEEP_TRUST)
        self._unlock = redis.register_script(scripts.UNLOCK)
        self._silent: dict[str, tuple[int, float]] = {}
        """Suspect leases: ID -> (heartbeat count seen, when it was first seen at that count)."""
        self.resets = 0
        """How many times this keeper emptied the cache."""

    async def tend(self, now: float) -> None:
        """One look at the leases, as above; ``now`` is this process's monotonic clock."""
        alive, expired, started_ms = await self._split_leases(keys=[keys.TRUST_LEASES])
        live = await self._registry.live_leases()  # after Redis's clock was read: see the module
        suspects = set(expired) | (set(live) - set(alive))
        flush = False
        held_back = any(record.unsettled for record in live.values())
        for lease_id in sorted(suspects):
            record = live.get(lease_id)
            if record is None:  # expired, and honoured by nobody: revoked or given back half-way
                await self._remove(lease_id, distrust=True)
                flush = True  # whatever it owed, nobody will deliver it
                continue
            seen = self._silent.get(lease_id)
            if seen is None or seen[0] != record.beat:
                self._silent[lease_id] = (record.beat, now)
                held_back = True
                continue
            if now - seen[1] < self._dead_after or not await self._registry.revoke(lease_id, record.beat):
                held_back = True
                continue
            await self._remove(lease_id, distrust=record.unsettled)
            flush = flush or record.unsettled
            log.warning("cache_lease_revoked_silent", lease=lease_id, unsettled=record.unsettled)
        for gone in set(self._silent) - suspects:
            del self._silent[gone]
        runs = await self._run_ids()
        if (flush or await self._redis.get(keys.TRUST_RUN) != runs) and not await self.empty(runs):
            return  # another process is emptying it: nothing is trusted before that is done
        if held_back:
            return
        kept = await self._keep_trust(
            keys=[keys.TRUST_GENERATION, keys.TRUST_RUN, keys.TRUST_RESET],
            args=[runs, secrets.token_hex(8), int(started_ms) + self._generation_ms],
        )
        if kept == 1:
            log.info("cache_trusted")

    async def _remove(self, lease_id: str, *, distrust: bool) -> None:
        """Take a lease out of Redis; ``distrust``: delete the generation first, in the same step, so
        that no reader trusts what its holder left unsettled between now and the emptying."""
        await self._remove_lease(
            keys=[keys.TRUST_LEASES, keys.TRUST_GENERATION], args=[lease_id, "1" if distrust else "0"]
        )

    async def empty(self, runs: str | None = None) -> bool:
        """Delete the generation and every cache entry, then record the nodes' run IDs; False if
        another process's emptying is running."""
        redis = self._redis
        token = secrets.token_hex(4)
        if not await redis.set(keys.TRUST_RESET, token, nx=True, px=RESET_LOCK_MS):
            return False
        try:
            await redis.delete(keys.TRUST_GENERATION, keys.TRUST_RUN)
            deleted = await self._flush()
            await redis.set(keys.TRUST_RUN, runs if runs is not None else await self._run_ids())
            self.resets += 1
            self._metrics.resets.inc()
            log.warning("cache_reset", entries_deleted=deleted)
            return True
        finally:
            await self._unlock(keys=[keys.TRUST_RESET], args=[token])  # only its own lock

    async def _flush(self) -> int:
        """Delete every cache entry but the trust record; how many."""
        deleted = 0
        batch: list[str] = []
        async for key in self._redis.scan_iter(match=f"{keys.PREFIX}:*", count=1000):
            if str(key).startswith(keys.TRUST_PREFIX):
                continue
            batch.append(str(key))
            if len(batch) >= FLUSH_BATCH:
                deleted += int(await self._redis.unlink(*batch))
                batch = []
        if batch:
            deleted += int(await self._redis.unlink(*batch))
        return deleted

    async def _run_ids(self) -> str:
        """The run IDs of the Redis node (every primary of a Cluster), sorted and joined."""
        if isinstance(self._redis, RedisCluster):
            infos: dict[Any, Any] = await self._redis.info("server", target_nodes=RedisCluster.PRIMARIES)
            ids = [str(info["run_id"]) for info in infos.values()]
        else:
            ids = [str((await self._redis.info("server"))["run_id"])]
        return ",".join(sorted(ids))
