"""``FollowBudget`` in Redis: one sorted set per actor, one script call per follow.

``follow_rate:{<actor>}`` holds the actor's counted follows of the window, scored by the time
they were counted (ms). The script drops what left the window, and either counts a new ticket or
answers how long until the oldest counted follow leaves: one key per call, so any Redis Cluster
node can run it, and one round trip. Scripts run one at a time, so concurrent follows of one
actor can never be counted past the limit together.

Times come from this process's clock, so tests can move it; replicas' clocks differ by
milliseconds, which a window of hours does not notice.

Redis failing is not the follower's fault: the follow goes ahead uncounted (fails open), is
logged, and counted in ``failed_open`` and the ``socialgraph_follow_rate_limit_failed_open_total``
metric; for a second after a failure Redis is not asked, so an outage costs each follow nothing
rather than a timeout.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import structlog

from graph_service.domain.models import BudgetGrant
from graph_service.redis_client.connect import AnyRedis
from graph_service.redis_client.failures import ANY_FAILURE, retry_torn
from graph_service.telemetry.limits import LimitMetrics

__all__ = ["RedisFollowBudget", "Unlimited", "budget_key"]

log = structlog.get_logger(__name__)
RETRY_AFTER_FAILURE_SECONDS = 1.0
ATTEMPTS = 3

TAKE = """
local key, now, window, limit, ticket = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
if redis.call('ZSCORE', key, ticket) then
  return -1  -- a retry of a run whose answer was lost: the ticket is counted already
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if redis.call('ZCARD', key) >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(oldest[2]) + window - now
end
redis.call('ZADD', key, now, ticket)
redis.call('PEXPIRE', key, window)
return -1
"""
"""Returns -1 when the ticket was counted, else the milliseconds until a follow is allowed (>= 1)."""


def budget_key(actor_id: int) -> str:
    return f"follow_rate:{{{actor_id}}}"


class RedisFollowBudget:
    def __init__(
        self, redis: AnyRedis, *, clock: Callable[[], float] = time.time, metrics: LimitMetrics | None = None
    ) -> None:
        self._redis = redis
        self._take = redis.register_script(TAKE)
        self._clock = clock
        self._skip_until = 0.0
        self._metrics = metrics if metrics is not None else LimitMetrics()
        self._metrics.watch_breaker(lambda: time.monotonic() < self._skip_until)
        self.failed_open = 0
        """Follows let through uncounted because Redis failed (also counted in ``metrics``)."""

    def _fail_open(self) -> BudgetGrant:
        self.failed_open += 1
        self._metrics.failed_open.inc()
        return BudgetGrant(granted=True)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def take(self, actor_id: int, limit: int, window_seconds: int) -> BudgetGrant:
        if time.monotonic() < self._skip_until:
            return self._fail_open()
        ticket = uuid.uuid4().hex
        keys = [budget_key(actor_id)]
        args: list[int | str] = [self._now_ms(), window_seconds * 1000, limit, ticket]
        try:
            # Safe to run again: the same ticket is counted once however often the script runs.
            wait_ms = int(await retry_torn(lambda: self._take(keys=keys, args=args), attempts=ATTEMPTS))
        except ANY_FAILURE as exc:
            self._skip_until = time.monotonic() + RETRY_AFTER_FAILURE_SECONDS
            log.warning("follow_rate_limit_failed_open", actor_id=actor_id, error=repr(exc))
            return self._fail_open()
        if wait_ms < 0:
            return BudgetGrant(granted=True, ticket=ticket)
        return BudgetGrant(granted=False, retry_after_seconds=max(wait_ms, 1) / 1000)

    async def forget_account(self, user_id: int) -> None:
        """A deleted account's ledger of follows (SPEC §3b)."""
        await retry_torn(lambda: self._redis.delete(budget_key(user_id)), attempts=ATTEMPTS)

    async def give_back(self, actor_id: int, ticket: str) -> None:
        try:
            await retry_torn(lambda: self._redis.zrem(budget_key(actor_id), ticket), attempts=ATTEMPTS)
        except ANY_FAILURE as exc:
            # The follow stays counted until it leaves the window: the limit errs on the strict side.
            log.warning("follow_rate_ticket_not_returned", actor_id=actor_id, error=repr(exc))

    async def aclose(self) -> None:
        await self._redis.aclose()


class Unlimited:
    """``FollowBudget`` when the limit is off (``SG_FOLLOW_RATE_LIMIT=0``) or there is no Redis."""

    async def take(self, actor_id: int, limit: int, window_seconds: int) -> BudgetGrant:
        return BudgetGrant(granted=True)

    async def give_back(self, actor_id: int, ticket: str) -> None:
        return None
