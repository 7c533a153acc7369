"""DeactivateAccount, ReactivateAccount, DeleteAccount, GetAccountState (SPEC §3b).

Each call is one conditional write of the account's state item (and its job's registration), on
the generation it read: of two racing calls one commits first and the other reads again and
decides afresh, so the later call always wins. The write is acknowledged only once every cache
has dropped the account's state (``GraphChanges.settings_settled``): from then on every replica
answers as the new state says. The job itself runs in the background (``account_jobs``).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from graph_service.domain.account_ports import AccountStore
from graph_service.domain.accounts import AccountStatus, Lifecycle
from graph_service.domain.errors import AccountDeleted, Unavailable
from graph_service.domain.ids import require_id
from graph_service.domain.ports import GraphChanges
from graph_service.domain.times import now_us
from graph_service.rules.races import RACE_ATTEMPTS

__all__ = ["AccountLifecycle"]

log = structlog.get_logger(__name__)
_Test = Callable[[Lifecycle], bool]
"""Whether the account is already where the call would move it."""


class AccountLifecycle:
    def __init__(self, store: AccountStore, changes: GraphChanges) -> None:
        self._store = store
        self._changes = changes

    async def deactivate(self, user_id: int) -> None:
        """Idempotent: an account already away stays as it is; a deleted one is ``ACCOUNT_DELETED``
        (deactivating it would say it could come back)."""
        await self._move(user_id, Lifecycle.DEACTIVATING, lambda s: not s.in_graph)

    async def reactivate(self, user_id: int) -> None:
        """Idempotent: an account in the graph (or coming back) stays as it is; a deleted one is
        ``ACCOUNT_DELETED``."""
        await self._move(user_id, Lifecycle.REACTIVATING, lambda s: s.in_graph)

    async def delete(self, user_id: int) -> None:
        """Irreversible; idempotent."""
        await self._move(user_id, Lifecycle.DELETING, lambda s: s.deleted)

    async def status(self, user_id: int) -> AccountStatus:
        require_id(user_id, "user_id")
        return await self._store.status(user_id)

    async def _move(self, user_id: int, to: Lifecycle, there: _Test) -> None:
        require_id(user_id, "user_id")
        for _ in range(RACE_ATTEMPTS):
            current = await self._store.status(user_id)
            if current.state.deleted and not to.deleted:
                raise AccountDeleted(user_id)
            if there(current.state):
                break
            if await self._store.change(current, to, now_us()):
                log.info("account_state_changed", user_id=user_id, state=to.name, was=current.state.name)
                break
        else:
            raise Unavailable("the account's state kept changing under the call")
        # Also after a repeat: a first call that failed after its write may not have settled it.
        await self._changes.settings_settled(user_id)
