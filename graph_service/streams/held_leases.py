"""The shard leases one stream reader holds: taken, renewed in time, lost, given up, released.

The reader decides what to read; this keeps the leases that let it, and their metrics and log
lines. A lease counts as held until a renewal finds it taken, or until it runs out (by this
process's own monotonic clock, from when the last successful renewal was sent) without a renewal
getting through: a reader cut off from DynamoDB stops reading before another can take over.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.streams.leases import LeaseClock, LeaseView, Renewal, ShardLeases
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.streams import ConsumerMetrics

__all__ = ["RELEASE_SECONDS", "HeldLeases"]

log = structlog.get_logger(__name__)
RELEASE_SECONDS = 2.0
"""A clean stop waits this long at most for its leases' release (they expire anyway)."""


class HeldLeases:
    def __init__(self, leases: ShardLeases, metrics: ConsumerMetrics) -> None:
        self._leases = leases
        self._metrics = metrics
        self._until: dict[str, float] = {}
        """Shard -> when (monotonic) its lease runs out unless renewed."""
        self._failures = FailureLog(log)

    @property
    def owner(self) -> str:
        return self._leases.owner

    @property
    def timing(self) -> LeaseClock:
        return self._leases.timing

    def now(self) -> float:
        """The lease clock (epoch seconds), to judge other owners' leases by."""
        return self._leases.now()

    def shards(self) -> set[str]:
        return set(self._until)

    def __contains__(self, shard_id: str) -> bool:
        return shard_id in self._until

    def __len__(self) -> int:
        return len(self._until)

    async def take(self, shard_id: str, seen: LeaseView) -> bool:
        """Acquire the shard's lease (``seen``: its lease as last read); False if another was first."""
        sent = time.monotonic()
        if not await self._leases.acquire(shard_id):
            return False
        self._until[shard_id] = sent + self.timing.grant_seconds
        takeover = seen.owner is not None and seen.owner != self.owner  # its lease had expired
        self._metrics.lease_taken(shard_id, takeover=takeover)
        log.info("shard_lease_taken", shard_id=shard_id, owner=self.owner, previous_owner=seen.owner)
        return True

    async def renew_all(self) -> dict[str, Renewal | None]:
        """Renew every lease held. Returns each conclusive outcome: the ``Renewal`` (the checkpoint
        as it left it), or None for a lease lost (taken by another instance, or run out without a
        renewal getting through), which is no longer held. A failed renewal with time left is not
        in the answer: the next one may get through."""
        shards = list(self._until)
        outcomes = await asyncio.gather(*(self._renew(shard_id) for shard_id in shards))
        return {s: renewal for s, (conclusive, renewal) in zip(shards, outcomes, strict=True) if conclusive}

    async def _renew(self, shard_id: str) -> tuple[bool, Renewal | None]:
        sent = time.monotonic()
        try:
            renewal = await self._leases.renew(shard_id)
        except (Unavailable, ClientError) as exc:
            self._failures.failure("shard_lease_renewal_failed", type(exc).__name__, shard_id=shard_id, error=str(exc))
            if shard_id in self._until and time.monotonic() > self._until[shard_id]:
                self._lose(shard_id, "not renewed before it ran out")
                return True, None
            return False, None
        if shard_id not in self._until:
            return False, None  # given up meanwhile (the shard finished)
        if renewal is None:
            self._lose(shard_id, "taken by another instance")
            return True, None
        self._until[shard_id] = sent + self.timing.grant_seconds
        return True, renewal

    def _lose(self, shard_id: str, why: str) -> None:
        del self._until[shard_id]
        self._metrics.lease_given_up(shard_id, lost=True)
        log.warning("shard_lease_lost", shard_id=shard_id, owner=self.owner, why=why)

    async def give_up(self, shard_id: str) -> None:
        """Release a lease no longer needed (a finished shard); a failure only leaves it to expire."""
        if self._until.pop(shard_id, None) is None:
            return
        self._metrics.lease_given_up(shard_id, lost=False)
        try:
            await self._leases.release(shard_id)
        except (Unavailable, ClientError) as exc:
            log.warning("shard_lease_release_failed", shard_id=shard_id, error=str(exc))

    async def release_all(self) -> None:
        """On a clean stop: every lease released, so the other instances take the shards at once."""
        held = sorted(self._until)
        if not held:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(self.give_up(s) for s in held)), timeout=RELEASE_SECONDS)
        except TimeoutError:
            log.warning("shard_leases_not_released", shards=held, owner=self.owner)  # they expire
            return
        log.info("shard_leases_released", shards=held, owner=self.owner)
