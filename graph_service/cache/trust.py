"""The reader's side of the cache's trust: every read of the graph cache checks, in the same round
trip, that the cache may be trusted, and is a miss when it may not.

The cache may be trusted while its *generation* (``sgtrust:{trust}:gen``) exists and no serving
process's lease (``sgtrust:{trust}:leases``) has expired (``scripts.CHECK_TRUST``, on Redis's clock). A
serving process whose write-through failed acknowledges the write only once its own lease has
certainly expired (``cache/lease.py``), so from then on no reader trusts the entries it could not
settle, until it has delivered what it owes and cleared that lease (``cache/lease.py``), or a keeper
has revoked it and emptied the cache (``cache/trust_keeper.py``).

On a single node the check and the read go out as one pipeline, answered in one round trip and
run in that order. On Redis Cluster the trust record lives in one slot, so the check is one round
trip to its node before the read (ordered the same way, one round trip more).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from graph_service.cache import keys, scripts
from graph_service.redis_client.connect import AnyRedis

__all__ = ["TrustCheck", "generation_of"]

Queue = Callable[[Any], object]
"""Queues the read's commands on a pipeline (``pipe.get(key)``, ...)."""
TRUST_KEYS = (keys.TRUST_GENERATION, keys.TRUST_LEASES)


class TrustCheck:
    def __init__(self, redis: AnyRedis) -> None:
        self._redis = redis
        self._check = redis.register_script(scripts.CHECK_TRUST)
        self.generation: str | None = None
        """The generation the last check saw (None: the cache was not trusted then)."""

    async def read(self, queue: Queue) -> list[Any] | None:
        """The replies of the commands ``queue`` puts on a pipeline, read after the trust check;
        None when the cache may not be trusted (a miss: read the store, fill nothing). Redis
        errors are raised, as a plain read's would be."""
        try:
            return await self._read(queue)
        except NoScriptError:  # Redis restarted or flushed its scripts since they were loaded
            await self._redis.script_load(scripts.CHECK_TRUST)
            return await self._read(queue)

    async def _read(self, queue: Queue) -> list[Any] | None:
        redis = self._redis
        if isinstance(redis, Redis):
            pipe = redis.pipeline(transaction=False)
            pipe.evalsha(self._check.sha, len(TRUST_KEYS), *TRUST_KEYS)
            queue(pipe)
            replies = list(await pipe.execute())
            self.generation = generation_of(replies[0])
            return replies[1:] if self.generation is not None else None
        self.generation = generation_of(await redis.evalsha(self._check.sha, len(TRUST_KEYS), *TRUST_KEYS))
        if self.generation is None:
            return None
        slot_pipe = redis.pipeline()
        queue(slot_pipe)
        return list(await slot_pipe.execute())

    async def generation_now(self) -> str | None:
        """The generation if the cache may be trusted now, else None (one round trip)."""
        replies = await self.read(lambda pipe: None)
        return self.generation if replies is not None else None


def generation_of(reply: object) -> str | None:
    """The generation ``CHECK_TRUST`` answered (``[generation]``), or None (``[]``: not trusted)."""
    if isinstance(reply, list) and len(reply) == 1 and isinstance(reply[0], str):
        return reply[0]
    if reply == []:
        return None
    raise ValueError(f"not an answer of the trust check: {reply!r}")
