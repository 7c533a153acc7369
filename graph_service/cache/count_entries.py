"""The graph cache's counts: the counters' absolute values with their version, so an older
value never replaces a newer one."""

from __future__ import annotations

from collections.abc import Sequence

from graph_service.cache import keys
from graph_service.cache.cache_calls import CacheCalls
from graph_service.domain.models import Counts

__all__ = ["CountEntries"]


class CountEntries(CacheCalls):
    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Cached counts of those users that are cached (one pipelined round trip per node)."""
        if not user_ids:
            return {}
        if not self.trusted:
            self._count("counts", 0, len(user_ids))
            return {}
        count_keys = [keys.counts(user_id) for user_id in user_ids]
        near = await self._near_values("counts", count_keys)
        if near is not None:
            self._count("counts", len(user_ids), 0)
            return dict(zip(user_ids, near, strict=True))  # type: ignore[arg-type]  # Counts, as put() kept them
        stamps = [self._near.stamp(key) for key in count_keys] if self._near is not None else []

        def queue(pipe: object) -> None:
            for user_id in user_ids:
                pipe.hmget(keys.counts(user_id), ["fl", "fg", "v"])  # type: ignore[attr-defined]  # a redis pipeline, typed object here

        _, replies = await self._try(lambda: self._read(queue))
        rows: list[list[str | None]] | None = replies  # type: ignore[assignment]  # HMGET's replies
        found: dict[int, Counts] = {}
        for user_id, row in zip(user_ids, rows or [], strict=False):
            if row and None not in row:
                found[user_id] = Counts(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))
        if self._near is not None and stamps:
            for user_id, key, stamp in zip(user_ids, count_keys, stamps, strict=True):
                if user_id in found:
                    self._near.put(key, found[user_id], stamp)
        self._count("counts", len(found), len(user_ids) - len(found))
        return found

    async def set_counts(self, user_id: int, counts: Counts) -> bool:
        ok, _ = await self._try(
            lambda: self._set_counts(
                keys=[keys.counts(user_id)],
                args=[counts.followers, counts.following, counts.version, self._ttl],
            )
        )
        return ok
