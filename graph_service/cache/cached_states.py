"""``AccountStates`` read through the graph cache: the state of every account a call names is
needed by nearly every RPC (SPEC §3b), so it is cached like the privacy flag (and kept in the near
cache), filled under the user's settings epoch and dropped by every lifecycle change before it is
acknowledged (``GraphChanges.settings_settled``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graph_service.domain.account_ports import AccountStateCache, AccountStates
from graph_service.domain.accounts import Lifecycle

__all__ = ["CachedAccountStates"]


class CachedAccountStates:
    def __init__(self, store: AccountStates, cache: AccountStateCache) -> None:
        self._store = store
        self._cache = cache

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        found = await self._cache.get_states(user_ids)
        missing = [u for u in dict.fromkeys(user_ids) if u not in found]
        if not missing:
            return found
        epochs = await asyncio.gather(*(self._cache.privacy_epoch(u) for u in missing))
        loaded = await self._store.states(missing)
        await asyncio.gather(
            *(self._cache.fill_state(u, loaded[u], seen) for u, seen in zip(missing, epochs, strict=True) if seen)
        )
        return {**found, **loaded}
