"""The graph cache's one-key entries: follow states, relationships, privacy flags, suggestions.

Each is read in one round trip (with the trust check) and filled by one script that refuses the
fill if the user's epoch moved since it was read (a write came between the store read and the fill).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from graph_service.cache import keys
from graph_service.cache.cache_calls import CacheCalls
from graph_service.domain.accounts import Lifecycle
from graph_service.domain.models import Relationship

__all__ = ["KeyEntries"]


class KeyEntries(CacheCalls):
    async def get_follow_state(self, follower_id: int, followee_id: int) -> bool | None:
        if not self.trusted:
            self._count("follow_state", 0, 1)
            return None
        key = keys.follow_state(follower_id, followee_id)
        near = await self._near_values("follow_state", [key])
        if near is not None:
            self._count("follow_state", 1, 0)
            return bool(near[0] == "1")
        stamp = self._near.stamp(key) if self._near is not None else None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(key)))
        value = values[0] if ok and values is not None else None
        if value is None:
            self._count("follow_state", 0, 1)
            return None
        self._count("follow_state", 1, 0)
        if self._near is not None and stamp is not None:
            self._near.put(key, value, stamp)
        return bool(value == "1")

    async def fill_follow_state(self, follower_id: int, followee_id: int, following: bool, seen: str) -> None:
        await self._try(
            lambda: self._fill(
                keys=[keys.epoch(follower_id), keys.follow_state(follower_id, followee_id)],
                args=[seen, "1" if following else "0", self._ttl],
            )
        )

    async def read_relationships(
        self, actor_id: int, target_ids: Sequence[int]
    ) -> tuple[dict[int, Relationship], str | None]:
        """The cached entries (one round trip: all keys share the actor's slot) and the actor's
        epoch to guard a fill of the rest (None: do not fill). A target is cached when both its
        relationship and its mute entry are."""
        if not target_ids:
            return {}, None
        if not self.trusted:
            self._count("relationships", 0, len(target_ids))
            return {}, None
        n = len(target_ids)
        entry_keys = [keys.relationship(actor_id, t) for t in target_ids] + [keys.mute(actor_id, t) for t in target_ids]
        near = await self._near_values("relationships", entry_keys)
        if near is not None:  # every one in this process, after a fence: nothing to fill
            self._count("relationships", n, 0)
            return {t: _relationship(near[i], near[n + i]) for i, t in enumerate(target_ids)}, None
        stamps = [self._near.stamp(key) for key in entry_keys] if self._near is not None else []
        ok, replies = await self._try(
            lambda: self._read(lambda pipe: pipe.execute_command("MGET", keys.epoch(actor_id), *entry_keys))
        )
        if not ok or replies is None:
            self._count("relationships", 0, n)
            return {}, None
        values: list[str | None] = replies[0]  # type: ignore[assignment]  # MGET's reply
        epoch, flags, mutes = values[0], values[1 : n + 1], values[n + 1 :]
        found = {t: _relationship(f, m) for t, f, m in zip(target_ids, flags, mutes, strict=True) if f and m}
        self._count("relationships", len(found), n - len(found))
        if self._near is not None:
            for key, value, stamp in zip(entry_keys, values[1:], stamps, strict=True):
                if value:
                    self._near.put(key, value, stamp)
        if epoch is None:  # never guard a fill with a missing epoch (scripts._BUMP): make one
            return found, await self.epoch(actor_id)
        return found, str(epoch)

    async def fill_relationships(self, actor_id: int, found: dict[int, Relationship], seen: str) -> None:
        if not found:
            return
        entry_keys = [keys.relationship(actor_id, t) for t in found] + [keys.mute(actor_id, t) for t in found]
        values = [r.encode() for r in found.values()] + [r.encode_mute() for r in found.values()]
        await self._try(
            lambda: self._fill_many(keys=[keys.epoch(actor_id), *entry_keys], args=[seen, self._ttl, *values])
        )

    async def get_private(self, user_id: int) -> bool | None:
        if not self.trusted:
            self._count("privacy", 0, 1)
            return None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(keys.privacy(user_id))))
        value = values[0] if ok and values is not None else None
        if value is None:
            self._count("privacy", 0, 1)
            return None
        self._count("privacy", 1, 0)
        return bool(value == "1")

    async def fill_private(self, user_id: int, private: bool, seen: str) -> None:
        await self._try(
            lambda: self._fill(
                keys=[keys.privacy_epoch(user_id), keys.privacy(user_id)], args=[seen, int(private), self._ttl]
            )
        )

    async def get_states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        """The cached lifecycle states of those accounts that have one cached (from the near cache,
        after a fence, when it holds them all: the hot path of every read that names accounts)."""
        wanted = list(dict.fromkeys(user_ids))
        if not self.trusted:
            self._count("account_state", 0, len(wanted))
            return {}
        state_keys = [keys.account_state(u) for u in wanted]
        near = await self._near_values("account_state", state_keys)
        if near is not None:
            self._count("account_state", len(wanted), 0)
            return {u: Lifecycle(str(v)) for u, v in zip(wanted, near, strict=True)}
        stamps = [self._near.stamp(key) for key in state_keys] if self._near is not None else []
        ok, replies = await self._try(lambda: self._read(lambda pipe: self._queue_gets(pipe, state_keys)))
        values: list[object] = [] if not ok or replies is None else _flat(replies)
        found = {u: Lifecycle(str(v)) for u, v in zip(wanted, values, strict=False) if v is not None}
        self._count("account_state", len(found), len(wanted) - len(found))
        if self._near is not None and values:
            for key, value, stamp in zip(state_keys, values, stamps, strict=True):
                if value is not None:
                    self._near.put(key, value, stamp)
        return found

    def _queue_gets(self, pipe: Any, state_keys: list[str]) -> None:
        """One MGET on a single node (the keys are in many slots, which only a Cluster minds); a GET
        each on a Cluster, which sends them to their nodes."""
        if isinstance(self._redis, Redis):
            pipe.execute_command("MGET", *state_keys)
        else:
            for key in state_keys:
                pipe.get(key)

    async def fill_state(self, user_id: int, state: Lifecycle, seen: str) -> None:
        await self._try(
            lambda: self._fill(
                keys=[keys.privacy_epoch(user_id), keys.account_state(user_id)], args=[seen, state.value, self._ttl]
            )
        )

    async def get_suggestions(self, user_id: int) -> str | None:
        if not self.trusted:
            return None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(keys.suggestions(user_id))))
        value = values[0] if ok and values is not None else None
        return str(value) if value is not None else None

    async def fill_suggestions(self, user_id: int, value: str, seen: str, ttl_seconds: int) -> None:
        await self._try(
            lambda: self._fill(keys=[keys.epoch(user_id), keys.suggestions(user_id)], args=[seen, value, ttl_seconds])
        )


def _flat(replies: list[object]) -> list[object]:
    """The values of ``_queue_gets``' replies: one MGET's list, or a GET's value each."""
    if len(replies) == 1 and isinstance(replies[0], list):
        return list(replies[0])
    return replies


def _relationship(flags: object, mute: object) -> Relationship:
    return Relationship.decode(str(flags)).with_mute(str(mute))
