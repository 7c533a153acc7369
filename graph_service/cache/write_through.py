"""``GraphChanges`` of the service layer: the Redis graph cache written through after each write,
or nothing at all when caching is off."""

from __future__ import annotations

from graph_service.cache.lease import CacheLease
from graph_service.domain.ports import CacheInvalidations

__all__ = ["CacheWriteThrough", "NoGraphCache"]


class CacheWriteThrough:
    """Each notice is one or two Lua scripts in each user's slot (a mute's, in the muter's slot only:
    ``cache/scripts.py``); one that
    fails is owed and retried by the cache, which is not read meanwhile (``GraphCache``), and the
    write is acknowledged only once no replica trusts what it left unsettled (``lease``:
    ``CacheLease.settle_failed``, which may refuse it as ``Unavailable``). Without a lease (tests of
    one process) a failed write-through is acknowledged at once."""

    def __init__(self, cache: CacheInvalidations, lease: CacheLease | None = None) -> None:
        self._cache = cache
        self._lease = lease

    async def follow_settled(self, follower_id: int, followee_id: int, at_us: int | None, *, following: bool) -> None:
        await self._settled(
            await self._cache.write_edge(follower_id, followee_id, at_us, following), follower_id, followee_id
        )

    async def pair_settled(self, a: int, b: int) -> None:
        await self._settled(await self._cache.touch_pair(a, b), a, b)

    async def settings_settled(self, user_id: int) -> None:
        await self._settled(await self._cache.drop_private(user_id), user_id, user_id)

    async def mute_settled(self, muter_id: int, muted_id: int) -> None:
        await self._settled(await self._cache.drop_mute(muter_id, muted_id), muter_id, muted_id)

    async def _settled(self, ok: bool, a: int, b: int) -> None:
        """A failed write-through is tried once more at once, as a plain invalidation of the pair
        (a loaded process or one slow reply is the common cause, and every lease given up costs a
        cache reset); only if that fails too does the write wait out its lease."""
        if ok or self._lease is None or await self._cache.invalidate_edge(a, b, essential=True):
            return
        await self._lease.settle_failed()


class NoGraphCache:
    """Caching is off (``SG_REDIS_URL`` empty): there is nothing to tell."""

    async def follow_settled(self, follower_id: int, followee_id: int, at_us: int | None, *, following: bool) -> None:
        return None

    async def pair_settled(self, a: int, b: int) -> None:
        return None

    async def settings_settled(self, user_id: int) -> None:
        return None

    async def mute_settled(self, muter_id: int, muted_id: int) -> None:
        return None
